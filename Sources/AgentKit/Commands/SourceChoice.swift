import FoundationEssentials
import GPIO
import ParkWiseCLI
import ParkWiseCore
import Simulation

/// Where `run` and `diagnose` take their line changes from: the board, the simulator, or a trace.
enum SourceChoice {
    static let options: [CommandSpec.Option] = [
        .init(name: "simulate", value: nil, help: "Drive the inputs from the traffic simulator."),
        .init(name: "replay", value: "trace", help: "Drive the inputs from a trace (JSON lines); no GPIO is opened."),
        .init(name: "speed", value: "factor",
              help: "Run simulated or replayed time this many times faster, 0.01 to 10000 (default 1). Event times are "
                  + "the real moments things were played, never ahead of the clock: at 60, a simulated hour is a minute "
                  + "apart on the wire (stay_s too)."),
        .init(name: "seed", value: "n", help: "Seed of the traffic simulator (default 1)."),
        .init(name: "sim-start", value: "hh:mm", help: "Local time of day the simulation starts at (default 06:30)."),
    ]

    enum Opened {
        case opened(LineSource, AgentClock)
        case failed(Int32)

        var exitCode: Int32 {
            if case .failed(let code) = self { return code }
            return ExitCode.success
        }
    }

    /// Opens what the arguments ask for; on failure the problem is printed and its exit code returned.
    static func open(_ args: ParsedArguments, config: AgentConfig, command: CommandSpec) -> Opened {
        guard let speed = speed(args, command: command) else { return .failed(ExitCode.usage) }
        guard let seed = UInt64(args.option("seed") ?? "1") else {
            printError(UsageError(command: command, message: "--seed must be a whole number").text)
            return .failed(ExitCode.usage)
        }
        guard let startMinute = parseTimeOfDay(args.option("sim-start") ?? "06:30") else {
            printError(UsageError(command: command, message: "--sim-start must be a time like 06:30").text)
            return .failed(ExitCode.usage)
        }
        if let tracePath = args.option("replay") {
            guard let bytes = trace(tracePath) else { return .failed(ExitCode.failure) }
            do { return .opened(.trace(try TraceFile.parse(bytes, inputs: config.inputs)), AgentClock(speed: speed)) } catch {
                printError("\(tracePath):\(error.line): error: \(error.message)")
                return .failed(ExitCode.failure)
            }
        }
        if args.flag("simulate") || config.board == .simulated {
            return .opened(.simulator(TrafficSimulator(config: config, seed: seed, startMinute: startMinute)),
                           AgentClock(speed: speed))
        }
        // The kernel shows who holds a line: the agent itself, or which of the technician's tools.
        let consumer = command.name == "run" ? "parkwise-agent" : "parkwise-\(command.name)"
        do {
            // The agent runs without a line another program holds (its input a fault until the line is free); the
            // technician's tools want every line, and say which one is busy.
            return .opened(.board(try GPIOBoard.open(inputs: config.inputs, board: config.board, consumer: consumer,
                                                     waitForBusyLines: command.name == "run")),
                           AgentClock())
        } catch {
            printError("error: \(error.message)" + (error.errno.map { " (errno \($0.rawValue))" } ?? ""))
            guard error.mayPassByItself else { return .failed(ExitCode.config) }
            // Exit 1, not 78: systemd starts the service again (Restart=on-failure), so a chip probed late, a line
            // freed or a group applied late brings the garage back without anyone at the cabinet.
            if command.name == "run" { printError("    (exit 1: this can pass by itself; the service is started again in 5 s)") }
            return .failed(ExitCode.failure)
        }
    }

    /// `--speed`, 0.01 to 10000 (default 1); nil, said, when it is not. (Slower than 0.01 turns a year of trace into
    /// more nanoseconds of waiting than an Int64 holds.)
    static func speed(_ args: ParsedArguments, command: CommandSpec) -> Double? {
        guard let speed = Double(args.option("speed") ?? "1"), speed >= 0.01, speed <= 10_000 else {
            printError(UsageError(command: command, message: "--speed must be a number between 0.01 and 10000").text)
            return nil
        }
        return speed
    }

    /// A trace file's bytes; nil, said, when it cannot be read.
    static func trace(_ path: String) -> [UInt8]? {
        guard let bytes = FileManager.default.contents(atPath: path) else {
            printError("error: cannot read trace \(path)\n    hint: check the path and permissions")
            return nil
        }
        return Array(bytes)
    }

    /// `06:30` -> minutes after midnight.
    static func parseTimeOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let h = Int(parts[0]), let m = Int(parts[1]), (0..<24).contains(h), (0..<60).contains(m)
        else { return nil }
        return h * 60 + m
    }
}
