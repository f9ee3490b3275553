import ParkWiseCore

/// A garage full of simulated drivers: they enter through lanes, drive the ramps to their level,
/// park on a free spot, stay, and leave, so that each level follows the ParkWise hourly profile.
/// It produces the line changes the real sensors would (with contact bounce), in time order,
/// for the same pipeline as real GPIO.
public struct TrafficSimulator: Sendable {
    struct Crossing: Sendable { var lane: Int; var forward: Bool }
    struct Vehicle: Sendable {
        var level: Int
        var spot: Int?
        /// When it settled on its level (on its spot, or after the last lane); it leaves only after.
        var settled: Duration
        var leaving = false
    }

    let config: AgentConfig
    var random: SeededRandom
    /// Minutes after local midnight at offset zero.
    let startMinute: Int
    private var pending = MinHeap<Pending>()
    private var queued: UInt64 = 0
    private var plannedUntil: Duration = .zero
    private var vehicles: [Int: Vehicle] = [:]
    private var nextVehicle = 0
    private var spotTaken: [Bool]
    /// When the last vehicle pulled out of each spot; the next one parks only after.
    private var spotFreeAt: [Duration]
    private var laneFreeAt: [Duration]
    private var routes: [(in: [Crossing], out: [Crossing])]
    private let spotInputBase: Int

    /// - Parameters:
    ///   - startMinute: local time of day the simulation starts at (06:30 is 390).
    public init(config: AgentConfig, seed: UInt64, startMinute: Int) {
        self.config = config
        self.random = SeededRandom(seed: seed)
        self.startMinute = startMinute
        spotTaken = Array(repeating: false, count: config.spots.count)
        spotFreeAt = Array(repeating: .zero, count: config.spots.count)
        laneFreeAt = Array(repeating: .zero, count: config.lanes.count)
        spotInputBase = config.lanes.count * 2
        routes = config.levels.map { level in
            (TrafficSimulator.route(config.lanes, from: "outside", to: level.id),
             TrafficSimulator.route(config.lanes, from: level.id, to: "outside"))
        }
    }

    /// The next line change, in time order. The simulation ends (nil) only when a simulated week
    /// brings no change at all: drivers that can neither arrive nor leave (every sensed spot of a level
    /// taken by a vehicle the level's profile never sends home).
    public mutating func next() -> TimedChange? {
        let giveUp = plannedUntil + .seconds(7 * 86_400)
        while pending.first.map({ $0.change.offset >= plannedUntil }) ?? true {
            if pending.first == nil && plannedUntil >= giveUp { return nil }
            planMinute()
        }
        return pending.popFirst()?.change
    }

    /// Vehicles the simulator has put on a level (arriving or parked, not leaving).
    private func vehiclesOnLevel(_ level: Int) -> Int { vehicles.values.count(where: { $0.level == level && !$0.leaving }) }

    // MARK: - Planning

    private mutating func planMinute() {
        let minuteStart = plannedUntil
        plannedUntil += .seconds(60)
        let minuteOfDay = (startMinute + Int(minuteStart.components.seconds / 60)) % (24 * 60)
        for (l, level) in config.levels.enumerated() {
            let share = OccupancyProfile.target(hour: minuteOfDay / 60) * OccupancyProfile.levelFactor(level.id)
            let target = Int((Double(level.capacity) * share).rounded())
            let present = vehiclesOnLevel(l)
            if present < target {
                // Arrivals come in proportion to the gap, a few a minute per level at most.
                let arrivals = min(max(1, (target - present) / 8), 6)
                for _ in 0..<arrivals {
                    arrive(level: l, at: minuteStart + .milliseconds(Int64.random(in: 0..<60_000, using: &random)))
                }
            } else if present > target + 1 {
                let leavers = min(max(1, (present - target) / 8), 6)
                let parked = vehicles.filter { $0.value.level == l && !$0.value.leaving && $0.value.settled < minuteStart }
                    .keys.sorted()
                for id in parked.shuffled(using: &random).prefix(leavers) {
                    leave(id, at: minuteStart + .milliseconds(Int64.random(in: 0..<60_000, using: &random)))
                }
            }
        }
    }

    private mutating func arrive(level: Int, at start: Duration) {
        let levelID = config.levels[level].id
        let freeSpots = config.spots.indices.filter { config.spots[$0].level == levelID && !spotTaken[$0] }
        let hasSpotSensors = config.spots.contains { $0.level == levelID }
        if hasSpotSensors && freeSpots.isEmpty { return }
        let id = nextVehicle
        nextVehicle += 1
        var t = start
        for crossing in routes[level].in {
            t = cross(crossing, at: t) + .seconds(Int64.random(in: 8...25, using: &random))
        }
        var vehicle = Vehicle(level: level, settled: t)
        if let spot = freeSpots.randomElement(using: &random) {
            spotTaken[spot] = true
            vehicle.spot = spot
            vehicle.settled = max(t, spotFreeAt[spot]) + .seconds(Int64.random(in: 20...90, using: &random))
            presence(spot: spot, on: true, at: vehicle.settled)
        }
        vehicles[id] = vehicle
    }

