import ConfigFile
import FoundationEssentials
import Glibc
import ParkWiseCLI
import ParkWiseCore
import ParkWiseLog
import Simulation
import Synchronization
import Uplink

/// Commissioning: walks the installer through every input in order and judges its wiring (see `WalkTest`).
/// A thin shell: line changes from GPIO (or a replayed trace) and keys in, prompts and the report out.
enum WalkTestCommand {
    static let spec = CommandSpec(
        name: "walk-test", abstract: "Walk through every input in order and check its wiring (commissioning).",
        discussion: """
        Asks for one spot or lane at a time ("Cover P1-A-03 now — sensor on 1-0020:GPA2", "Drive over lane
        P2-ramp ... loop a first, then loop b"), waits for the line change and judges it: confirmed, swapped
        (another input changed: both named), polarity (active at rest: `active_low`), loops_swapped (loop b
        before loop a on the way in), bouncy (far more edges than a clean change within the filter window), or
        skipped. Keys: s skip, r retry (the current step, or the last one judged), q quit; from a pipe, one word
        per line (skip, retry, quit). The report (JSON, and text beside it as .txt) is saved after every verdict
        (a path it cannot write stops it before the first step); run again with the same --report to resume
        with the steps not yet walked (or skipped). Reads the lines itself: stop the agent service first.
        Exit 0 when every step is confirmed, 1 otherwise, 78 on a bad config.
        """,
        options: [
            .init(name: "config", value: "file", help: "The config file (YAML).", required: true),
            .init(name: "from", value: "id", help: "Start at this spot or lane and walk on to the end."),
            .init(name: "report", value: "path", help: "The JSON report to write and resume from (default walk-test-SITE-DEVICE.json)."),
            .init(name: "json", value: nil, help: "Print the final report as JSON on stdout (prompts go to stderr)."),
            .init(name: "replay", value: "trace", help: "Take the line changes from a trace (JSON lines) instead of GPIO."),
            .init(name: "speed", value: "factor", help: "Replay the trace this many times faster, 0.01 to 10000 (default 1)."),
        ])

