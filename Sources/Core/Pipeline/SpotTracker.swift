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
    /// The stay the events told of when the sensor faulted (a vehicle since `arrival`, checked in or
    /// not): still open for whoever reads the events, so the recovery must close or continue it.
    private var openStay: (arrival: MonotonicInstant?, checkedIn: Bool)?

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
            vacate(arrival: since, checkedIn: checkedIn, at: at, into: &events)
        }
    }

    private mutating func vacate(arrival: MonotonicInstant?, checkedIn wasCheckedIn: Bool, at: MonotonicInstant,
                                 into events: inout [GarageEvent]) {
        occupancy = .free
        since = at
        checkedIn = false
        events.append(GarageEvent(.spotVacated(spot: id, level: level), at: at))
        if wasCheckedIn, let arrival {
            events.append(GarageEvent(.spotCheckout(spot: id, level: level, arrival: arrival), at: at))
        }
    }

    /// The sensor cannot be trusted: the spot's occupancy is unknown, never free.
    mutating func fault() {
        if occupancy == .occupied { openStay = (since, checkedIn) }
        occupancy = .unknown
        since = nil
        checkedIn = false
    }

    /// The sensor works again and reads `active`. A stay the events left open continues (occupied) or
    /// ends now (free: vacated, and checkout when it was checked in); otherwise nobody saw when the level began.
    mutating func recover(active: Bool, at: MonotonicInstant, into events: inout [GarageEvent]) {
        let stay = openStay
        openStay = nil
        switch (active, stay) {
        case (true, let stay?):
            occupancy = .occupied
            since = stay.arrival
            checkedIn = stay.checkedIn
        case (false, let stay?):
            vacate(arrival: stay.arrival, checkedIn: stay.checkedIn, at: at, into: &events)
        case (_, nil):
            occupancy = active ? .occupied : .free
            since = nil
            checkedIn = false
        }
    }

    mutating func checkIn(into events: inout [GarageEvent]) {
        guard let due = checkinDeadline, let arrival = since else { return }
        checkedIn = true
        events.append(GarageEvent(.spotCheckin(spot: id, level: level, arrival: arrival), at: due))
    }
}
