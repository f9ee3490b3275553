import FoundationEssentials
import ParkWiseContract
import ParkWiseCore

/// Gives each garage event its identity on the wire: UUID, sequence number, boot, wall time and
/// clock quality.
struct EventStamper {
    var counters: DeviceCounters
    let clock: AgentClock

    func wallTime(_ instant: MonotonicInstant) -> String {
        WireTime.format(unixNanoseconds: clock.wallNanoseconds(at: instant))
    }

    mutating func stamp(_ event: GarageEvent) -> EventPayload {
        let synced = clock.isScaled || AgentClock.wallClockSynchronized()
        var p = EventPayload(id: UUID().uuidString.lowercased(), seq: counters.nextSeq(), boot: counters.boot,
                             type: event.type, at: wallTime(event.at), clock: synced ? "synced" : "unsynced")
        switch event.kind {
        case .spotOccupied(let spot, let level), .spotVacated(let spot, let level):
            p.spot = spot
            p.level = level
        case .spotCheckin(let spot, let level, let arrival):
            p.spot = spot
            p.level = level
            p.arrival = wallTime(arrival)
        case .spotCheckout(let spot, let level, let arrival):
            p.spot = spot
            p.level = level
            p.arrival = wallTime(arrival)
            p.departure = wallTime(event.at)
            p.staySeconds = Double((event.at - arrival).milliseconds) / 1000
        case .lanePassage(let lane, let from, let to):
            p.lane = lane
            p.from = from
            p.to = to
        case .laneAborted(let lane):
            p.lane = lane
        case .sensorFault(let subject, let input, let reason):
            p.subject = subject
            p.input = input
            p.reason = reason.rawValue
        case .sensorRecovered(let subject, let input):
            p.subject = subject
            p.input = input
        case .levelDrift(let level, let counted, let clampedTo):
            p.level = level
            p.counted = counted
            p.clampedTo = clampedTo
        }
        return p
    }

    func spotState(_ s: SpotSnapshot) -> SpotStatePayload {
        SpotStatePayload(state: s.occupancy.rawValue, since: s.since.map(wallTime), checkedIn: s.checkedIn)
    }

    func levelState(_ l: LevelSnapshot) -> LevelStatePayload {
        LevelStatePayload(capacity: l.capacity, occupied: l.occupied, source: l.source, spotsSensed: l.spotsSensed,
                          spotsOccupied: l.spotsOccupied, spotsUnknown: l.spotsUnknown, laneCount: l.laneCount)
    }
}
