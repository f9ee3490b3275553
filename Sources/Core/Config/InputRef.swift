/// Where a sensor is wired, as the installer writes it.
public enum InputRef: Hashable, Sendable, CustomStringConvertible {
    /// `GPIO17`: a line of the board's main GPIO block, by its Broadcom name.
    case gpio(Int)
    /// `pin 11`: a pin of the 40-pin header.
    case headerPin(Int)
    /// `mcp23017:GPA0` or `pinctrl-rp1:GPIO17`: a line by chip label and line name (or offset).
    case chipLine(chip: String, line: String)

    public static func parse(_ text: String) -> InputRef? {
        let t = text.trimmingSpaces
        if t.hasPrefix("GPIO"), let n = Int(t.dropFirst(4)), n >= 0, n < 64 { return .gpio(n) }
        if t.lowercased().hasPrefix("pin"), let n = Int(t.dropFirst(3).trimmingSpaces), n >= 1, n <= 40 {
            return .headerPin(n)
        }
        if let colon = t.lastIndex(of: ":") {
            let chip = String(t[..<colon]).trimmingSpaces, line = String(t[t.index(after: colon)...]).trimmingSpaces
            if !chip.isEmpty, !line.isEmpty { return .chipLine(chip: chip, line: line) }
        }
        return nil
    }

    /// The BCM GPIO number behind a header pin, or nil for power and ground pins.
    public static func gpio(ofHeaderPin pin: Int) -> Int? { headerPins[pin] }

    /// The same line however it was written: `pin 11` and `GPIO17` are one line.
    public var canonical: String {
        switch self {
        case .gpio(let n): return "GPIO\(n)"
        case .headerPin(let p): return InputRef.gpio(ofHeaderPin: p).map { "GPIO\($0)" } ?? "pin \(p)"
        case .chipLine(let chip, let line): return "\(chip):\(line)"
        }
    }

    public var description: String {
        switch self {
        case .gpio(let n): return "GPIO\(n)"
        case .headerPin(let p): return "pin \(p)"
        case .chipLine(let chip, let line): return "\(chip):\(line)"
        }
    }

    /// Raspberry Pi 40-pin header: physical pin -> BCM GPIO (all boards since the Pi 1 B+).
    static let headerPins: [Int: Int] = [
        3: 2, 5: 3, 7: 4, 8: 14, 10: 15, 11: 17, 12: 18, 13: 27, 15: 22, 16: 23, 18: 24, 19: 10,
        21: 9, 22: 25, 23: 11, 24: 8, 26: 7, 27: 0, 28: 1, 29: 5, 31: 6, 32: 12, 33: 13, 35: 19,
        36: 16, 37: 26, 38: 20, 40: 21,
    ]
}
