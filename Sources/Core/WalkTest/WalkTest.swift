/// The wiring walk-test's logic, fed with line changes and the time: which step the installer is on, what the
/// lines did, and the verdict on each step. No I/O, no clock; `parkwise-agent walk-test` is a thin shell
/// around it (GPIO or a replayed trace in, prompts and a report out).
///
/// A step starts when one of its inputs leaves its level at rest (what it read when the walk started): that
/// edge opens the input's filter window (its `delayed_on`, `delayed_off` or `settle`), in which edges are
/// counted; when every input of the step has been seen and its window has passed, the step is judged. An input
/// of another step leaving its rest level first judges the step `swapped` at once. The inputs a verdict was
/// about are then left alone until they have been back at rest for `quiet` (the installer taking the hand
/// away, contact bounce on release), so they cannot be mistaken for the next step's wiring.
public struct WalkTest: Sendable {
    public let steps: [WalkStep]
    public private(set) var results: [String: WalkResult]
    /// More edges than this within an input's filter window is `bouncy`.
    public let bounceLimit: Int
    public let quiet: Duration

    private let inputs: [InputConfig]
    /// Steps still to walk (indexes into `steps`); the first is the current one.
    private var queue: [Int]
    private var lastJudged: Int?
    private var rest: [Bool]
    private var level: [Bool]
    private var releasing: [Int: Release] = [:]
    private var seen: [Int: Observation] = [:]

    private enum Release: Sendable { case away, backAt(MonotonicInstant) }

    private struct Observation: Sendable {
        var first: MonotonicInstant
        var deadline: MonotonicInstant
        var edges: Int
    }

    public enum Output: Sendable, Hashable {
        /// Ask the installer for the next step; `number` of `total` (every step of the config).
        case prompt(WalkStep, number: Int, total: Int)
        /// Something the installer should know now (a line seen, an input active at rest).
        case note(String)
        case result(WalkResult)
        /// No step left.
        case finished
    }

    /// - Parameters:
    ///   - initial: every input's logical level now, with nothing acted on: its level at rest.
    ///   - previous: results of an earlier walk (a report being resumed); kept, and their steps not walked again
    ///     unless skipped there.
    ///   - from: walk from this step (spot or lane id) to the end, whatever `previous` says; nil when it is no step.
    public init?(config: AgentConfig, initial: [Bool], previous: [WalkResult] = [], from: String? = nil,
                 bounceLimit: Int = 6, quiet: Duration = .seconds(1)) {
        steps = WalkStep.all(of: config)
        inputs = config.inputs
        self.bounceLimit = bounceLimit
        self.quiet = quiet
        rest = initial
        level = initial
        var kept: [String: WalkResult] = [:]
        let all = WalkStep.all(of: config)
        for result in previous where all.contains(where: { $0.id == result.step }) { kept[result.step] = result }
        if let from {
            guard let start = all.firstIndex(where: { $0.id == from }) else { return nil }
            queue = Array(start..<all.count)
            for index in queue { kept[all[index].id] = nil }
        } else {
            queue = all.indices.filter { kept[all[$0].id].map { $0.verdict == .skipped } ?? true }
        }
        results = kept
    }

    public var current: WalkStep? { queue.first.map { steps[$0] } }
    public var isFinished: Bool { queue.isEmpty }
    /// When `advance` has something to do.
    public var nextDeadline: MonotonicInstant? {
        guard let step = current, step.inputs.allSatisfy({ seen[$0] != nil }) else { return nil }
        return step.inputs.compactMap { seen[$0]?.deadline }.max()
    }

    /// Inputs that read active at rest, then the first prompt.
    public func start() -> [Output] {
        var out: [Output] = []
        for (i, input) in inputs.enumerated() where rest[i] {
            out.append(.note("\(input.owner) (\(input.ref)) reads active at rest: \(atRestHint(i))"))
        }
        return out + promptOrFinished()
    }

    public mutating func handle(_ change: LineChange) -> [Output] {
        let i = change.input
        guard i < level.count, level[i] != change.active else { return [] }
        level[i] = change.active
        let departing = change.active != rest[i]
        if let release = releasing[i] {
            guard departing else {
                releasing[i] = .backAt(change.at)
                return []
            }
            if case .backAt(let back) = release, change.at - back >= quiet {
                releasing[i] = nil
            } else {
                releasing[i] = .away
                return []
            }
        }
        guard let step = current else { return [] }
        if step.inputs.contains(i) {
            if var observation = seen[i] {
                if change.at <= observation.deadline { observation.edges += 1 }
                seen[i] = observation
                return []
            }
            guard departing else { return [] }
            let window = filterWindow(i)
            seen[i] = Observation(first: change.at, deadline: change.at + window, edges: 1)
            return [.note("\(inputs[i].ref) changed (\(inputs[i].owner)); watching it for \(window.milliseconds) ms")]
        }
        guard departing, seen.isEmpty else { return [] }
        return judge(step, at: change.at, swappedWith: i)
    }

    /// The time now: judges the current step once every window of it has passed.
    public mutating func advance(to now: MonotonicInstant) -> [Output] {
        guard let step = current, let due = nextDeadline, now >= due else { return [] }
        return judge(step, at: now, swappedWith: nil)
    }

