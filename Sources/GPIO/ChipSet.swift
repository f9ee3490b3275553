import SystemIO
/// Every GPIO chip of the machine, opened once to resolve a configuration.
/// Chips no line ends up using are closed when the set goes, in reverse order of opening.
final class ChipSet {
    private(set) var chips: [ChipHandle] = []
    /// Devices that could not be opened, with the errno: the line looked for may be on one of them.
    private(set) var unopenable: [(path: String, errno: Errno)] = []

    init() {
        for path in ChipDevices.paths() {
            do {
                chips.append(try ChipHandle.open(path: path))
            } catch {
                unopenable.append((path, error.errno))
            }
        }
    }

    deinit {
        while !chips.isEmpty { chips.removeLast() }
    }

    var isEmpty: Bool { chips.isEmpty && unopenable.isEmpty }

    /// The chips a config's chip reference means, by the first rule that matches any: the chip's label
    /// ("mcp23017", "pinctrl-rp1"), its kernel name ("gpiochip2", also as "/dev/gpiochip2"), or the name of its
    /// device in sysfs ("1-0020": the MCP23017 at 0x20 on I2C bus 1). More than one chip means the reference is
    /// ambiguous (two expanders of the same type have the same label).
    func chips(matching wanted: String) -> [ChipHandle] {
        let byLabel = chips.filter { $0.label == wanted }
        if !byLabel.isEmpty { return byLabel }
        let name = wanted.hasPrefix("/dev/") ? String(wanted.dropFirst(5)) : wanted
        let byName = chips.filter { $0.name == name }
        if !byName.isEmpty { return byName }
        return chips.filter { $0.device == wanted }
    }

    func chip(label: String) -> ChipHandle? {
        chips.first(where: { $0.label == label })
    }

    /// "pinctrl-rp1 (gpiochip0), mcp23017 (gpiochip2)": what a technician compares with the config.
    var summary: String {
        var parts = chips.map { "\($0.label) (\($0.name)\($0.device.map { ", device \($0)" } ?? ""))" }
        parts += unopenable.map { "\($0.path) (cannot open: \($0.errno.text))" }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }

    /// The error to give when a line was not found but some chips could not be opened: the line may be on one.
    var openFailure: GPIOError? {
        guard let first = unopenable.first(where: { $0.errno.isPermission }) ?? unopenable.first else { return nil }
        return .cannotOpen(first.path, errno: first.errno)
    }
}
