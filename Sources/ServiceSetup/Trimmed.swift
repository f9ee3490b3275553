extension StringProtocol {
    /// Without leading and trailing white space (a CR of a Windows line end included).
    package var trimmed: String { String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
}
