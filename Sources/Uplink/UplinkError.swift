/// An outbox failure a technician can act on, with the errno when there is one.
public struct UplinkError: Error, Sendable, CustomStringConvertible {
    /// `newerFormat`: a state file written by a newer agent (see `StateFormat`): refused, never repaired.
    public enum Code: String, Sendable { case outbox, newerFormat = "newer_format" }
    public var code: Code
    public var message: String
    public var libraryCode: Int32?

    public init(_ code: Code, _ message: String, code libraryCode: Int32? = nil) {
        self.code = code
        self.message = message
        self.libraryCode = libraryCode
    }

    public var description: String { message + (libraryCode.map { " (code \($0))" } ?? "") }
}
