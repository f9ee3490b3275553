import ConfigFile
import FoundationEssentials
import Glibc
import ParkWiseCLI
import ParkWiseCore
import ParkWiseLog
import Simulation
import Synchronization

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

        With --learn, for a config fresh from `parkwise-bridge export-config` (every input UNSET): it watches
        every free line of the board and its expanders, asks "Cover P2-A-07 now", and writes the line held for
        the spot's delayed_on (at most 1 s) into the file in place, comments kept, after each spot (a walk cut
        short loses nothing; run again to go on with the spots still UNSET). The report (--report, default
        walk-learn-SITE-DEVICE.txt) lists each spot's line: the hand-over document. Then walk-test without
        --learn confirms it all. Exit 0 when every spot was learned, 1 otherwise. With --replay TRACE it
        learns from the lines the trace moves instead, no GPIO opened: a rehearsal at a desk.
        """,
        options: [
            .config(help: "The config file (YAML).", required: true),
            .init(name: "from", value: "id", help: "Start at this spot or lane and walk on to the end."),
            .init(name: "report", value: "path", help: "The JSON report to write and resume from (default walk-test-SITE-DEVICE.json)."),
            .init(name: "json", value: nil, help: "Print the final report as JSON on stdout (prompts go to stderr)."),
            .init(name: "learn", value: nil, help: "Learn the wiring: for each spot whose input is UNSET (as export-config "
                  + "writes them), in the file's order, ask the installer to cover it and write the line that moved into "
                  + "the config (and active_low when it reads high at rest). A line another spot or lane has is refused."),
            .init(name: "replay", value: "trace", help: "Take the line changes from a trace (JSON lines) instead of GPIO."),
            .init(name: "speed", value: "factor", help: "Replay the trace this many times faster, 0.01 to 10000 (default 1)."),
        ])

    static func run(_ args: ParsedArguments) async -> Int32 {
        if args.flag("learn") { return await WalkLearn.run(args) }
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
            if serviceHoldsTheLines(config) { return ExitCode.failure }
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
        guard let walk = WalkTest(config: config, initial: initial, previous: previous, from: args.option("from")) else {
            return ExitCode.usage
        }

        return await WalkInputs.run(source: source, clock: clock) { stream, keyHelp, timer in
            await walkSteps(walk, stream: stream, keyHelp: keyHelp, timer: timer, clock: clock, config: config,
                            configPath: configPath, reportPath: reportPath, json: json, show: show)
        }
    }

    /// True, said with the fix, when the agent service runs on this config's state directory: it holds the lines.
    static func serviceHoldsTheLines(_ config: AgentConfig) -> Bool {
        guard let holder = StateDirectoryLock.holder(directory: config.outbox.path) else { return false }
        printError("error: the parkwise-agent service is running (\(holder), state directory \(config.outbox.path)) "
                   + "and holds the lines the walk-test must read\n"
                   + "    hint: systemctl stop parkwise-agent, walk, then systemctl start parkwise-agent "
                   + "(`parkwise-agent doctor` checks a running service without stopping it)")
        return true
    }

    private static func walkSteps(_ walk: WalkTest, stream: AsyncStream<WalkInput>, keyHelp: String, timer: WalkTimer,
                                  clock: AgentClock,
                                  config: AgentConfig, configPath: String, reportPath: String, json: Bool,
                                  show: (String) -> Void) async -> Int32 {
        var walk = walk
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
        timer.arm(walk.nextDeadline)
        var traceDone = false
        loop: for await input in stream {
            switch input {
            case .lines(let batch):
                for change in batch { tell(walk.handle(change)) }
            case .tick:
                tell(walk.advance(to: clock.now()))
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
            // The trace played out and no filter window left open: nothing more can happen.
            if walk.isFinished || (traceDone && walk.nextDeadline == nil) { break loop }
            timer.arm(walk.nextDeadline)
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
