/// Direction and counting for one lane with two loops (or beams) a and b, placed so that a car
/// covers both at once. Each vehicle in the lane is followed from the loop it entered on:
///   on entry loop -> on both -> on exit loop -> gone: a passage;
///   on entry loop -> gone: backed out (`lane.aborted`), or too short to be a car (ignored).
/// A second vehicle may enter while the first is still on the exit loop (tailgating): both count.
struct LaneTracker {
    enum Side: Int { case a = 0, b = 1
        var other: Side { self == .a ? .b : .a }
    }
    enum Phase { case onEntry, onBoth, onExit }
    struct Vehicle {
        var entry: Side
        var phase: Phase
        var arrived: MonotonicInstant
        func occupies(_ side: Side) -> Bool {
            switch phase {
            case .onEntry: return side == entry
            case .onBoth: return true
            case .onExit: return side != entry
            }
        }
    }

    let id: String
    let from: String
    let to: String
    let minPresence: Duration
    private(set) var vehicles: [Vehicle] = []
    /// Loops whose input is faulted: while any is, nothing in the lane is counted.
    private(set) var faulted: [Bool] = [false, false]

    init(config: LaneConfig) {
        id = config.id
        from = config.from
        to = config.to
        minPresence = config.minPresence
    }

    var isFaulted: Bool { faulted[0] || faulted[1] }

    mutating func change(_ side: Side, active: Bool, at: MonotonicInstant, into events: inout [GarageEvent]) {
        guard !isFaulted else { return }
        if active {
            if let v = vehicles.firstIndex(where: { $0.phase == .onEntry && $0.entry == side.other }) {
                vehicles[v].phase = .onBoth
            } else {
                vehicles.append(Vehicle(entry: side, phase: .onEntry, arrived: at))
            }
            return
        }
        guard let v = vehicles.firstIndex(where: { $0.occupies(side) }) else { return }
        let vehicle = vehicles[v]
        switch vehicle.phase {
        case .onBoth:
            // Tail left one loop: moving on if it was the entry loop, backing up if it was the exit loop.
            vehicles[v].phase = side == vehicle.entry ? .onExit : .onEntry
        case .onExit:
            vehicles.remove(at: v)
            guard at - vehicle.arrived >= minPresence else { return }
            let (a, b) = vehicle.entry == .a ? (from, to) : (to, from)
            events.append(GarageEvent(.lanePassage(lane: id, from: a, to: b), at: at))
        case .onEntry:
            vehicles.remove(at: v)
            guard at - vehicle.arrived >= minPresence else { return }
            events.append(GarageEvent(.laneAborted(lane: id), at: at))
        }
    }

    /// A loop can no longer be trusted: forget the vehicles in the lane.
    mutating func fault(_ side: Side) {
        faulted[side.rawValue] = true
        vehicles.removeAll()
    }

    /// The loop works again; the lane starts afresh.
    mutating func recover(_ side: Side) {
        faulted[side.rawValue] = false
        vehicles.removeAll()
    }
}