    static func run(_ args: ParsedArguments) async -> Int32 {
        let configPath = args.option("config")!
        let config: AgentConfig
        do { config = try ConfigFile.load(path: configPath) } catch {
            printConfigProblems(error, path: configPath)
            return ExitCode.config
        }
        let json = args.flag("json")
        let show: (String) -> Void = json ? { printError($0) } : { say($0) }
        let reportPath = args.option("report") ?? "walk-test-\(config.site)-\(config.device).json"
        var previous: [WalkResult] = []
        switch WalkReport.load(path: reportPath) {
        case .failure(let problem):
            printError("error: \(problem.message)\n    hint: \(problem.hint)")
            return ExitCode.failure
        case .success(let report?):
            previous = report.results
        case .success(nil):
            break
        }
        if let from = args.option("from"), !WalkStep.all(of: config).contains(where: { $0.id == from }) {
            printError(UsageError(command: spec, message: "'\(from)' is no spot or lane of \(configPath)").text)
            return ExitCode.usage
        }
        if args.option("replay") == nil {
            guard config.board != .simulated else {
                printError("error: \(configPath) says `board: simulated`: there are no lines to walk\n"
                           + "    hint: give --replay TRACE to walk a recorded trace, or set the real board")
                return ExitCode.config
            }
            if let holder = StateDirectoryLock.holder(directory: config.outbox.path) {
                printError("error: the parkwise-agent service is running (\(holder), state directory \(config.outbox.path)) "
                           + "and holds the lines the walk-test must read\n"
                           + "    hint: systemctl stop parkwise-agent, walk, then systemctl start parkwise-agent "
                           + "(`parkwise-agent doctor` checks a running service without stopping it)")
                return ExitCode.failure
            }
        }
        if let problem = WalkReport.probe(path: reportPath) {
            printError("error: cannot write the report \(reportPath) as \(HostChecks.userName()): \(problem)\n"
                       + "    hint: give --report a path that user may write, e.g. /var/lib/parkwise-agent/walk-\(config.device).json "
                       + "(the service's state directory, for sudo -u parkwise) or /tmp/walk-\(config.device).json")
            return ExitCode.failure
        }
        let opened = SourceChoice.open(args, config: config, command: spec)
        guard case .opened(var source, let clock) = opened else { return opened.exitCode }
        var initial = source.initialLevels(count: config.inputs.count)
        if case .trace(let changes) = source {
            // A trace's changes at 0 ms are the levels at rest (as `diagnose --record` writes them).
            for change in changes where change.offset == .zero { initial[change.input] = change.active }
            source = .trace(changes.filter { $0.offset != .zero })
        }
        guard var walk = WalkTest(config: config, initial: initial, previous: previous, from: args.option("from")) else {
            return ExitCode.usage
        }

        // The source posts into an inbox (its changes wait in the line queue); a thread hands them to the walk.
        let inbox = Inbox()
        let queue = LineQueue(bound: 100_000) { inbox.post(.lines) }
        let (stream, continuation) = AsyncStream.makeStream(of: WalkInput.self)
        _ = DedicatedThread {
            while let input = inbox.next(until: nil) {
                switch input {
                case .lines: continuation.yield(.lines(queue.take().changes))
                case .inputLost(let input, let message): continuation.yield(.inputLost(input, message))
                case .sourceFinished: continuation.yield(.sourceFinished)
                case .stop:
                    continuation.yield(.key(.quit))
                    return
                default: continue
                }
            }
        }
        let stopSource = source.start(clock: clock, into: queue, inbox: inbox)
        // The handler comes before the terminal goes raw, so no Ctrl-C can end the process with it still raw; a
        // forced exit (a second Ctrl-C) gives the terminal its echo back too.
        let reader = ReaderSlot()
        StopSignals.handle(onStop: { inbox.post(.stop) }, onForce: { reader.keys.withLock { $0?.restore() } })
        let keys = KeyReader { continuation.yield(.key($0)) }
        reader.keys.withLock { $0 = keys }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(20))
                continuation.yield(.tick)
            }
        }
        defer {
            keys.restore()
            ticker.cancel()
            stopSource()
            inbox.post(.stop)   // ends the forwarding thread
            StopSignals.release()
        }

        let keyHelp = keys.isTerminal ? "(s skip, r retry, q quit)" : "(skip, retry or quit, then Enter)"
        var saveProblem: String?
        func save() {
            let report = WalkReport(walk: walk, config: config, configPath: configPath,
                                    wallNanoseconds: AgentClock.read(CLOCK_REALTIME))
            saveProblem = report.save(path: reportPath)
            if let saveProblem { printError("error: cannot save the report: \(saveProblem)") }
        }
        func tell(_ outputs: [WalkTest.Output]) {
            for output in outputs {
                switch output {
                case .prompt(let step, let number, let total): show("[\(number)/\(total)] \(step.prompt)  \(keyHelp)")
                case .note(let text): show("    \(text)")
                case .result(let result):
                    show("\(WalkReport.symbol(result.verdict.rawValue)) \(result.step) \(result.verdict.rawValue)"
                         + (result.verdict == .confirmed ? "" : ": \(result.detail)"))
                    save()
                case .finished: show("every step walked")
                }
            }
        }
        show("walk-test of \(config.site)/\(config.device): \(StatusWords.plural(walk.steps.count, "step")), \(walk.results.count) already judged "
             + "(report \(reportPath))")
        tell(walk.start())
        var traceDone = false
        loop: for await input in stream {
            switch input {
            case .lines(let batch):
                for change in batch { tell(walk.handle(change)) }
            case .tick:
                tell(walk.advance(to: clock.now()))
                if traceDone && walk.nextDeadline == nil { break loop }
            case .key(.skip): tell(walk.skip())
            case .key(.retry): tell(walk.retry())
            case .key(.quit):
                show("quit: the steps not walked stay untested; run again with --report \(reportPath) to go on")
                break loop
            case .inputLost(let input, let message):
                show("    input lost: \(input.map { config.inputs[$0].owner } ?? "all inputs"): \(message)")
                if input == nil { break loop }
            case .sourceFinished:
                show("the trace has no more changes")
                traceDone = true
            }
            if walk.isFinished { break loop }
        }
        save()
        let report = WalkReport(walk: walk, config: config, configPath: configPath,
                                wallNanoseconds: AgentClock.read(CLOCK_REALTIME))
        show("")
        show(report.text + "report: \(reportPath) (text: \(WalkReport.textPath(reportPath)))")
        if json { say(report.json) }
        return report.allConfirmed && saveProblem == nil ? ExitCode.success : ExitCode.failure
    }
}

/// What reaches the walk-test's loop.
enum WalkInput: Sendable {
    case lines([LineChange])
    case tick
    case key(WalkKey)
    case inputLost(Int?, String)
    case sourceFinished
}

/// The key reader, for a forced exit's handler, which exists before it.
private final class ReaderSlot: Sendable {
    let keys = Mutex<KeyReader?>(nil)
}
