import ConfigFile
import Dispatch
import FoundationEssentials
import GPIO
import Glibc
import ParkWiseCore
import ParkWiseLog
import Simulation
import Synchronization

enum RunCommand {
    static let spec = CommandSpec(
        name: "run", abstract: "Run the agent: read the sensors and publish to the broker.",
        discussion: """
        With `board: simulated` in the config, or --simulate, a traffic simulator drives every
        configured input; with --replay, a recorded trace does. Both feed the same pipeline as GPIO.
        SIGTERM or SIGINT stops gracefully (offline status, clean disconnect); a second one forces.
        """,
        options: [
            .init(name: "config", value: "file", help: "The config file (YAML).", required: true),
            .init(name: "simulate", value: nil, help: "Drive the inputs from the traffic simulator."),
            .init(name: "replay", value: "trace", help: "Drive the inputs from a trace (JSON lines); no GPIO is opened."),
            .init(name: "speed", value: "factor", help: "Run simulated or replayed time this many times faster (default 1)."),
            .init(name: "seed", value: "n", help: "Seed of the traffic simulator (default 1)."),
            .init(name: "sim-start", value: "hh:mm", help: "Local time of day the simulation starts at (default 06:30)."),
            .init(name: "broker", value: "url", help: "Use this broker instead of the config's (e.g. mqtt://127.0.0.1:1883)."),
            .init(name: "outbox", value: "dir", help: "Keep the outbox and counters here instead of the config's outbox.path."),
            .init(name: "verbose", value: nil, help: "Log every event (debug level)."),
        ])

    static func run(_ args: ParsedArguments) async -> Int32 {
        let path = args.option("config")!
        if args.flag("verbose") || ProcessInfo.processInfo.environment["PARKWISE_LOG"] == "debug" { Log.threshold = .debug }
        guard let speed = Double(args.option("speed") ?? "1"), speed > 0, speed <= 10_000 else {
            printError(UsageError(command: spec, message: "--speed must be a number between 0 and 10000").text)
            return ExitCode.usage
        }
        guard let seed = UInt64(args.option("seed") ?? "1") else {
            printError(UsageError(command: spec, message: "--seed must be a whole number").text)
            return ExitCode.usage
        }
        guard let startMinute = parseTimeOfDay(args.option("sim-start") ?? "06:30") else {
            printError(UsageError(command: spec, message: "--sim-start must be a time like 06:30").text)
            return ExitCode.usage
        }
        var config: AgentConfig
        do { config = try ConfigFile.load(path: path) } catch {
            printError(error.description)
            return ExitCode.config
        }
        if let url = args.option("broker") {
            guard let broker = BrokerAddress.parse(url) else {
                printError(UsageError(command: spec, message: "'\(url)' is not a broker address like mqtt://HOST:PORT").text)
                return ExitCode.usage
            }
            config.mqtt.brokers = [broker]
        }
        if let dir = args.option("outbox") { config.outbox.path = dir }
        let credentials: Credentials?
        do {
            credentials = try config.mqtt.credentialsPath.map(Credentials.load)
            if let key = config.mqtt.tls?.key { try Credentials.checkPrivate(key, what: "TLS key file") }
        } catch {
            printError("error: \(error)")
            return ExitCode.config
        }

        let source: LineSource
        let clock: AgentClock
        if let tracePath = args.option("replay") {
            guard let bytes = FileManager.default.contents(atPath: tracePath) else {
                printError("error: cannot read trace \(tracePath)\n    hint: check the path and permissions")
                return ExitCode.failure
            }
            do { source = .trace(try TraceFile.parse(Array(bytes), inputs: config.inputs)) } catch {
                printError("\(tracePath):\(error.line): error: \(error.message)")
                return ExitCode.failure
            }
            clock = AgentClock(speed: speed)
        } else if args.flag("simulate") || config.board == .simulated {
            source = .simulator(TrafficSimulator(config: config, seed: seed, startMinute: startMinute))
            clock = AgentClock(speed: speed)
        } else {
            do {
                source = .board(try GPIOBoard.open(inputs: config.inputs, board: config.board,
                                                   consumer: "parkwise-agent"))
            } catch {
                printError("error: \(error.message)" + (error.errno.map { " (errno \($0))" } ?? ""))
                return ExitCode.config
            }
            clock = AgentClock()
        }

        let runtime = AgentRuntime(config: config, source: source, clock: clock, credentials: credentials,
                                   options: .init(configHash: ConfigFile.hash(path: path)))
        let signals = SignalHandlers(stop: runtime.stopper)
        let code = await runtime.run()
        signals.cancel()
        return code
    }

    /// `06:30` -> minutes after midnight.
    static func parseTimeOfDay(_ text: String) -> Int? {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let h = Int(parts[0]), let m = Int(parts[1]), (0..<24).contains(h), (0..<60).contains(m)
        else { return nil }
        return h * 60 + m
    }
}

/// First SIGTERM/SIGINT: graceful stop through the event loop. Second: forced exit.
final class SignalHandlers {
    private let sources: [any DispatchSourceSignal]

    init(stop: AsyncStream<AgentInput>.Continuation) {
        let received = Atomic<Int>(0)
        sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if received.add(1, ordering: .relaxed).newValue == 1 {
                    Log.info("stop requested", ["signal": number == SIGTERM ? "TERM" : "INT"])
                    stop.yield(.stop)
                } else {
                    Log.warn("second stop signal, forced exit", [:])
                    _exit(ExitCode.failure)
                }
            }
            source.resume()
            return source
        }
    }

    func cancel() { sources.forEach { $0.cancel() } }
}
