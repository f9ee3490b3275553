import ParkWiseCore

/// A configured input found on the machine: a chip and a line offset on it.
struct ResolvedLine {
    let chip: ChipHandle
    let offset: Int

    /// "pinctrl-rp1 line 17 (gpiochip0)".
    var place: String { "\(chip.label) line \(offset) (\(chip.name))" }
}

/// Turns the config's line references into chip lines: by chip label and line name, never by gpiochip number
/// (which changed on the Pi 5 between kernels).
struct LineResolver {
    let chips: ChipSet
    /// The board profile in use, configured or detected; nil when none is known.
    let board: String?
    let mainChipLabel: String?

    /// Checks the board choice, then opens every chip.
    init(board choice: BoardChoice) throws(GPIOError) {
        (board, mainChipLabel) = try Self.profile(for: choice)
        chips = ChipSet()
        if chips.isEmpty {
            throw GPIOError(code: .noGPIO,
                            message: "this machine has no GPIO chips (no /dev/gpiochip*). On a Raspberry Pi this means "
                                + "the kernel's GPIO driver is missing; on a machine without GPIO set `board: simulated`")
        }
    }

    /// The board name and its main chip label for a board choice; nil, nil when `auto` finds no known board.
    static func profile(for choice: BoardChoice) throws(GPIOError) -> (board: String?, mainChipLabel: String?) {
        switch choice {
        case .simulated:
            throw GPIOError(code: .boardUnknown,
                            message: "board 'simulated' has no GPIO lines; the agent uses the traffic simulator for it")
        case .auto:
            let board = BoardProfile.detect()
            return (board, board.flatMap { BoardProfile.mainChipLabel(board: $0) })
        case .named(let name):
            guard let label = BoardProfile.mainChipLabel(board: name) else {
                throw GPIOError(code: .boardUnknown,
                                message: "unknown board '\(name)'; known boards: "
                                    + BoardProfile.knownBoards.joined(separator: ", ") + ", or use `board: auto`")
            }
            return (name, label)
        }
    }

    func resolve(_ input: InputConfig) throws(GPIOError) -> ResolvedLine {
        switch input.ref {
        case .gpio(let number):
            return try resolveGPIO(number, for: input)
        case .headerPin(let pin):
            guard let number = InputRef.gpio(ofHeaderPin: pin) else {
                throw GPIOError(code: .lineNotFound,
                                message: "\(who(input)) is on header pin \(pin), which is a power or ground pin, not a GPIO")
            }
            return try resolveGPIO(number, for: input)
        case .chipLine(let label, let line):
            return try resolveChipLine(chip: label, line: line, for: input)
        }
    }

    /// `GPIO<n>`: that line of the board's main chip; without a profile (or without that chip), that line name on any chip.
    private func resolveGPIO(_ number: Int, for input: InputConfig) throws(GPIOError) -> ResolvedLine {
        let name = "GPIO\(number)"
        var missingChip: String?
        if let label = mainChipLabel {
            if let chip = chips.chip(label: label) {
                // On pinctrl-bcm2835, -bcm2711 and -rp1 the header GPIOs 0-27 are offsets 0-27. Some kernels name a
                // few of them by function instead ("TXD1", "GPIO_GCLK", "ID_SDA"), so the offset is the fallback.
                let byOffset = number <= 27 && number < chip.lineCount ? number : nil
                if let offset = chip.offset(ofLineNamed: name, likely: byOffset) ?? byOffset {
                    return ResolvedLine(chip: chip, offset: offset)
                }
                throw GPIOError(code: .lineNotFound,
                                message: "\(who(input)): chip \(chip.label) (\(chip.name)) has no line \(name). "
                                    + lineNamesHint(chip))
            }
            missingChip = "board \(board ?? "?") has its GPIOs on chip '\(label)', which this machine does not have "
                + "(chips: \(chips.summary)); check `board:` in the config, or use `board: auto`. "
        }
        let named = chips.chips.compactMap { chip in chip.offset(ofLineNamed: name).map { ResolvedLine(chip: chip, offset: $0) } }
        if named.count == 1 { return named[0] }
        if named.count > 1 {
            throw GPIOError(code: .lineNotFound,
                            message: "\(who(input)): " + (missingChip ?? "") + "several GPIO chips have a line named \(name): "
                                + named.map(\.place).joined(separator: ", ") + ". Set `board:` to the board's name, or "
                                + "write the line as chip:line, e.g. '\(named[0].chip.label):\(name)'")
        }
        if let failure = chips.openFailure { throw failure }
        let profileNote = board == nil ? "The board was not recognised (/proc/device-tree/model), so any chip's line "
            + "named \(name) would do. " : ""
        throw GPIOError(code: missingChip == nil ? .lineNotFound : .wrongBoard,
                        message: "\(who(input)): " + (missingChip ?? "") + profileNote
                            + "No GPIO chip has a line named \(name)"
                            + (missingChip == nil ? " (chips: \(chips.summary)). " : ". ")
                            + "Write the line as chip:line instead, e.g. '\(chips.chips.first?.label ?? "chip-label"):0'; "
                            + "`parkwise-agent lines` lists them")
    }