    private mutating func leave(_ id: Int, at start: Duration) {
        guard var vehicle = vehicles[id] else { return }
        vehicle.leaving = true
        vehicles[id] = vehicle
        var t = max(start, vehicle.settled + .seconds(60))
        if let spot = vehicle.spot {
            presence(spot: spot, on: false, at: t)
            spotFreeAt[spot] = t + .seconds(1)
            t += .seconds(Int64.random(in: 20...90, using: &random))
        }
        for crossing in routes[vehicle.level].out {
            t = cross(crossing, at: t) + .seconds(Int64.random(in: 8...25, using: &random))
        }
        // The spot is free once the vehicle has pulled out; the vehicle is gone after the last lane.
        if let spot = vehicle.spot { spotTaken[spot] = false }
        vehicles[id] = nil
    }

    // MARK: - Sensor signals

    /// A car over two loops: a on, b on (car spans both), a off, b off. Returns when it has passed.
    private mutating func cross(_ crossing: Crossing, at wanted: Duration) -> Duration {
        let t = max(wanted, laneFreeAt[crossing.lane])
        let (first, second) = crossing.forward ? (2 * crossing.lane, 2 * crossing.lane + 1)
                                               : (2 * crossing.lane + 1, 2 * crossing.lane)
        let bothAt = t + .milliseconds(Int64.random(in: 300...900, using: &random))
        let firstOff = bothAt + .milliseconds(Int64.random(in: 400...1500, using: &random))
        let secondOff = firstOff + .milliseconds(Int64.random(in: 300...900, using: &random))
        edge(first, on: true, at: t, bounce: .milliseconds(8))
        edge(second, on: true, at: bothAt, bounce: .milliseconds(8))
        edge(first, on: false, at: firstOff, bounce: .milliseconds(8))
        edge(second, on: false, at: secondOff, bounce: .milliseconds(8))
        laneFreeAt[crossing.lane] = secondOff + .seconds(2)
        return secondOff
    }

    private mutating func presence(spot: Int, on: Bool, at t: Duration) {
        // Presence sensors flicker while a car manoeuvres: a few short blips before it settles.
        edge(spotInputBase + spot, on: on, at: t, bounce: .milliseconds(400))
    }

    /// An edge, sometimes preceded by contact bounce shorter than `bounce`.
    private mutating func edge(_ input: Int, on: Bool, at t: Duration, bounce: Duration) {
        if Int.random(in: 0..<3, using: &random) == 0 {
            let blip = bounce / 4
            push(TimedChange(offset: t, input: input, active: on))
            push(TimedChange(offset: t + blip, input: input, active: !on))
            push(TimedChange(offset: t + blip * 2, input: input, active: on))
        } else {
            push(TimedChange(offset: t, input: input, active: on))
        }
    }

    // MARK: - Routes and queue

    /// Lanes to cross from one area to another, preferring lanes driven in their own direction.
    static func route(_ lanes: [LaneConfig], from: String, to: String) -> [Crossing] {
        for allowReverse in [false, true] {
            var previous: [String: (String, Crossing)] = [:]
            var queue = [from], seen: Set<String> = [from]
            while !queue.isEmpty {
                let area = queue.removeFirst()
                if area == to { break }
                for (i, lane) in lanes.enumerated() {
                    var next: (String, Crossing)?
                    if lane.from == area { next = (lane.to, Crossing(lane: i, forward: true)) }
                    else if allowReverse && lane.to == area { next = (lane.from, Crossing(lane: i, forward: false)) }
                    if let (target, crossing) = next, !seen.contains(target) {
                        seen.insert(target)
                        previous[target] = (area, crossing)
                        queue.append(target)
                    }
                }
            }
            guard seen.contains(to) else { continue }
            var path: [Crossing] = []
            var area = to
            while area != from, let (prev, crossing) = previous[area] {
                path.insert(crossing, at: 0)
                area = prev
            }
            return path
        }
        return []
    }
    private mutating func push(_ change: TimedChange) {
        queued += 1
        pending.push(Pending(change: change, order: queued))
    }
}

/// Edges waiting to happen, earliest first; edges at the same instant keep the order they were made in.
struct Pending: Comparable, Sendable {
    var change: TimedChange
    var order: UInt64
    static func < (a: Pending, b: Pending) -> Bool { (a.change.offset, a.order) < (b.change.offset, b.order) }
    static func == (a: Pending, b: Pending) -> Bool { a.order == b.order }
}
