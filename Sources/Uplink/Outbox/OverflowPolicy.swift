import ParkWiseContract

/// Which event a full outbox gives up, so that no subject's latest state is ever lost: first the
/// oldest event that a newer event about the same spot, lane input or level supersedes (an
/// occupancy change followed by a later one, a fault followed by its recovery, ...), and only when
/// there is none, the oldest event of all. Passages, check-ins and check-outs are facts a backend
/// counts and bills: they are never superseded, only dropped last, oldest first.
public enum OverflowPolicy {
    /// Index of the event to drop from `events` (oldest first). Events in `sparing` (sent and
    /// awaiting their PUBACK: they may well arrive) are taken only when nothing else is left.
    public static func victim(in events: [OutboxEntry], sparing: Set<UInt64> = []) -> Int {
        var newest: [String: Int] = [:]
        for (i, entry) in events.enumerated() {
            if let key = supersedeKey(entry.event) { newest[key] = i }
        }
        for (i, entry) in events.enumerated() where !sparing.contains(entry.event.seq) {
            if let key = supersedeKey(entry.event), let last = newest[key], last > i { return i }
        }
        return events.firstIndex { !sparing.contains($0.event.seq) } ?? 0
    }

    /// The indexes of the `count` events `victim` would take one after the other (oldest first), found in one pass: the
    /// events a newer one about the same subject supersedes, oldest first, then the oldest of the others. Taking a
    /// superseded event leaves the newest of its subject, and once none is superseded the oldest left is the newest of
    /// its own, so nothing taken changes what comes next. For a start that finds many more events than the capacity
    /// (one `victim` per event would take minutes for thousands).
    static func victims(in events: [OutboxEntry], count: Int) -> [Int] {
        guard count > 0 else { return [] }
        var newest: [String: Int] = [:]
        for (i, entry) in events.enumerated() {
            if let key = supersedeKey(entry.event) { newest[key] = i }
        }
        var taken: [Int] = []
        var superseded = Set<Int>()
        for (i, entry) in events.enumerated() where taken.count < count {
            if let key = supersedeKey(entry.event), let last = newest[key], last > i {
                taken.append(i)
                superseded.insert(i)
            }
        }
        for i in events.indices where taken.count < count && !superseded.contains(i) { taken.append(i) }
        return taken
    }

    /// Adds `batch` to `events` one by one, giving up a victim whenever they are more than
    /// `capacity`; returns the victims (old events, or events of the batch itself), oldest first.
    static func admit(_ batch: [OutboxEntry], into events: inout [OutboxEntry], capacity: Int,
                      sparing: Set<UInt64>) -> [OutboxEntry] {
        var dropped: [OutboxEntry] = []
        for entry in batch {
            events.append(entry)
            while events.count > capacity {
                dropped.append(events.remove(at: victim(in: events, sparing: sparing)))
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
