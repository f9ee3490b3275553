/// Short forms the status views share.
enum StatusWords {
    /// `3725` -> `1h02m`, `75` -> `1m15s`, `9` -> `9s`.
    static func duration(_ seconds: Double) -> String {
        let s = Int(max(0, seconds))
        if s >= 86_400 { return "\(s / 86_400)d\(pad2(s % 86_400 / 3600))h" }
        if s >= 3600 { return "\(s / 3600)h\(pad2(s % 3600 / 60))m" }
        if s >= 60 { return "\(s / 60)m\(pad2(s % 60))s" }
        return "\(s)s"
    }

    /// `2026-12-01T08:48:44.822Z` -> `08:48:44`.
    static func clockTime(_ iso: String?) -> String {
        guard let iso, iso.count >= 19 else { return "-" }
        return String(iso.dropFirst(11).prefix(8))
    }

    static func pad2(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    static func padded(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func plural(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }

    /// The symbol a spot shows in the grid.
    static func symbol(_ state: String) -> (String, TextLine.Colour) {
        switch state {
        case "occupied": return ("#", .red)
        case "free": return (".", .green)
        default: return ("?", .yellow)
        }
    }
}
