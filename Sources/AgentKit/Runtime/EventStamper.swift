import SystemIO
import FoundationEssentials
import ParkWiseContract
import ParkWiseCore
import Uplink

/// Gives each garage event its identity on the wire: UUID, sequence number, boot, wall time and
/// clock quality.
struct EventStamper {
    var state: DeviceState
    let clock: AgentClock
    let kernelBoot: String
    var ids = EventID()
    /// The wall clock's offset read once for the batch being stamped (nil: read it for each time).
    var wallOffset: Int64?

    func wallTime(_ instant: MonotonicInstant) -> String {
        WireTime.format(unixNanoseconds: clock.wallNanoseconds(at: instant, offset: wallOffset))
    }

    /// The wall-clock quality now: simulated time is as good as its start.
    var clockSynchronized: Bool { clock.isScaled || AgentClock.wallClockSynchronized() }

    mutating func stamp(_ event: GarageEvent, synced: Bool) -> OutboxEntry {
        var p = EventPayload(id: ids.next(), seq: state.nextSeq(), boot: state.boot,
                             type: event.type, at: wallTime(event.at), clock: synced ? "synced" : "unsynced")
        var arrival: MonotonicInstant?
        switch event.kind {
        case .spotOccupied(let spot, let level), .spotVacated(let spot, let level):
            p.spot = spot
            p.level = level
        case .spotCheckin(let spot, let level, let arrived):
            p.spot = spot
            p.level = level
            p.arrival = wallTime(arrived)
            arrival = arrived
        case .spotCheckout(let spot, let level, let arrived):
            p.spot = spot
            p.level = level
            p.arrival = wallTime(arrived)
            p.departure = wallTime(event.at)
            // departure - arrival as on the wire: real time, also at --speed (see AgentClock.wallNanoseconds).
            p.staySeconds = Double(clock.realElapsed(from: arrived, to: event.at).milliseconds) / 1000
            arrival = arrived
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
        return OutboxEntry(event: p, atMonotonic: event.at.nanoseconds, arrivalMonotonic: arrival?.nanoseconds,
                           kernelBoot: kernelBoot)
    }

    /// An event about the device itself (its outbox), not about the garage.
    mutating func stampDevice(type: String, at instant: MonotonicInstant, synced: Bool,
                              _ fill: (inout EventPayload) -> Void) -> OutboxEntry {
        var p = EventPayload(id: ids.next(), seq: state.nextSeq(), boot: state.boot,
                             type: type, at: wallTime(instant), clock: synced ? "synced" : "unsynced")
        fill(&p)
        return OutboxEntry(event: p, atMonotonic: instant.nanoseconds, arrivalMonotonic: nil, kernelBoot: kernelBoot)
    }

    /// This kernel boot's id: monotonic instants are comparable only within it.
    static func readKernelBoot() -> String {
        DurableFile.read(path: "/proc/sys/kernel/random/boot_id")
            .map { String(decoding: $0, as: UTF8.self).filter { !$0.isWhitespace } } ?? "unknown"
    }

    func spotState(_ s: SpotSnapshot) -> SpotStatePayload {
        SpotStatePayload(state: s.occupancy.rawValue, since: s.since.map(wallTime), checkedIn: s.checkedIn, seq: state.seq)
    }

    func levelState(_ l: LevelSnapshot) -> LevelStatePayload {
        LevelStatePayload(capacity: l.capacity, occupied: l.occupied, source: l.source, spotsSensed: l.spotsSensed,
                          spotsOccupied: l.spotsOccupied, spotsUnknown: l.spotsUnknown, laneCount: l.laneCount,
                          unknown: l.unknown)
    }
}