    /// `chip:line`: the chip by label, kernel name or sysfs device name (see `ChipSet.chips(matching:)`); on it the
    /// line by name, else by offset, else on an MCP23017/MCP23S17 by its pin name GPA0-GPA7, GPB0-GPB7 (offsets 0-15).
    private func resolveChipLine(chip label: String, line: String, for input: InputConfig) throws(GPIOError) -> ResolvedLine {
        let matching = chips.chips(matching: label)
        guard let chip = matching.first else {
            if let failure = chips.openFailure { throw failure }
            throw GPIOError(code: .chipNotFound,
                            message: "\(who(input)): there is no GPIO chip labelled or named '\(label)'. Chips on this machine: "
                                + "\(chips.summary). Check the spelling; for an expander, check that its dtoverlay is in "
                                + "/boot/firmware/config.txt and that it answers on its bus (i2cdetect)")
        }
        guard matching.count == 1 else {
            let devices = matching.map { "\($0.name)" + ($0.device.map { " (device \($0))" } ?? "") }
            let example = matching.first(where: { $0.device != nil })?.device ?? matching[0].name
            throw GPIOError(code: .chipAmbiguous,
                            message: "\(who(input)): \(matching.count) GPIO chips are labelled '\(label)': "
                                + devices.joined(separator: ", ") + ". Name the chip by its device instead, e.g. '"
                                + "\(example):\(line)' (for an I2C expander: bus-address, '1-0020' is 0x20 on bus 1)")
        }
        if let offset = chip.offset(ofLineNamed: line) {
            return ResolvedLine(chip: chip, offset: offset)
        }
        if let offset = Int(line), offset >= 0, offset < chip.lineCount {
            return ResolvedLine(chip: chip, offset: offset)
        }
        if let offset = Self.expanderPinOffset(line, chipLabel: chip.label), offset < chip.lineCount {
            return ResolvedLine(chip: chip, offset: offset)
        }
        throw GPIOError(code: .lineNotFound,
                        message: "\(who(input)): chip \(chip.label) (\(chip.name)) has no line named '\(line)'"
                            + (Int(line) != nil ? " and no offset \(line)" : "") + ". " + lineNamesHint(chip))
    }

    /// An MCP23017/MCP23S17 pin name, GPA0-GPA7 or GPB0-GPB7 (any case), as the line offset the kernel's
    /// pinctrl-mcp23s08 driver gives it (port A 0-7, port B 8-15); nil for other chips or names.
    static func expanderPinOffset(_ line: String, chipLabel: String) -> Int? {
        let label = chipLabel.lowercased()
        guard label.hasPrefix("mcp23017") || label.hasPrefix("mcp23s17") else { return nil }
        let pin = Array(line.uppercased().utf8)
        guard pin.count == 4, pin[0] == UInt8(ascii: "G"), pin[1] == UInt8(ascii: "P"),
              pin[3] >= UInt8(ascii: "0"), pin[3] <= UInt8(ascii: "7") else { return nil }
        let bit = Int(pin[3] - UInt8(ascii: "0"))
        switch pin[2] {
        case UInt8(ascii: "A"): return bit
        case UInt8(ascii: "B"): return 8 + bit
        default: return nil
        }
    }

    /// "spot P2-A-01 (pin 11 = GPIO17, config line 42)".
    private func who(_ input: InputConfig) -> String {
        var ref = input.ref.description
        if case .headerPin(let pin) = input.ref, let number = InputRef.gpio(ofHeaderPin: pin) { ref += " = GPIO\(number)" }
        return "\(input.owner) (\(ref), config line \(input.mark.line))"
    }

    /// Some line names of a chip and its offset range, so the technician can correct the config.
    private func lineNamesHint(_ chip: ChipHandle) -> String {
        let names = chip.lineNames().compactMap { $0 }
        let range = chip.lineCount > 0 ? "offsets 0-\(chip.lineCount - 1)" : "no lines"
        guard !names.isEmpty else { return "Its lines have no names; use an offset (\(range))" }
        let shown = names.prefix(16).joined(separator: ", ") + (names.count > 16 ? ", …" : "")
        return "Its lines (\(range)) include: \(shown); `parkwise-agent lines` lists them all"
    }
}
