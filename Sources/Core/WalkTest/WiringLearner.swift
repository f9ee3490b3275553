/// `walk-test --learn`'s logic: the installer covers each unwired spot in the config's order, and the line that
/// left its level at rest and stayed away for the spot's hold time is that spot's input. No I/O, no clock.
///
/// Every line the board offers is watched, the configured ones too (so a line that another spot or a lane already
/// claims is refused, not learned twice). A line back at rest before the hold time was a passer-by or bounce and is
/// forgotten; two lines held at once are refused as ambiguous. A judged line is left alone until it has been back at
/// rest for `quiet` (the hand taken away), so it cannot be taken for the next spot's.
public struct WiringLearner: Sendable {
    /// A spot to learn, in the config's order.
    public struct Spot: Sendable, Hashable {
        public var id: String
        /// How long its sensor must stay away from rest to count (the spot's `delayed_on`, at most `maxHold`).
        public var hold: Duration
        public init(id: String, hold: Duration) {
            self.id = id
            self.hold = hold
        }
    }

    /// A line being watched: how the config names it, and who claims it (a spot or lane of the config, or a spot
    /// learned in this walk), nil when it is free.
    public struct Line: Sendable, Hashable {
        public var input: String
        public var owner: String?
        public init(input: String, owner: String?) {
            self.input = input
            self.owner = owner
        }
    }

    /// A spot wired: the line's name, and whether it reads high at rest (the sensor pulls it low when covered).
    public struct Learned: Sendable, Hashable {
        public var spot: String
        public var input: String
        public var activeLow: Bool
    }

    public enum Output: Sendable, Hashable {
        /// Ask the installer to cover this spot; `number` of `total`.
        case prompt(spot: String, number: Int, total: Int)
        case learned(Learned)
        /// The line that changed is claimed already: the spot stays unwired, the installer checks the wiring.
        case claimed(spot: String, input: String, owner: String)
        /// Several lines held at once: nothing learned.
        case ambiguous(spot: String, inputs: [String])
        case skipped(spot: String)
        /// No spot left.
        case finished
    }

    /// Spot holds are capped here: a 5 s `delayed_on` is for cars, not for an installer's hand.
    public static let maxHold: Duration = .seconds(1)

    public let spots: [Spot]
    public private(set) var lines: [Line]
    public private(set) var learned: [Learned] = []
    public private(set) var skipped: [String] = []
    public let quiet: Duration

    private var next = 0
    private let rest: [Bool]
    private var level: [Bool]
    /// Lines away from rest, not yet judged: since when.
    private var away: [Int: MonotonicInstant] = [:]
    /// Judged lines, ignored until back at rest for `quiet`: since when they are back (nil while still away).
    private var judged: [Int: MonotonicInstant?] = [:]

    /// - Parameters:
    ///   - rest: every line's level now (physical: high is true), with nothing covered.
    public init(spots: [Spot], lines: [Line], rest: [Bool], quiet: Duration = .seconds(1)) {
        precondition(lines.count == rest.count, "one level at rest per line")
        self.spots = spots.map { Spot(id: $0.id, hold: min($0.hold, Self.maxHold)) }
        self.lines = lines
        self.rest = rest
        self.quiet = quiet
        level = rest
    }

    public var current: Spot? { next < spots.count ? spots[next] : nil }
    public var isFinished: Bool { current == nil }

    /// When `advance` has something to do: a held line's hold ending, or a judged line's quiet ending.
    public var nextDeadline: MonotonicInstant? {
        let holds = current.map { spot in away.values.map { $0 + spot.hold } } ?? []
        let quiets = judged.values.compactMap { $0.map { $0 + quiet } }
        return (holds + quiets).min()
    }

    /// The first prompt.
    public func start() -> [Output] { prompt() }

    public mutating func handle(_ change: LineChange) {
        let i = change.input
        guard i >= 0, i < lines.count else { return }
        level[i] = change.active
        let atRest = change.active == rest[i]
        if case .some(.some(let back)) = judged[i], change.at >= back + quiet { judged[i] = nil }
        if judged[i] != nil {
            judged[i] = .some(atRest ? change.at : nil)
        } else if atRest {
            away[i] = nil
        } else if away[i] == nil {
            away[i] = change.at
        }
    }

    public mutating func advance(to now: MonotonicInstant) -> [Output] {
        for (i, back) in judged {
            if let back, now >= back + quiet { judged[i] = nil }
        }
        guard let spot = current else { return [] }
        let held = away.filter { now >= $0.value + spot.hold }.keys.sorted()
        guard let first = held.first else { return [] }
        for i in held {
            away[i] = nil
            judged[i] = .some(nil)
        }
        if held.count > 1 { return [.ambiguous(spot: spot.id, inputs: held.map { lines[$0].input })] }
        if let owner = lines[first].owner { return [.claimed(spot: spot.id, input: lines[first].input, owner: owner)] }
        let wired = Learned(spot: spot.id, input: lines[first].input, activeLow: rest[first])
        lines[first].owner = "spot \(spot.id)"
        learned.append(wired)
        next += 1
        return [.learned(wired)] + prompt()
    }

    /// Leaves the current spot unwired (`UNSET` in the file) and goes on.
    public mutating func skip() -> [Output] {
        guard let spot = current else { return [] }
        skipped.append(spot.id)
        next += 1
        away = [:]
        return [.skipped(spot: spot.id)] + prompt()
    }

    private func prompt() -> [Output] {
        guard let spot = current else { return [.finished] }
        return [.prompt(spot: spot.id, number: next + 1, total: spots.count)]
    }
}
