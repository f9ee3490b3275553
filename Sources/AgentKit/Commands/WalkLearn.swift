import ConfigFile
import GPIO
import Glibc
import ParkWiseCLI
import ParkWiseCore
import Simulation
import SystemIO

/// `walk-test --learn`: the wiring learned by walking it (see `WiringLearner`). A thin shell: the board's free lines in,
/// prompts out, each learned input written into the config in place, and the hand-over report at the end.
enum WalkLearn {
    static func run(_ args: ParsedArguments) async -> Int32 {
        let path = args.option("config")!
        let loaded: (config: AgentConfig, unset: [UnsetSpot], text: [UInt8])
        do { loaded = try ConfigFile.loadForLearning(path: path) } catch {
            printConfigProblems(error, path: path)
            return ExitCode.config
        }
        let (config, unset) = (loaded.config, loaded.unset)
        let reportPath = args.option("report") ?? "walk-learn-\(config.site)-\(config.device).txt"
        guard !unset.isEmpty else {
            say("every spot of \(path) has its input: nothing to learn\n"
                + "    next: parkwise-agent walk-test --config \(path) checks each one")
            return ExitCode.success
        }
        let replay = args.option("replay")
        if replay == nil {
            guard config.board != .simulated else {
                printError("error: \(path) says `board: simulated`: there are no lines to learn from\n"
                           + "    hint: set the real board (e.g. board: raspberry-pi-4, or auto), or rehearse with --replay TRACE")
                return ExitCode.config
            }
            if WalkTestCommand.serviceHoldsTheLines(config) { return ExitCode.failure }
        }
        let original = String(decoding: loaded.text, as: UTF8.self)
        for (problem, file) in [(access(path, W_OK) == 0 ? nil : Errno.current.description, path),
                                (WalkReport.probe(path: path), path), (WalkReport.probe(path: reportPath), reportPath)] {
            guard let problem else { continue }
            printError("error: cannot write \(file) as \(HostChecks.userName()): \(problem)\n"
                       + "    hint: run it as root (sudo parkwise-agent walk-test --learn ...), or give --report a path you may write")
            return ExitCode.failure
        }

        guard let (lines, source, rest, clock) = replay.map({ learnableLines(config: config, trace: $0, args) }) ?? learnableLines(config: config)
        else { return ExitCode.failure }
        var learner = WiringLearner(spots: unset.map { .init(id: $0.id, hold: $0.delayedOn) }, lines: lines, rest: rest)
        let free = lines.filter { $0.owner == nil }.count
        say("walk-test --learn of \(config.site)/\(config.device): \(StatusWords.plural(unset.count, "spot")) to wire, "
            + "watching \(StatusWords.plural(free, "free line")) (\(lines.count - free) the config has already)")

        var wiring: [(spot: UnsetSpot, input: String, activeLow: Bool)] = []
        var notes: [String: String] = [:]
        var saveProblem: String?
        await WalkInputs.run(source: source, clock: clock) { stream, keyHelp, timer in
            func tell(_ outputs: [WiringLearner.Output]) {
                for output in outputs {
                    switch output {
                    case .prompt(let spot, let number, let total):
                        say("[\(number)/\(total)] Cover \(spot) now, and hold it for a second  \(keyHelp)")
                    case .learned(let learned):
                        guard let spot = unset.first(where: { $0.id == learned.spot }) else { continue }
                        wiring.append((spot, learned.input, learned.activeLow))
                        let polarity = learned.activeLow && spot.activeLow == nil ? ", active_low: true (high at rest)" : ""
                        if learned.activeLow != (spot.activeLow ?? learned.activeLow) {
                            notes[spot.id] = "reads \(learned.activeLow ? "high" : "low") at rest but the file says active_low: "
                                + "\(spot.activeLow!): check it"
                        }
                        saveProblem = save(path: path, original: original, wiring: wiring)
                        say("✓ \(spot.id) = \(learned.input)\(polarity)" + (saveProblem == nil ? ", written to \(path)" : ""))
                        if let note = notes[spot.id] { say("    \(note)") }
                    case .claimed(let spot, let input, let owner):
                        say("✗ \(spot): the line that moved, \(input), is \(owner)'s already. Two sensors on one line? "
                            + "Check the wiring, then cover \(spot) again (or skip it)")
                    case .ambiguous(let spot, let inputs):
                        say("✗ \(spot): \(inputs.count) lines moved at once (\(inputs.joined(separator: ", "))): cover only "
                            + "\(spot), then again")
                    case .skipped(let spot): say("- \(spot) skipped: its input stays UNSET")
                    case .finished: say("every spot walked")
                    }
                }
            }
            tell(learner.start())
            timer.arm(learner.nextDeadline)
            loop: for await input in stream {
                switch input {
                case .lines(let batch):
                    for change in batch { learner.handle(change) }
                    tell(learner.advance(to: clock.now()))
                case .tick: tell(learner.advance(to: clock.now()))
                case .key(.skip): tell(learner.skip())
                case .key(.retry): say("    (nothing to retry: cover the spot again, or skip it)")
                case .key(.quit):
                    say("quit: the spots not walked stay UNSET; run again to go on with them")
                    break loop
                case .inputLost(let input, let message):
                    say("    line lost: \(input.map { lines[$0].input } ?? "all lines"): \(message)")
                    if input == nil { break loop }
                case .sourceFinished: break loop
                }
                if learner.isFinished || saveProblem != nil { break loop }
                timer.arm(learner.nextDeadline)
            }
        }
        let report = text(config: config, path: path, unset: unset, wiring: wiring, skipped: learner.skipped, notes: notes)
        say("\n" + report)
        if let problem = DurableFile.replace(path: reportPath, with: Array(report.utf8)) {
            printError("error: cannot save the report \(reportPath): \(problem)")
            return ExitCode.failure
        }
        say("report: \(reportPath)")
        if let saveProblem {
            printError("error: cannot write \(path): \(saveProblem)\n    hint: the file is as it was before the last spot; "
                       + "free the disk or fix its permissions and run again")
            return ExitCode.failure
        }
        return wiring.count == unset.count ? ExitCode.success : ExitCode.failure
    }

