import SystemIO
import ConfigFile
import Glibc
import ParkWiseCLI
import ParkWiseCore
import ParkWiseLog
import Simulation

/// For field technicians: watch every input and what the garage model makes of it, live, without
/// publishing anything; optionally record the raw line changes as a trace to replay at a desk.
enum DiagnoseCommand {
    static let spec = CommandSpec(
        name: "diagnose", abstract: "Watch the inputs live (no publishing) and record a trace.",
        discussion: """
        Prints every line change (raw, before the filters) and every event the garage model makes of it,
        and on Ctrl-C a summary per input: changes seen, line and filtered level, health. --record writes
        the raw changes as a trace that `run --replay` reproduces at a desk. Stop the agent service first:
        a line can have only one user.
        """,
        options: [
            .config(help: "The config file (YAML).", required: true),
            .init(name: "record", value: "trace", help: "Write the raw line changes to this trace file."),
        ] + SourceChoice.options)

    static func run(_ args: ParsedArguments) -> Int32 {
        let config: AgentConfig
        do { config = try ConfigFile.load(path: args.option("config")!) } catch {
            printConfigIssues(error)
            return ExitCode.config
        }
        let opened = SourceChoice.open(args, config: config, command: spec)
        guard case .opened(let source, let clock) = opened else { return opened.exitCode }
        var recorder: UnsafeMutablePointer<FILE>?
        if let path = args.option("record") {
            recorder = fopen(path, "w")
            guard let recorder else {
                printError("error: cannot write trace \(path): \(Errno.current.text)")
                return ExitCode.failure
            }
            fputs("{\"parkwise_trace\": \(TraceFile.version), \"site\": \"\(config.site)\", \"device\": \"\(config.device)\"}\n", recorder)
        }
        defer { if let recorder { fclose(recorder) } }

        let inputs = config.inputs
        var garage = Garage(config: config)
        let start = clock.origin
        let initial = source.initialLevels(count: garage.inputCount)
        garage.start(initial: initial, at: start)
        var changes = Array(repeating: 0, count: inputs.count)
        var recording = TraceRecording(start: start)
        say("diagnosing \(inputs.count) inputs of \(config.site)/\(config.device); Ctrl-C for the summary")
        for (i, input) in inputs.enumerated() {
            say("  \(padded(input.ref.description, 14)) \(initial[i] ? 1 : 0)  \(input.owner)")
            if let recorder, initial[i] { fputs(TraceFile.line(TimedChange(offset: .zero, input: i, active: true), inputs: inputs) + "\n", recorder) }
        }

        let inbox = Inbox()
        let queue = LineQueue(bound: 100_000) { inbox.post(.lines) }
        let stopSource = source.start(clock: clock, into: queue, inbox: inbox)
        StopSignals.handle(onStop: { inbox.post(.stop) })
        var events: [GarageEvent] = []
        func show() {
            for event in events { say("\(seconds(event.at - start))  event \(event.type) \(describe(event.kind))") }
            events.removeAll()
        }
        loop: while true {
            // Garage timers: looked at every 100 ms.
            switch inbox.next(until: monotonicNanoseconds() + 100_000_000) ?? .tick {
            case .lines:
                let batch = queue.take()
                if batch.shed > 0 { say("\(batch.shed) line changes shed: diagnose fell behind") }
                for change in batch.changes {
                    changes[change.input] += 1
                    let line = recording.record(change)
                    say("\(seconds(line.offset))  \(padded(inputs[change.input].ref.description, 14)) "
                        + "\(change.active ? 1 : 0)  \(inputs[change.input].owner)")
                    if let recorder { fputs(TraceFile.line(line, inputs: inputs) + "\n", recorder); fflush(recorder) }
                    garage.handle(change, into: &events)
                    show()
                }
            case .tick:
                garage.advance(to: clock.now(), into: &events)
                show()
            case .inputLost(let input, let message):
                say("input lost: \(input.map { inputs[$0].ref.description } ?? "all"): \(message)")
                garage.inputLost(input, at: clock.now(), into: &events)
                show()
            case .sourceFinished:
                say("trace finished; Ctrl-C for the summary")
            case .stop:
                break loop
            case .uplink, .housekeeping, .statusRequested, .statusDue:
                continue
            }
        }
        stopSource()
        say("\nsummary after \(seconds(clock.now() - start)):")
        say("  input          changes  line  filtered  health")
        for (i, input) in inputs.enumerated() {
            let status = garage.input(i)
            say("  \(padded(input.ref.description, 14)) \(padded(String(changes[i]), 8)) "
                + "\(status.raw ? 1 : 0)     \(status.filtered ? 1 : 0)         \(status.fault.map { "\($0.rawValue)" } ?? "ok")"
                + "  \(input.owner)")
        }
        return ExitCode.success
    }

    static func seconds(_ d: Duration) -> String {
        let ms = d.milliseconds
        return padded("\(ms / 1000).\(String(1000 + ms % 1000).dropFirst())s", 10)
    }

    static func describe(_ kind: GarageEvent.Kind) -> String {
        switch kind {
        case .spotOccupied(let spot, _), .spotVacated(let spot, _), .spotCheckin(let spot, _, _), .spotCheckout(let spot, _, _):
            return spot
        case .lanePassage(let lane, let from, let to): return "\(lane) \(from) -> \(to)"
        case .laneAborted(let lane): return lane
        case .sensorFault(let subject, let input, let reason): return "\(subject) \(input) \(reason.rawValue)"
        case .sensorRecovered(let subject, let input): return "\(subject) \(input)"
        case .levelDrift(let level, let counted, let clamped): return "\(level) counted \(counted), kept \(clamped)"
        }
    }
}