    public mutating func skip() -> [Output] {
        guard let step = current else { return [] }
        var detail = "skipped by the installer"
        let changed = step.inputs.filter { seen[$0] != nil }
        if !changed.isEmpty {
            detail += "; only " + changed.map { "\(inputs[$0].owner) (\(inputs[$0].ref))" }.joined(separator: ", ") + " changed"
        }
        for i in step.inputs where rest[i] { detail += "; \(inputs[i].ref) reads active at rest: \(atRestHint(i))" }
        return record(WalkResult(step: step.id, verdict: .skipped, inputs: names(step), detail: detail), step: step,
                      involved: [], at: nil)
    }

    /// Mid-step: starts the current step again. Otherwise: walks the last judged step again.
    public mutating func retry() -> [Output] {
        if !seen.isEmpty {
            seen = [:]
            return [.note("starting \(current?.id ?? "") again")] + promptOrFinished()
        }
        guard let last = lastJudged else { return promptOrFinished() }
        lastJudged = nil
        results[steps[last].id] = nil
        queue.insert(last, at: 0)
        for i in steps[last].inputs { releasing[i] = nil }
        return promptOrFinished()
    }

    // MARK: verdicts

    private mutating func judge(_ step: WalkStep, at now: MonotonicInstant, swappedWith other: Int?) -> [Output] {
        let names = names(step)
        if let other {
            let what = step.kind == .spot ? "Covering \(step.id)" : "Driving over lane \(step.id)"
            let otherID = ownerID(other)
            let result = WalkResult(
                step: step.id, verdict: .swapped, inputs: names, other: inputs[other].owner,
                otherInput: inputs[other].ref.description,
                detail: "\(what) changed \(inputs[other].ref) (\(inputs[other].owner)) instead of \(names.joined(separator: "/")): "
                    + "the wires of \(step.id) and \(otherID) are swapped, or the config names the wrong line; swap them at the "
                    + "terminal block, or swap the two `input:` lines in the config")
            return record(result, step: step, involved: [other], at: now)
        }
        let edges = step.inputs.compactMap { seen[$0]?.edges }.max() ?? 0
        let result: WalkResult
        if let inverted = step.inputs.first(where: { rest[$0] }) {
            let input = inputs[inverted]
            result = WalkResult(
                step: step.id, verdict: .polarity, inputs: names, edges: edges,
                detail: "\(input.ref) (\(input.owner)) reads active at rest and went inactive when acted on: its polarity is the "
                    + "other way round; set `active_low: \(!input.activeLow)` for it in the config")
        } else if step.kind == .lane, let a = seen[step.inputs[0]], let b = seen[step.inputs[1]], b.first < a.first {
            let loopA = inputs[step.inputs[0]].ref, loopB = inputs[step.inputs[1]].ref
            result = WalkResult(
                step: step.id, verdict: .loopsSwapped, inputs: names, edges: edges,
                detail: "loop b (\(loopB)) triggered before loop a (\(loopA)) on the way in: the loops are swapped, so every "
                    + "passage would count the wrong way; write `loops: { a: \(loopB), b: \(loopA) }` in the config, "
                    + "or swap the two loop cables")
        } else if edges > bounceLimit, let worst = step.inputs.max(by: { (seen[$0]?.edges ?? 0) < (seen[$1]?.edges ?? 0) }) {
            let input = inputs[worst]
            result = WalkResult(
                step: step.id, verdict: .bouncy, inputs: names, edges: edges,
                detail: "\(input.ref) (\(input.owner)) changed \(edges) times within its \(filterWindow(worst).milliseconds) ms "
                    + "filter window (a clean change is 1 or 2): a loose contact, a missing pull resistor or a noisy cable; "
                    + "check the terminals, set `bias: pull-up` or `pull-down` to match the sensor, and shield or shorten the cable")
        } else {
            result = WalkResult(step: step.id, verdict: .confirmed, inputs: names, edges: edges,
                                detail: "\(names.joined(separator: " then ")) changed as expected")
        }
        return record(result, step: step, involved: step.inputs, at: now)
    }

    private mutating func record(_ result: WalkResult, step: WalkStep, involved: [Int], at now: MonotonicInstant?) -> [Output] {
        results[step.id] = result
        lastJudged = queue.removeFirst()
        seen = [:]
        for i in involved {
            releasing[i] = level[i] == rest[i] ? now.map { .backAt($0) } ?? .away : .away
        }
        return [.result(result)] + promptOrFinished()
    }

    private func promptOrFinished() -> [Output] {
        guard let step = current else { return [.finished] }
        return [.prompt(step, number: steps.count - queue.count + 1, total: steps.count)]
    }

    // MARK: words

    private func names(_ step: WalkStep) -> [String] { step.inputs.map { inputs[$0].ref.description } }

    /// "P1-A-04" from "spot P1-A-04", "P2-ramp" from "lane P2-ramp loop a".
    private func ownerID(_ i: Int) -> String {
        let words = inputs[i].owner.split(separator: " ")
        return words.count >= 2 ? String(words[1]) : inputs[i].owner
    }

    private func atRestHint(_ i: Int) -> String {
        "something is on it, or its polarity is the other way round (then set `active_low: \(!inputs[i].activeLow)`)"
    }

    /// The filter window of the edge that leaves the rest level, at least 20 ms.
    private func filterWindow(_ i: Int) -> Duration {
        let input = inputs[i]
        let window = input.settle ?? (rest[i] ? input.delayedOff : input.delayedOn)
        return max(window, .milliseconds(20))
    }
}
