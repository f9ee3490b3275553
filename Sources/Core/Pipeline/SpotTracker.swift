/// What a spot's presence sensor says, after filtering.
public enum SpotOccupancy: String, Sendable, Hashable {
    case occupied, free, unknown
}

/// One parking spot: occupancy from its filtered sensor, check-in once a vehicle has stayed
/// `checkinAfter`, check-out when a checked-in vehicle leaves.
struct SpotTracker {
    let id: String
    let level: String
    let checkinAfter: Duration
    private(set) var occupancy: SpotOccupancy = .unknown
    /// When the current occupancy began (nil when it was already so at start-up).
    private(set) var since: MonotonicInstant?
    private(set) var checkedIn = false

    init(config: SpotConfig) {
        id = config.id
        level = config.level
        checkinAfter = config.checkinAfter
    }

    /// The level read at start-up: state without an event, since nobody saw it happen.
    mutating func start(active: Bool) {
        occupancy = active ? .occupied : .free
        since = nil
        checkedIn = false
    }

    var checkinDeadline: MonotonicInstant? {
        guard occupancy == .occupied, !checkedIn, let since else { return nil }
        return since + checkinAfter
    }

    mutating func change(active: Bool, at: MonotonicInstant, into events: inout [GarageEvent]) {
        if active {
            occupancy = .occupied
            since = at
            checkedIn = false
            events.append(GarageEvent(.spotOccupied(spot: id, level: level), at: at))
        } else {
            let arrival = since
            let wasCheckedIn = checkedIn
            occupancy = .free
            since = at
            checkedIn = false
            events.append(GarageEvent(.spotVacated(spot: id, level: level), at: at))
            if wasCheckedIn, let arrival {
                events.append(GarageEvent(.spotCheckout(spot: id, level: level, arrival: arrival), at: at))
            }
        }
    }

    /// The sensor cannot be trusted: the spot's occupancy is unknown, never free.
    mutating func fault() {
        occupancy = .unknown
        since = nil
        checkedIn = false
    }

    /// The sensor works again and reads `active`; nobody saw when that began.
    mutating func recover(active: Bool) {
        occupancy = active ? .occupied : .free
        since = nil
        checkedIn = false
    }

    mutating func checkIn(into events: inout [GarageEvent]) {
        guard let due = checkinDeadline, let arrival = since else { return }
        checkedIn = true
        events.append(GarageEvent(.spotCheckin(spot: id, level: level, arrival: arrival), at: due))
    }
}
