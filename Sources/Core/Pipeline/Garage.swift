/// The whole garage model: filtered inputs feed spots and lanes; lanes feed level counts; every
/// input's health is watched (stuck, chatter), and a faulted input makes what it feeds unknown.
/// Pure and deterministic: time only advances with the instants it is given.
public struct Garage {
    enum Role { case loop(lane: Int, side: LaneTracker.Side), spot(Int) }

    public let config: AgentConfig
    private var filters: [InputFilter]
    private var health: [InputHealth]
    private var roles: [Role]
    private var inputNames: [String]
    private var spots: [SpotTracker]
    private var lanes: [LaneTracker]
    private var levels: [LevelCounter]
    private var levelIndex: [String: Int]
    private var timers = DeadlineQueue()
    private var changedSpots = ChangeSet()
    private var changedLevels = ChangeSet()
    private var started = false

    public init(config: AgentConfig) {
        self.config = config
        let inputs = config.inputs
        filters = inputs.map { InputFilter(mode: Garage.filterMode($0), initial: false) }
        health = inputs.map {
            InputHealth(stuckAfter: $0.stuckAfter, chatterLimit: $0.chatterLimit, recoverAfter: $0.recoverAfter)
        }
        inputNames = inputs.map(\.ref.description)
        roles = config.lanes.indices.flatMap { [Role.loop(lane: $0, side: .a), .loop(lane: $0, side: .b)] }
            + config.spots.indices.map { Role.spot($0) }
        spots = config.spots.map(SpotTracker.init)
        lanes = config.lanes.map(LaneTracker.init)
        levels = config.levels.map(LevelCounter.init)
        levelIndex = Dictionary(uniqueKeysWithValues: config.levels.enumerated().map { ($1.id, $0) })
    }

    static func filterMode(_ input: InputConfig) -> InputFilter.Mode {
        input.settle.map { .settle($0) } ?? .delayed(on: input.delayedOn, off: input.delayedOff)
    }

    public var inputCount: Int { filters.count }

    /// The levels read from the board at start-up, one per input (`config.inputs` order).
    public mutating func start(initial: [Bool], at: MonotonicInstant) {
        precondition(initial.count == filters.count, "one initial level per input")
        for (i, active) in initial.enumerated() {
            filters[i] = InputFilter(mode: filters[i].mode, initial: active)
            health[i].resume(active: active, at: at)
            scheduleHealth(i)
        }
        for s in spots.indices { spots[s].start(active: initial[config.lanes.count * 2 + s]) }
        changedSpots = ChangeSet(count: spots.count, all: true)
        changedLevels = ChangeSet(count: levels.count, all: true)
        started = true
    }

    /// The earliest instant at which `advance` has work to do.
    public var nextDeadline: MonotonicInstant? { timers.earliest }

    /// Feeds one edge; first fires every timer due before it, so events stay in time order.
    public mutating func handle(_ change: LineChange, into events: inout [GarageEvent]) {
        precondition(started, "start(initial:at:) first")
        if change.regained { return inputRegained(change.input, active: change.active, at: change.at, into: &events) }
        advance(to: change.at, into: &events)
        let i = change.input
        guard i >= 0 && i < filters.count, change.active != filters[i].raw else { return }
        if health[i].rawEdge(at: change.at) {
            fault(input: i, reason: .chatter, at: change.at, into: &events)
        }
        if health[i].fault == .chatter || health[i].fault == .lost {
            filters[i].observe(change.active)
            scheduleHealth(i)
            return
        }
        if let edge = filters[i].feed(change.active, at: change.at) {
            filtered(input: i, active: change.active, at: edge, into: &events)
        }
        if let due = filters[i].deadline { timers.schedule(.filter(i), at: due) }
    }

    /// Fires every timer due at or before `now`, in time order.
    public mutating func advance(to now: MonotonicInstant, into events: inout [GarageEvent]) {
        while let entry = timers.popDue(now) {
            switch entry.timer {
            case .filter(let input):
                guard filters[input].deadline == entry.due, health[input].fault != .chatter,
                      health[input].fault != .lost else { continue }
                if let edge = filters[input].expire() {
                    filtered(input: input, active: filters[input].stable, at: edge, into: &events)
                }
                if let due = filters[input].deadline { timers.schedule(.filter(input), at: due) }
            case .checkin(let spot):
                guard spots[spot].checkinDeadline == entry.due else { continue }
                spots[spot].checkIn(into: &events)
            case .health(let input):
                guard health[input].deadline == entry.due else { continue }
                switch health[input].expire(now: entry.due) {
                case .stuck(let since):
                    fault(input: input, reason: .stuck, at: since + (health[input].stuckAfter ?? .zero), into: &events)
                case .quiet:
                    filters[input].resync()
                    health[input].resume(active: filters[input].stable, at: entry.due)
                    recover(input: input, at: entry.due, into: &events)
                case nil:
                    break
                }
                scheduleHealth(input)
            }
        }
    }

