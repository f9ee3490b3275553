import ParkWiseContract

/// Which event a full outbox gives up, so that no subject's latest state is ever lost: first the
/// oldest event that a newer event about the same spot, lane input or level supersedes (an
/// occupancy change followed by a later one, a fault followed by its recovery, ...), and only when
/// there is none, the oldest event of all. Passages, check-ins and check-outs are facts a backend
/// counts and bills: they are never superseded, only dropped last, oldest first.
public enum OverflowPolicy {
    /// Index of the event to drop from `events` (oldest first), never one in `sparing` (the delivery ledger's: every
    /// event that may have reached the broker); nil when every event is spared.
    public static func victim(in events: [OutboxEntry], sparing: Set<UInt64> = []) -> Int? {
        var newest: [String: Int] = [:]
        for (i, entry) in events.enumerated() {
            if let key = supersedeKey(entry.event) { newest[key] = i }
        }
        for (i, entry) in events.enumerated() where !sparing.contains(entry.event.seq) {
            if let key = supersedeKey(entry.event), let last = newest[key], last > i { return i }
        }
        return events.firstIndex { !sparing.contains($0.event.seq) }
    }

    /// Adds `batch` to `events` one by one, giving up a victim whenever they are more than
    /// `capacity`; returns the victims (old events, or events of the batch itself), oldest first.
    static func admit(_ batch: [OutboxEntry], into events: inout [OutboxEntry], capacity: Int,
                      sparing: Set<UInt64>) -> [OutboxEntry] {
        var dropped: [OutboxEntry] = []
        for entry in batch {
            events.append(entry)
            // Events that may have reached the broker are kept even beyond the capacity (loaded at a start with a
            // lower capacity than the last run's): new events then make room among themselves.
            while events.count > capacity, let i = victim(in: events, sparing: sparing) {
                dropped.append(events.remove(at: i))
            }
        }
        return dropped
    }

    /// Events with the same key say the same kind of thing about the same subject; the newest wins.
    static func supersedeKey(_ e: EventPayload) -> String? {
        switch e.type {
        case "spot.occupied", "spot.vacated": return e.spot.map { "spot:\($0)" }
        case "sensor.fault", "sensor.recovered": return "health:\(e.subject ?? ""):\(e.input ?? "")"
        case "level.drift": return e.level.map { "drift:\($0)" }
        case "lane.aborted": return e.lane.map { "aborted:\($0)" }
        default: return nil
        }
    }
}
