/// A line of terminal text in pieces, some of them coloured: its width is what shows, and it is
/// cut to a width without breaking an escape sequence.
public struct TextLine: Sendable, Equatable {
    public enum Colour: Int, Sendable { case red = 31, green = 32, yellow = 33, blue = 34, dim = 2, bold = 1 }

    public var pieces: [(text: String, colour: Colour?)] = []

    public init(_ text: String = "", _ colour: Colour? = nil) {
        if !text.isEmpty { pieces = [(text, colour)] }
    }

    public static func == (a: TextLine, b: TextLine) -> Bool {
        a.pieces.map(\.text) == b.pieces.map(\.text) && a.pieces.map(\.colour) == b.pieces.map(\.colour)
    }

    public mutating func add(_ text: String, _ colour: Colour? = nil) {
        guard !text.isEmpty else { return }
        pieces.append((text, colour))
    }

    public var width: Int { pieces.reduce(0) { $0 + $1.text.count } }
    public var plain: String { pieces.map(\.text).joined() }

    /// At most `width` characters; a line cut short ends in `…`.
    public func cut(to width: Int) -> TextLine {
        guard self.width > width else { return self }
        guard width > 0 else { return TextLine() }
        var out = TextLine()
        var room = width - 1
        for piece in pieces where room > 0 {
            let part = String(piece.text.prefix(room))
            out.add(part, piece.colour)
            room -= part.count
        }
        out.add("…")
        return out
    }

    /// The line as text, with ANSI colours when `colour`.
    public func rendered(colour: Bool) -> String {
        guard colour else { return plain }
        return pieces.map { piece in
            piece.colour.map { "\u{1B}[\($0.rawValue)m\(piece.text)\u{1B}[0m" } ?? piece.text
        }.joined()
    }
}