    /// Every input is lost: nothing is watched any more (the board's chips are gone, or its event thread ended).
    /// Inputs with a fault now (stuck, chattering, lost).
    public var faultedInputCount: Int { health.reduce(0) { $0 + ($1.fault == nil ? 0 : 1) } }

    public var everyInputLost: Bool { !health.isEmpty && health.allSatisfy { $0.fault == .lost } }

    /// The board can no longer read an input (nil: any input): what it feeds becomes unknown.
    public mutating func inputLost(_ input: Int?, at: MonotonicInstant, into events: inout [GarageEvent]) {
        advance(to: at, into: &events)
        for i in input.map({ [$0] }) ?? Array(filters.indices) where i >= 0 && i < filters.count {
            if health[i].lose() { fault(input: i, reason: .lost, at: at, into: &events) }
        }
    }

    /// A lost input can be read again (the board got its line, busy until now): the level read then is its state, as
    /// after a chatter fault clears. Nothing happens for an input that was not lost.
    public mutating func inputRegained(_ input: Int, active: Bool, at: MonotonicInstant, into events: inout [GarageEvent]) {
        advance(to: at, into: &events)
        guard input >= 0 && input < filters.count, health[input].regain(active: active, at: at) else { return }
        filters[input] = InputFilter(mode: filters[input].mode, initial: active)
        recover(input: input, at: at, into: &events)
        scheduleHealth(input)
    }

    /// A filtered level change: health first (a stuck input releasing recovers), then its role.
    private mutating func filtered(input: Int, active: Bool, at: MonotonicInstant, into events: inout [GarageEvent]) {
        let wasStuck = health[input].fault == .stuck
        if health[input].filtered(active: active, at: at) {
            recover(input: input, at: at, into: &events)
        }
        scheduleHealth(input)
        guard !wasStuck else { return }
        switch roles[input] {
        case .spot(let s):
            spots[s].change(active: active, at: at, into: &events)
            if let due = spots[s].checkinDeadline { timers.schedule(.checkin(s), at: due) }
            spotChanged(s)
        case .loop(let l, let side):
            let first = events.count
            lanes[l].change(side, active: active, at: at, into: &events)
            for event in events[first...] {
                if case .lanePassage(_, let from, let to) = event.kind {
                    move(from: from, to: to, at: event.at, into: &events)
                }
            }
        }
    }

    private mutating func fault(input: Int, reason: FaultReason, at: MonotonicInstant, into events: inout [GarageEvent]) {
        events.append(GarageEvent(.sensorFault(subject: subject(of: input), input: inputNames[input], reason: reason), at: at))
        switch roles[input] {
        case .spot(let s):
            spots[s].fault()
            spotChanged(s)
        case .loop(let l, let side):
            lanes[l].fault(side)
            laneLostCount(l)
        }
    }

    private mutating func recover(input: Int, at: MonotonicInstant, into events: inout [GarageEvent]) {
        events.append(GarageEvent(.sensorRecovered(subject: subject(of: input), input: inputNames[input]), at: at))
        switch roles[input] {
        case .spot(let s):
            spots[s].recover(active: filters[input].stable, at: at, into: &events)
            if let due = spots[s].checkinDeadline { timers.schedule(.checkin(s), at: due) }
            spotChanged(s)
        case .loop(let l, let side):
            lanes[l].recover(side)
        }
    }

    private func subject(of input: Int) -> String {
        switch roles[input] {
        case .spot(let s): return "spot \(spots[s].id)"
        case .loop(let l, _): return "lane \(lanes[l].id)"
        }
    }

    private mutating func scheduleHealth(_ input: Int) {
        if let due = health[input].deadline { timers.schedule(.health(input), at: due) }
    }

    private mutating func spotChanged(_ s: Int) {
        changedSpots.insert(s)
        if let level = levelIndex[spots[s].level] { changedLevels.insert(level) }
    }

    private mutating func move(from: String, to: String, at: MonotonicInstant, into events: inout [GarageEvent]) {
        if let f = levelIndex[from] { levels[f].add(-1, at: at, into: &events); changedLevels.insert(f) }
        if let t = levelIndex[to] { levels[t].add(+1, at: at, into: &events); changedLevels.insert(t) }
    }

    /// A faulted lane loses track of what passed: the counts it feeds are unknown until calibrated again.
    private mutating func laneLostCount(_ lane: Int) {
        for area in [lanes[lane].from, lanes[lane].to] {
            if let l = levelIndex[area], levels[l].count != nil {
                levels[l] = LevelCounter(config: config.levels[l])
                changedLevels.insert(l)
            }
        }
    }

