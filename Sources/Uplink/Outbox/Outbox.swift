import ParkWiseContract

/// Events accepted but not yet acknowledged by the broker, oldest first. An event leaves only on
/// its PUBACK. Bounded: when full, the oldest event is dropped and counted, never silently.
public protocol Outbox {
    var capacity: Int { get }
    var count: Int { get }
    /// Oldest first.
    var pending: [OutboxEntry] { get }
    /// Stores the event before it counts as accepted. Returns events dropped to make room.
    mutating func append(_ entry: OutboxEntry) throws(UplinkError) -> [OutboxEntry]
    /// Removes the event with this sequence number after the broker acknowledged it.
    mutating func remove(seq: UInt64) throws(UplinkError)
    /// Replaces every pending entry (same events, in the same order, e.g. with corrected times).
    mutating func replaceAll(_ entries: [OutboxEntry]) throws(UplinkError)
}

/// The outbox held in memory only: lost with the process.
public struct MemoryOutbox: Outbox {
    public let capacity: Int
    private var events: [OutboxEntry] = []

    public init(capacity: Int) { self.capacity = capacity }

    public var count: Int { events.count }
    public var pending: [OutboxEntry] { events }

    public mutating func append(_ entry: OutboxEntry) throws(UplinkError) -> [OutboxEntry] {
        events.append(entry)
        guard events.count > capacity else { return [] }
        let dropped = Array(events.prefix(events.count - capacity))
        events.removeFirst(dropped.count)
        return dropped
    }

    public mutating func remove(seq: UInt64) throws(UplinkError) {
        if let i = events.firstIndex(where: { $0.event.seq == seq }) { events.remove(at: i) }
    }

    public mutating func replaceAll(_ entries: [OutboxEntry]) throws(UplinkError) {
        events = entries
    }
}