    typealias Watched = (lines: [WiringLearner.Line], source: LineSource, rest: [Bool], clock: AgentClock)

    /// The board's learnable lines (free, or the config's already), opened; nil, said, when they cannot be.
    private static func learnableLines(config: AgentConfig) -> Watched? {
        do {
            let lines = try LearnableLines.find(config: config)
            let board = try GPIOBoard.open(inputs: lines.map { .raw(InputRef.parse($0.input)!, owner: $0.owner ?? "line \($0.input)") },
                                           board: config.board, consumer: "parkwise-walk-test", waitForBusyLines: false)
            return (lines.map { .init(input: $0.input, owner: $0.owner) }, .board(board), board.initialLevels, AgentClock())
        } catch {
            printError("error: \(error.message)" + (error.errno.map { " (errno \($0.rawValue))" } ?? ""))
            return nil
        }
    }

    /// A rehearsal (`--replay TRACE`, no GPIO): the lines the trace moves, each the config's own input's where it has
    /// one; the trace's changes at 0 ms are the lines at rest (as `diagnose --record` writes them). Nil, said, when the
    /// trace cannot be read.
    private static func learnableLines(config: AgentConfig, trace path: String, _ args: ParsedArguments) -> Watched? {
        guard let speed = SourceChoice.speed(args, command: WalkTestCommand.spec), let bytes = SourceChoice.trace(path) else {
            return nil
        }
        let refs = TraceFile.lines(bytes)
        let changes: [TimedChange]
        do { changes = try TraceFile.parse(bytes, refs: refs) } catch {
            printError("\(path):\(error.line): error: \(error.message)")
            return nil
        }
        var rest = Array(repeating: false, count: refs.count)
        for change in changes where change.offset == .zero { rest[change.input] = change.active }
        let lines = refs.map { ref in
            WiringLearner.Line(input: ref.description, owner: config.inputs.first { $0.ref.canonical == ref.canonical }?.owner)
        }
        return (lines, .trace(changes.filter { $0.offset != .zero }), rest, AgentClock(speed: speed))
    }

    /// The config with every spot learned so far written in, from the text as it was read. Nil when saved.
    private static func save(path: String, original: String,
                             wiring: [(spot: UnsetSpot, input: String, activeLow: Bool)]) -> String? {
        guard let text = UnsetSpot.wiring(original, wiring) else {
            return "the file no longer has UNSET where it had it: was it edited during the walk?"
        }
        return DurableFile.replace(path: path, with: Array(text.utf8), keepingOwnerAndMode: true)?.message
    }

    /// The hand-over document: every spot to wire, with its line (or why it has none).
    static func text(config: AgentConfig, path: String, unset: [UnsetSpot],
                     wiring: [(spot: UnsetSpot, input: String, activeLow: Bool)], skipped: [String],
                     notes: [String: String]) -> String {
        var out = ["wiring learned for \(config.site)/\(config.device), \(path)",
                   "spot          level  input                 active_low"]
        for spot in unset {
            let row = StatusWords.padded(spot.id, 14) + StatusWords.padded(spot.level, 7)
            if let learned = wiring.first(where: { $0.spot.id == spot.id }) {
                out.append(row + StatusWords.padded(learned.input, 22) + "\(spot.activeLow ?? learned.activeLow)"
                           + (notes[spot.id].map { "  (\($0))" } ?? ""))
            } else {
                out.append(row + (skipped.contains(spot.id) ? "UNSET (skipped)" : "UNSET (not walked)"))
            }
        }
        out.append("\(wiring.count) of \(unset.count) learned. Next: parkwise-agent check-config --config \(path), then "
                   + "parkwise-agent walk-test --config \(path) to confirm each one")
        return out.joined(separator: "\n") + "\n"
    }
}
