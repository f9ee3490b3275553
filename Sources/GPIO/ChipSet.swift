/// Every GPIO chip of the machine, opened once to resolve a configuration.
/// Chips no line ends up using are closed when the set goes, in reverse order of opening.
final class ChipSet {
    private(set) var chips: [ChipHandle] = []
    /// Devices that could not be opened, with the errno: the line looked for may be on one of them.
    private(set) var unopenable: [(path: String, errno: Int32)] = []

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

    /// The chip with this label, or this kernel name ("gpiochip2", also accepted as "/dev/gpiochip2").
    func chip(labelOrName wanted: String) -> ChipHandle? {
        let name = wanted.hasPrefix("/dev/") ? String(wanted.dropFirst(5)) : wanted
        return chips.first(where: { $0.label == wanted }) ?? chips.first(where: { $0.name == name })
    }

    func chip(label: String) -> ChipHandle? {
        chips.first(where: { $0.label == label })
    }

    /// "pinctrl-rp1 (gpiochip0), mcp23017 (gpiochip2)": what a technician compares with the config.
    var summary: String {
        var parts = chips.map { "\($0.label) (\($0.name))" }
        parts += unopenable.map { "\($0.path) (cannot open: \(errnoText($0.errno)))" }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }

    /// The error to give when a line was not found but some chips could not be opened: the line may be on one.
    var openFailure: GPIOError? {
        guard let first = unopenable.first(where: { isPermissionError($0.errno) }) ?? unopenable.first else { return nil }
        return .cannotOpen(first.path, errno: first.errno)
    }
}
