/// A spot whose `input:` is still `UNSET` (as `parkwise-bridge export-config` writes every spot): what
/// `walk-test --learn` needs to wire it by walking and to write the input it saw into the file.
public struct UnsetSpot: Sendable, Hashable {
    public var id: String
    public var level: String
    /// Where the `UNSET` scalar stands in the file (1-based line and column).
    public var mark: Mark
    /// The spot's `delayed_on`: how long a sensor must stay covered before the agent counts it.
    public var delayedOn: Duration
    /// The spot's `active_low` when the file sets it, nil when it does not (then learning writes it if needed).
    public var activeLow: Bool?

    public init(id: String, level: String, mark: Mark, delayedOn: Duration, activeLow: Bool?) {
        self.id = id
        self.level = level
        self.mark = mark
        self.delayedOn = delayedOn
        self.activeLow = activeLow
    }

    /// The config's text with every spot of `wiring` wired (see `wired(in:input:activeLow:)`), from the last in the
    /// file to the first, so a line added for one never moves the place of another; nil when any place is not `UNSET`.
    public static func wiring(_ text: String, _ wiring: [(spot: UnsetSpot, input: String, activeLow: Bool)]) -> String? {
        var text = text
        for edit in wiring.sorted(by: { ($0.spot.mark.line, $0.spot.mark.column) > ($1.spot.mark.line, $1.spot.mark.column) }) {
            guard let wired = edit.spot.wired(in: text, input: edit.input, activeLow: edit.activeLow) else { return nil }
            text = wired
        }
        return text
    }

    /// The config's text with this spot's `UNSET` replaced by `input` (quoted when it holds a colon), and
    /// `active_low: true` added beside it when the sensor reads high at rest and the file does not say; nil when the
    /// text at `mark` is not `UNSET` (the file changed since it was read). Everything else, comments included, stays.
    public func wired(in text: String, input: String, activeLow: Bool) -> String? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard mark.line >= 1, mark.line <= lines.count else { return nil }
        let line = Array(lines[mark.line - 1].unicodeScalars)
        let start = mark.column - 1, token = Array(ConfigDefaults.inputNotSet.unicodeScalars)
        guard start >= 0, start + token.count <= line.count, Array(line[start..<start + token.count]) == token else { return nil }
        let value = input.contains(":") || input.contains(" ") ? "\"\(input)\"" : input
        let before = String(String.UnicodeScalarView(line[..<start]))
        let after = String(String.UnicodeScalarView(line[(start + token.count)...]))
        let addActiveLow = activeLow && self.activeLow == nil
        let rest = after.drop(while: { $0 == " " })
        if addActiveLow && (rest.hasPrefix(",") || rest.hasPrefix("}")) {
            // A flow mapping, `{ id: P1-A-01, input: UNSET }`: the key goes beside the input.
            lines[mark.line - 1] = before + value + ", active_low: true" + after
        } else {
            lines[mark.line - 1] = before + value + after
            if addActiveLow {
                // A block mapping: a line of its own, indented like `input:`.
                let indent = before.firstRange(of: "input:").map { before[..<$0.lowerBound] } ?? before.prefix(while: { $0 == " " })
                let spaces = String(repeating: " ", count: indent.count)
                lines.insert(spaces + "active_low: true", at: mark.line)
            }
        }
        return lines.joined(separator: "\n")
    }
}
