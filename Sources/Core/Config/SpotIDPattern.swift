/// A spot id template such as `<level>-<zone>-<nn>`: `<level>` is the spot's level id, `<zone>` one or
/// more capital letters, `<n>` one or more digits, `<nn>` exactly two digits; anything else is literal.
public struct SpotIDPattern: Sendable {
    enum Part: Equatable { case literal(Character), level, zone, digits, twoDigits }

    public let text: String
    let parts: [Part]

    public init?(_ text: String) {
        var parts: [Part] = []
        var rest = Substring(text)
        while let c = rest.first {
            if c == "<" {
                guard let close = rest.firstIndex(of: ">") else { return nil }
                switch rest[rest.index(after: rest.startIndex)..<close] {
                case "level": parts.append(.level)
                case "zone": parts.append(.zone)
                case "n": parts.append(.digits)
                case "nn": parts.append(.twoDigits)
                default: return nil
                }
                rest = rest[rest.index(after: close)...]
            } else {
                parts.append(.literal(c))
                rest = rest.dropFirst()
            }
        }
        guard !parts.isEmpty else { return nil }
        self.text = text
        self.parts = parts
    }

    public func matches(_ id: String, level: String) -> Bool {
        match(parts[...], Array(id)[...], level: Array(level))
    }

    /// An id that fits, to show in a hint.
    public func example(level: String) -> String {
        parts.map { part -> String in
            switch part {
            case .literal(let c): return String(c)
            case .level: return level
            case .zone: return "A"
            case .digits: return "1"
            case .twoDigits: return "01"
            }
        }.joined()
    }

    private func match(_ parts: ArraySlice<Part>, _ id: ArraySlice<Character>, level: [Character]) -> Bool {
        guard let part = parts.first else { return id.isEmpty }
        let rest = parts.dropFirst()
        switch part {
        case .literal(let c):
            return id.first == c && match(rest, id.dropFirst(), level: level)
        case .level:
            return id.starts(with: level) && match(rest, id.dropFirst(level.count), level: level)
        case .twoDigits:
            return id.count >= 2 && id.prefix(2).allSatisfy(\.isASCIIDigit) && match(rest, id.dropFirst(2), level: level)
        case .zone, .digits:
            let accepts: (Character) -> Bool = part == .zone ? { $0.isASCIIUpper } : { $0.isASCIIDigit }
            let run = id.prefix(while: accepts).count
            guard run > 0 else { return false }
            return (1...run).reversed().contains { match(rest, id.dropFirst($0), level: level) }
        }
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
    var isASCIIUpper: Bool { ("A"..."Z").contains(self) }
}
