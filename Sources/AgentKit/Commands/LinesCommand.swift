import ConfigFile
import GPIO
import ParkWiseCLI
import ParkWiseCore

/// What an installer wires from: every GPIO line of the machine and which configured sensor it
/// serves, and the 40-pin header with each sensor on its pin.
enum LinesCommand {
    static let spec = CommandSpec(
        name: "lines", abstract: "List the machine's GPIO lines and draw the header wiring of a config.",
        discussion: "Like gpioinfo, with the config entry mapped to each line. With --config, also a drawing of\nthe 40-pin header showing which sensor goes on which pin (works without a board too).",
        options: [.config(help: "The config whose inputs to map and draw.")])

    static func run(_ args: ParsedArguments) -> Int32 {
        var config: AgentConfig?
        if let path = args.option("config") {
            do { config = try ConfigFile.load(path: path) } catch {
                printConfigIssues(error)
                return ExitCode.config
            }
        }
        let lines: [GPIOLineInfo]
        do { lines = try GPIOInventory.lines() } catch {
            printError("error: \(error.message)")
            return ExitCode.failure
        }
        var places: [String: String] = [:]
        if let config, config.board != .simulated, !lines.isEmpty {
            let resolved = InputPlaces.resolve(config.inputs, board: config.board)
            places = resolved.places
            for problem in resolved.problems { printError("warning: \(problem)") }
        }
        if lines.isEmpty {
            say("no GPIO chips on this machine (no /dev/gpiochip*)")
        }
        var chip = ""
        for line in lines {
            if line.chipName != chip {
                chip = line.chipName
                let count = lines.count(where: { $0.chipName == chip })
                say("\(chip) [\(line.chipLabel)]\(line.chipDevice.map { " device \($0)" } ?? "") \(count) lines")
            }
            let used = line.isUsed ? "used by \(line.consumer ?? "?")" : "unused"
            let owner = places["\(line.chipName):\(line.offset)"].map { "  <- \($0)" } ?? ""
            say("  \(padded(String(line.offset), 4)) \(padded(line.name ?? "-", 12)) \(padded(line.isOutput ? "output" : "input", 7)) \(used)\(owner)")
        }
        if let config {
            say("")
            say(HeaderDrawing.draw(config))
        } else if lines.isEmpty {
            return ExitCode.failure
        }
        return ExitCode.success
    }

}

/// The Raspberry Pi 40-pin header, odd pins on the left, with each configured sensor beside its pin.
enum HeaderDrawing {
    static let power: [Int: String] = [1: "3V3", 17: "3V3", 2: "5V", 4: "5V", 6: "GND", 9: "GND", 14: "GND", 20: "GND",
                                       25: "GND", 30: "GND", 34: "GND", 39: "GND"]

    static func draw(_ config: AgentConfig) -> String {
        var sensorByGPIO: [Int: String] = [:]
        for input in config.inputs {
            let gpio: Int?
            switch input.ref {
            case .gpio(let n): gpio = n
            case .headerPin(let p): gpio = InputRef.gpio(ofHeaderPin: p)
            case .chipLine: gpio = nil
            }
            if let gpio {
                var label = input.owner
                if input.activeLow { label += ", active low" }
                if input.bias != .asIs { label += ", \(input.bias.rawValue)" }
                sensorByGPIO[gpio] = label
            }
        }
        let sensors = sensorByGPIO.count
        // An expander's I2C bus takes its GPIOs (bus 1: GPIO2/3, bus 3: GPIO4/5, ...): marked, so nobody wires a sensor there.
        var busChips: [Int: Set<String>] = [:]
        for input in config.inputs {
            guard let bus = input.i2cBus, case .chipLine(let chip, _) = input.ref else { continue }
            busChips[bus, default: []].insert(chip)
        }
        for (bus, chips) in busChips {
            let expanders = chips.count == 1 ? "expander \(chips.first!)" : "\(chips.count) expanders"
            for (gpio, signal) in ConfigReader.i2cBusPins[bus] ?? [:] where sensorByGPIO[gpio] == nil {
                sensorByGPIO[gpio] = "I2C bus \(bus) \(signal) (\(expanders))"
            }
        }
        let width = max(20, sensorByGPIO.values.map(\.count).max() ?? 0)
        var out = "40-pin header (pin 1 nearest the board's corner; \(sensors) sensors on it):\n"
        for row in 0..<20 {
            let left = 2 * row + 1, right = left + 1
            let leftName = name(left), rightName = name(right)
            let leftSensor = InputRef.gpio(ofHeaderPin: left).flatMap { sensorByGPIO[$0] } ?? ""
            let rightSensor = InputRef.gpio(ofHeaderPin: right).flatMap { sensorByGPIO[$0] } ?? ""
            out += String(repeating: " ", count: width - leftSensor.count) + leftSensor
                + " " + String(repeating: " ", count: 6 - leftName.count) + leftName
                + " (\(left < 10 ? " " : "")\(left)|\(right)\(right < 10 ? " " : "")) "
                + padded(rightName, 6) + " " + rightSensor + "\n"
        }
        let elsewhere = config.inputs.filter { if case .chipLine = $0.ref { return true } else { return false } }
        if !elsewhere.isEmpty {
            let chips = Set(elsewhere.compactMap { input -> String? in
                if case .chipLine(let chip, _) = input.ref { return chip } else { return nil }
            })
            out += "\(elsewhere.count) more sensors on expander chips: \(chips.sorted().joined(separator: ", "))\n"
        }
        return out
    }

    static func name(_ pin: Int) -> String {
        power[pin] ?? InputRef.gpio(ofHeaderPin: pin).map { "GPIO\($0)" } ?? "?"
    }
}
