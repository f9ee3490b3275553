/// Durations as installers write them: `250ms`, `5s`, `2m`, `1h`, `3d`, `1.5s`, or `0`.
public enum DurationText {
    /// The longest duration a config may give: a year. Longer is a typo, and would overflow the
    /// monotonic instants it is added to.
    public static let longest: Duration = .seconds(365 * 86_400)

    public static func read(_ text: String) throws(DurationTextError) -> Duration {
        let trimmed = text.trimmingSpaces
        if trimmed == "0" { return .zero }
        let units: [(String, Double)] = [("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        for (suffix, seconds) in units where trimmed.hasSuffix(suffix) {
            let number = trimmed.dropLast(suffix.count)
            guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
                  let value = Double(number), value >= 0 else { throw .notADuration }
            let total = value * seconds
            guard total <= Double(longest.components.seconds) else { throw .tooLong }
            return .nanoseconds(Int64((total * 1e9).rounded()))
        }
        throw .notADuration
    }

    /// The shortest exact spelling: `250ms`, `5s`, `2m`.
    public static func format(_ duration: Duration) -> String {
        let ms = duration.milliseconds
        if ms % 86_400_000 == 0 && ms > 0 { return "\(ms / 86_400_000)d" }
        if ms % 3_600_000 == 0 && ms > 0 { return "\(ms / 3_600_000)h" }
        if ms % 60_000 == 0 && ms > 0 { return "\(ms / 60_000)m" }
        if ms % 1000 == 0 { return "\(ms / 1000)s" }
        return "\(ms)ms"
    }
}

extension Duration {
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    public var nanosecondCount: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (looked for byte by byte: this runs for every duration and
    /// input name read, at start and for every line of a trace).
    var trimmingSpaces: String {
        let bytes = utf8
        func blank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var start = bytes.startIndex
        while start < bytes.endIndex && blank(bytes[start]) { start = bytes.index(after: start) }
        var end = start
        var at = start
        while at < bytes.endIndex {
            let next = bytes.index(after: at)
            if !blank(bytes[at]) { end = next }
            at = next
        }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}

public enum DurationTextError: Error, Sendable {
    /// Not a number and a unit.
    case notADuration
    /// A duration, but longer than `longest`.
    case tooLong
}
