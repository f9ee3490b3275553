/// The lines a config may use on the board it names: the GPIOs the board brings out, and not the
/// pins that carry the I2C bus of the expanders the same config reads.
extension ConfigReader {
    /// Every Raspberry Pi the agent knows brings out GPIO0–GPIO27 (40-pin header or module connector);
    /// higher numbers are the SoC's own (Wi-Fi, SD card, camera) and reach no sensor.
    public static let boardGPIOs = 0...27

    /// I2C bus 1 (`i2c_arm`, where expander overlays go unless told otherwise) is GPIO2 (SDA) and GPIO3 (SCL).
    public static let i2cBus1 = [2: "SDA", 3: "SCL"]

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
        guard let expander = inputsSeen.first(where: { $0.usesI2CBus1 }) else { return }
        for input in inputsSeen {
            guard let gpio = input.gpioNumber, let signal = Self.i2cBus1[gpio] else { continue }
            report(input.mark, "\(input.owner) uses GPIO\(gpio), which carries I2C bus 1 (\(signal)) for the expander of "
                       + "\(expander.owner) (\(expander.ref))",
                   hint: "move the sensor to a free GPIO; GPIO2 and GPIO3 (pins 3 and 5) belong to the I2C bus")
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

    /// A line of an expander on I2C bus 1: by device (`1-0020:GPA0`) or by an expander's label.
    public var usesI2CBus1: Bool {
        guard case .chipLine(let chip, _) = ref else { return false }
        return chip.hasPrefix("1-") || ConfigReader.i2cExpanderLabels.contains(chip)
    }
}
