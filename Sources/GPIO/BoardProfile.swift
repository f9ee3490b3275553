import SystemIO
import Glibc

/// Which GPIO chip carries a board's header GPIOs, found by the chip's label
/// (never by gpiochip number: on the Pi 5 that number changed between kernels).
public enum BoardProfile {
    /// Board names as written in the config (`board:`), with the label of their main GPIO chip.
    static let profiles: [(board: String, mainChipLabel: String)] = [
        ("raspberry-pi-3", "pinctrl-bcm2835"),
        ("raspberry-pi-zero-2-w", "pinctrl-bcm2835"),
        ("raspberry-pi-4", "pinctrl-bcm2711"),
        ("raspberry-pi-400", "pinctrl-bcm2711"),
        ("raspberry-pi-cm4", "pinctrl-bcm2711"),
        ("raspberry-pi-5", "pinctrl-rp1"),
        ("raspberry-pi-cm5", "pinctrl-rp1"),
    ]

    static var knownBoards: [String] { profiles.map(\.board) }

    /// The board this agent runs on, from the device tree model (e.g. "raspberry-pi-5"), or nil when unknown.
    public static func detect() -> String? {
        guard let model = readModel() else { return nil }
        return board(fromModel: model)
    }

    /// The label of the chip whose lines are the board's `GPIO<n>` (e.g. "pinctrl-rp1"), or nil for an unknown board.
    public static func mainChipLabel(board: String) -> String? {
        profiles.first(where: { $0.board == board })?.mainChipLabel
    }

    /// "Raspberry Pi 5 Model B Rev 1.0" -> "raspberry-pi-5". Words are compared whole, so a
    /// "Raspberry Pi 500" is not taken for a Pi 5.
    static func board(fromModel model: String) -> String? {
        let words = model.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\0" })
        guard words.count >= 3, words[0] == "Raspberry", words[1] == "Pi" else { return nil }
        let rest = Array(words.dropFirst(2))
        switch rest[0] {
        case "5": return "raspberry-pi-5"
        case "4": return "raspberry-pi-4"
        case "400": return "raspberry-pi-400"
        case "3": return "raspberry-pi-3"
        case "Zero" where rest.count >= 3 && rest[1] == "2" && rest[2] == "W":
            return "raspberry-pi-zero-2-w"
        case "Compute" where rest.count >= 3 && rest[1] == "Module":
            switch rest[2] {
            case "4", "4S": return "raspberry-pi-cm4"  // the CM4S is a BCM2711 as well
            case "5": return "raspberry-pi-cm5"
            default: return nil
            }
        default: return nil
        }
    }

    /// The device tree model string without its trailing NUL (e.g. "Raspberry Pi 5 Model B Rev 1.0"), or nil on a
    /// machine without a device tree.
    public static func readModel() -> String? {
        for path in ["/proc/device-tree/model", "/sys/firmware/devicetree/base/model"] {
            if let bytes = readSmallFile(path) {
                let text = String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
                return text.trimmingWhitespace
            }
        }
        return nil
    }
}

/// The whole content of a small file (a few KiB at most), or nil when it cannot be read.
func readSmallFile(_ path: String, limit: Int = 4096) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 512)
    while bytes.count < limit {
        let count = retryingOnInterrupt { chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) } }
        if count < 0 { return nil }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    return bytes
}

private extension String {
    /// Without leading and trailing spaces, tabs and newlines.
    var trimmingWhitespace: String {
        let space: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" }
        guard let first = firstIndex(where: { !space($0) }), let last = lastIndex(where: { !space($0) }) else { return "" }
        return String(self[first...last])
    }
}
