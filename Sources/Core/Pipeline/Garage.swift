/// The whole garage model: filtered inputs feed spots and lanes; lanes feed level counts.
/// Pure and deterministic: time only advances with the instants it is given.
public struct Garage {
    enum Role { case loop(lane: Int, side: LaneTracker.Side), spot(Int) }

    public let config: AgentConfig
    private var filters: [InputFilter]
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
        filters = inputs.map { InputFilter(delayedOn: $0.delayedOn, delayedOff: $0.delayedOff, initial: false) }
        inputNames = inputs.map(\.ref.description)
        roles = config.lanes.indices.flatMap { [Role.loop(lane: $0, side: .a), .loop(lane: $0, side: .b)] }
            + config.spots.indices.map { Role.spot($0) }
        spots = config.spots.map(SpotTracker.init)
        lanes = config.lanes.map(LaneTracker.init)
        levels = config.levels.map(LevelCounter.init)
        levelIndex = Dictionary(uniqueKeysWithValues: config.levels.enumerated().map { ($1.id, $0) })
    }

    public var inputCount: Int { filters.count }

    /// The levels read from the board at start-up, one per input (`config.inputs` order).
    public mutating func start(initial: [Bool], at: MonotonicInstant) {
        precondition(initial.count == filters.count, "one initial level per input")
        for (i, active) in initial.enumerated() {
            filters[i] = InputFilter(delayedOn: filters[i].delayedOn, delayedOff: filters[i].delayedOff, initial: active)
        }
        for s in spots.indices { spots[s].start(active: initial[config.lanes.count * 2 + s]) }
        for l in lanes.indices {
            lanes[l].start(a: initial[2 * l], b: initial[2 * l + 1], at: at)
            if let due = lanes[l].stuckDeadline { timers.schedule(.stuck(l), at: due) }
        }
        changedSpots = ChangeSet(count: spots.count, all: true)
        changedLevels = ChangeSet(count: levels.count, all: true)
        started = true
    }

    /// The earliest instant at which `advance` has work to do.
    public var nextDeadline: MonotonicInstant? { timers.earliest }

    /// Feeds one edge; first fires every timer due before it, so events stay in time order.
    public mutating func handle(_ change: LineChange, into events: inout [GarageEvent]) {
        precondition(started, "start(initial:at:) first")
        advance(to: change.at, into: &events)
        guard change.input >= 0 && change.input < filters.count else { return }
        if let edge = filters[change.input].feed(change.active, at: change.at) {
            apply(input: change.input, active: change.active, at: edge, into: &events)
        } else if let due = filters[change.input].deadline {
            timers.schedule(.filter(change.input), at: due)
        }
    }

    /// Fires every timer due at or before `now`, in time order.
    public mutating func advance(to now: MonotonicInstant, into events: inout [GarageEvent]) {
        while let entry = timers.popDue(now) {
            switch entry.timer {
            case .filter(let input):
                guard filters[input].deadline == entry.due, let edge = filters[input].settle() else { continue }
                apply(input: input, active: filters[input].stable, at: edge, into: &events)
            case .checkin(let spot):
                guard spots[spot].checkinDeadline == entry.due else { continue }
                spots[spot].checkIn(into: &events)
            case .stuck(let lane):
                guard lanes[lane].stuckDeadline == entry.due else { continue }
                let before = lanes[lane].isFaulted
                lanes[lane].markStuck(now: entry.due, inputs: (inputNames[2 * lane], inputNames[2 * lane + 1]), into: &events)
                if !before && lanes[lane].isFaulted { laneLostCount(lane) }
                if let due = lanes[lane].stuckDeadline { timers.schedule(.stuck(lane), at: due) }
            }
        }
    }

    private mutating func apply(input: Int, active: Bool, at: MonotonicInstant, into events: inout [GarageEvent]) {
        switch roles[input] {
        case .spot(let s):
            spots[s].change(active: active, at: at, into: &events)
            if let due = spots[s].checkinDeadline { timers.schedule(.checkin(s), at: due) }
            changedSpots.insert(s)
            if let level = levelIndex[spots[s].level] { changedLevels.insert(level) }
        case .loop(let l, let side):
            let first = events.count
            lanes[l].change(side, active: active, at: at, input: inputNames[input], into: &events)
            if let due = lanes[l].stuckDeadline { timers.schedule(.stuck(l), at: due) }
            for event in events[first...] {
                if case .lanePassage(_, let from, let to) = event.kind {
                    move(from: from, to: to, at: event.at, into: &events)
                }
            }
        }
    }

    private mutating func move(from: String, to: String, at: MonotonicInstant, into events: inout [GarageEvent]) {
        if let f = levelIndex[from] { levels[f].add(-1, at: at, into: &events); changedLevels.insert(f) }
        if let t = levelIndex[to] { levels[t].add(+1, at: at, into: &events); changedLevels.insert(t) }
    }

    /// A stuck lane loses track of what passed: the counts it feeds are unknown until calibrated again.
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

    public var spotCount: Int { spots.count }
    public var levelCount: Int { levels.count }

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

    /// The best known number of vehicles: exact from spot sensors when every space has one and all
    /// report, otherwise the lane count, otherwise unknown.
    public var occupied: Int? {
        if spotsSensed == capacity && spotsUnknown == 0 { return spotsOccupied }
        return laneCount
    }

    public var source: String {
        if spotsSensed == capacity && spotsUnknown == 0 { return "spots" }
        return laneCount == nil ? "unknown" : "lanes"
    }
}
