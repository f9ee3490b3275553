import ParkWiseCore

/// The lines `walk-test --learn` watches, each named as a config writes it: the board's GPIO0–GPIO27 (without
/// GPIO2/GPIO3 when an I2C expander is there: they are its bus), every line of each GPIO expander chip, and the
/// lines the config already uses (with their owner, so that a sensor on one of them is refused, not learned twice).
/// Never the SoC's other lines (Wi-Fi, SD card): requesting one as an input would take it from its driver.
public enum LearnableLines {
    public struct Line: Sendable, Hashable {
        /// As the config writes it: `GPIO17`, `mcp23017:GPA0`, `1-0021:GPB3`.
        public var input: String
        /// `spot P1-A-01`, `lane ramp loop a`: the config's input on this line; nil when the line is free.
        public var owner: String?
    }

    /// Expander chips by label: the I2C ones the config reader knows, and the SPI MCP23S17.
    static let expanderLabels = ConfigReader.i2cExpanderLabels + ["mcp23s17", "mcp23s08"]

    public static func find(config: AgentConfig) throws(GPIOError) -> [Line] {
        let (_, mainChipLabel) = try LineResolver.profile(for: config.board)
        let inventory = try GPIOInventory.lines()
        guard !inventory.isEmpty else {
            throw GPIOError(code: .noGPIO, message: "this machine has no GPIO chips (no /dev/gpiochip*): there is nothing to learn")
        }
        let places = InputPlaces.resolve(config.inputs, board: config.board).places
        let isExpander: (GPIOLineInfo) -> Bool = { info in
            expanderLabels.contains { info.chipLabel.lowercased().hasPrefix($0) }
        }
        // The pins of every I2C bus an expander here sits on (its device `3-0020`: bus 3; by label alone: bus 1).
        let busPins = Set(inventory.filter(isExpander).flatMap { info in
            (ConfigReader.i2cBusPins[info.chipDevice.flatMap(ConfigReader.i2cBus(ofChip:)) ?? 1] ?? [:]).keys
        })
        var labelCount: [String: Set<String>] = [:]
        for info in inventory { labelCount[info.chipLabel, default: []].insert(info.chipName) }
        var lines: [Line] = []
        for info in inventory {
            let owner = places["\(info.chipName):\(info.offset)"]
            var input: String
            if info.chipLabel == mainChipLabel {
                guard ConfigReader.boardGPIOs.contains(info.offset),
                      !busPins.contains(info.offset) else { continue }
                input = "GPIO\(info.offset)"
            } else if isExpander(info) {
                let chip = labelCount[info.chipLabel, default: []].count == 1 ? info.chipLabel : (info.chipDevice ?? info.chipName)
                input = "\(chip):\(pinName(info))"
            } else {
                continue
            }
            // A line the kernel or another program holds, or drives: not a sensor's (unless the config says it is).
            if owner == nil && (info.isUsed || info.isOutput) { continue }
            if owner == nil, lines.contains(where: { $0.input == input }) { input = "\(info.chipName):\(info.offset)" }
            lines.append(Line(input: input, owner: owner))
        }
        return lines
    }

    /// The line's name, else an MCP23x17's pin name (GPA0–GPB7), else its offset.
    static func pinName(_ info: GPIOLineInfo) -> String {
        if let name = info.name, !name.isEmpty, !name.contains(" "), !name.contains(":") { return name }
        let label = info.chipLabel.lowercased()
        if (label.hasPrefix("mcp23017") || label.hasPrefix("mcp23s17")) && info.offset < 16 {
            return (info.offset < 8 ? "GPA" : "GPB") + String(info.offset % 8)
        }
        return String(info.offset)
    }
}
