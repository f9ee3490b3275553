/// The lines a config may use on the board it names: the GPIOs the board brings out, and not the
/// pins that carry the I2C bus of the expanders the same config reads.
extension ConfigReader {
    /// Every Raspberry Pi the agent knows brings out GPIO0–GPIO27 (40-pin header or module connector);
    /// higher numbers are the SoC's own (Wi-Fi, SD card, camera) and reach no sensor.
    public static let boardGPIOs = 0...27

    /// The I2C buses an expander may sit on and the GPIOs (SDA, SCL) each takes: bus 1 (`i2c_arm`, where expander
    /// overlays go unless told otherwise) on GPIO2/3, and the Raspberry Pi 4's extra buses at their overlays' default
    /// pins (`dtoverlay=i2c3`: bus 3 on GPIO4/5; i2c4 6/7, i2c5 12/13, i2c6 22/23). Other buses (the HATs' EEPROM bus,
    /// HDMI's) take no header GPIO a sensor could use.
    public static let i2cBusPins: [Int: [Int: String]] = [
        1: [2: "SDA", 3: "SCL"], 3: [4: "SDA", 5: "SCL"], 4: [6: "SDA", 7: "SCL"], 5: [12: "SDA", 13: "SCL"],
        6: [22: "SDA", 23: "SCL"],
    ]

    /// The I2C bus of an expander chip: `N-00AA` (by device) is on bus N; one named by its label is on bus 1; nil for a
    /// chip that is no I2C expander (a `gpiochipN`, an SPI expander).
    public static func i2cBus(ofChip chip: String) -> Int? {
        let parts = chip.split(separator: "-", omittingEmptySubsequences: false)
        if parts.count == 2, let bus = Int(parts[0]), parts[1].count == 4, parts[1].allSatisfy(\.isHexDigit) { return bus }
        return i2cExpanderLabels.contains(chip) ? 1 : nil
    }

    /// The header pins of a bus's GPIOs, for a hint ("GPIO4 and GPIO5 (pins 7 and 29)").
    static func describePins(ofBus bus: Int) -> String {
        let gpios = (i2cBusPins[bus] ?? [:]).keys.sorted()
        let pins = gpios.map { gpio in (1...40).first { InputRef.gpio(ofHeaderPin: $0) == gpio }.map(String.init) ?? "?" }
        return gpios.map { "GPIO\($0)" }.joined(separator: " and ") + " (pins " + pins.joined(separator: " and ") + ")"
    }

    /// Chip labels of I2C GPIO expanders (hardware/boards/README.md); `mcp23s17` is SPI and is not one.
    public static let i2cExpanderLabels = ["mcp23017", "mcp23008", "pcf8574", "pcf8575", "pca9555", "pca9535", "tca9555"]

    mutating func checkBoardLines(board: BoardChoice?) {
        if case .named(let name) = board {
            for input in inputsSeen {
                guard let gpio = input.gpioNumber, !Self.boardGPIOs.contains(gpio) else { continue }
                report(input.mark, "\(input.owner) uses GPIO\(gpio), which the \(name) does not bring out",
                       hint: "sensors go on GPIO\(Self.boardGPIOs.lowerBound)–GPIO\(Self.boardGPIOs.upperBound) "
                           + "(header pins 3–40), or on an expander line CHIP:LINE")
            }
        }
        // The first input on each bus an expander of this config sits on: its pins are the bus's, not a sensor's.
        var expanders: [Int: InputConfig] = [:]
        for input in inputsSeen { if let bus = input.i2cBus, expanders[bus] == nil { expanders[bus] = input } }
        guard !expanders.isEmpty else { return }
        for input in inputsSeen {
            guard let gpio = input.gpioNumber else { continue }
            for (bus, expander) in expanders.sorted(by: { $0.key < $1.key }) {
                guard let signal = Self.i2cBusPins[bus]?[gpio] else { continue }
                report(input.mark, "\(input.owner) uses GPIO\(gpio), which carries I2C bus \(bus) (\(signal)) for the expander "
                           + "of \(expander.owner) (\(expander.ref))",
                       hint: "move the sensor to a free GPIO; \(Self.describePins(ofBus: bus)) belong to the I2C bus")
            }
        }
    }
}

extension InputConfig {
    /// The board GPIO number, however it was written (`GPIO17`, `pin 11`); nil for expander lines.
    var gpioNumber: Int? {
        switch ref {
        case .gpio(let n): return n
        case .headerPin(let pin): return InputRef.gpio(ofHeaderPin: pin)
        case .chipLine: return nil
        }
    }

    /// The I2C bus of the expander this line is on (`3-0020:GPA0`: 3; by an expander's label: 1); nil for a GPIO.
    public var i2cBus: Int? {
        guard case .chipLine(let chip, _) = ref else { return nil }
        return ConfigReader.i2cBus(ofChip: chip)
    }
}