    // MARK: - Commands and state

    /// Sets a level's lane count (from a technician's count). False for an unknown level or a bad count.
    public mutating func calibrate(level: String, count: Int) -> Bool {
        guard let l = levelIndex[level], count >= 0, count <= levels[l].capacity else { return false }
        levels[l].calibrate(count)
        changedLevels.insert(l)
        return true
    }

    /// Every level's lane count (nil: unknown), to persist across restarts.
    public var laneCounts: [String: Int] {
        Dictionary(uniqueKeysWithValues: levels.compactMap { level in level.count.map { (level.id, $0) } })
    }

    public func spot(_ index: Int) -> SpotSnapshot {
        let s = spots[index]
        return SpotSnapshot(id: s.id, level: s.level, occupancy: s.occupancy, since: s.since, checkedIn: s.checkedIn)
    }

    public func level(_ index: Int) -> LevelSnapshot {
        let level = levels[index]
        var sensed = 0, occupied = 0, unknown = 0
        for spot in spots where spot.level == level.id {
            sensed += 1
            switch spot.occupancy {
            case .occupied: occupied += 1
            case .unknown: unknown += 1
            case .free: break
            }
        }
        return LevelSnapshot(id: level.id, capacity: level.capacity, laneCount: level.count,
                             spotsSensed: sensed, spotsOccupied: occupied, spotsUnknown: unknown)
    }

    /// One input as a technician checks it: the line's level, the filtered level, and its health.
    public func input(_ index: Int) -> InputStatus {
        InputStatus(raw: filters[index].raw, filtered: filters[index].stable, fault: health[index].fault)
    }


    /// Spots and levels whose retained state changed since the last call (each once, in the order
    /// they first changed).
    public mutating func takeChanged() -> (spots: [Int], levels: [Int]) {
        (changedSpots.take(), changedLevels.take())
    }
}

/// Indices marked since the last `take`, each once.
struct ChangeSet {
    private var marked: [Bool]
    private var order: [Int] = []

    init(count: Int = 0, all: Bool = false) {
        marked = Array(repeating: all, count: count)
        if all { order = Array(0..<count) }
    }

    mutating func insert(_ index: Int) {
        if index >= marked.count { marked += Array(repeating: false, count: index - marked.count + 1) }
        guard !marked[index] else { return }
        marked[index] = true
        order.append(index)
    }

    mutating func take() -> [Int] {
        guard !order.isEmpty else { return [] }
        defer { order.removeAll(keepingCapacity: true) }
        for i in order { marked[i] = false }
        return order
    }
}

public struct InputStatus: Sendable, Hashable {
    public var raw: Bool
    public var filtered: Bool
    public var fault: FaultReason?
}

public struct SpotSnapshot: Sendable, Hashable {
    public var id: String
    public var level: String
    public var occupancy: SpotOccupancy
    /// When the current occupancy began; nil if it was so when the agent started.
    public var since: MonotonicInstant?
    public var checkedIn: Bool
}

public struct LevelSnapshot: Sendable, Hashable {
    public var id: String
    public var capacity: Int
    /// From lane passages; nil until calibrated.
    public var laneCount: Int?
    public var spotsSensed: Int
    public var spotsOccupied: Int
    public var spotsUnknown: Int

    /// Every space has a spot sensor: the level is reported from its spots, never from a lane count they would
    /// contradict (one left from an earlier run, one that drifted).
    public var everySpaceSensed: Bool { spotsSensed == capacity }

    /// `spots` (every space has a sensor, and at least one of them reports), `lanes` (a calibrated lane count, for
    /// a level not every space of which has a sensor) or `unknown`.
    public var source: String {
        if everySpaceSensed { return spotsUnknown < capacity ? "spots" : "unknown" }
        return laneCount == nil ? "unknown" : "lanes"
    }

    /// Vehicles known to be on the level; nil while unknown. From spots it counts the occupied ones: with `unknown`
    /// spaces it is a lower bound (the real count lies in occupied...occupied + unknown).
    public var occupied: Int? {
        switch source {
        case "spots": return spotsOccupied
        case "lanes": return laneCount
        default: return nil
        }
    }

    /// Spaces whose state nobody knows now: from spots, the unknown ones; from lanes none (the count covers the
    /// level); every space while the source is unknown. So occupied + free + unknown = capacity (null as 0).
    public var unknown: Int {
        switch source {
        case "spots": return spotsUnknown
        case "lanes": return 0
        default: return capacity
        }
    }

    /// Spaces known to be free; nil while the source is unknown. A lower bound while `unknown` > 0.
    public var free: Int? { occupied.map { max(capacity - $0 - unknown, 0) } }
}
