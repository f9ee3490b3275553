import ParkWiseContract

/// Events accepted but not yet acknowledged by the broker, oldest first. An event leaves only on
/// its PUBACK. Bounded: when full, `OverflowPolicy` picks the event to give up, and the caller
/// announces every drop (never a silent gap). A reference: the one outbox of a run, read after every input without
/// copying it.
public protocol Outbox: AnyObject {
    var capacity: Int { get }
    var count: Int { get }
    /// Oldest first (a view of the outbox's own storage: reading it copies nothing).
    var pending: ArraySlice<OutboxEntry> { get }
    /// Stores a batch of events (oldest first) before they count as accepted: all at once, with one
    /// sync. Returns the events dropped to make room (not those in `sparing` unless nothing else is
    /// left; possibly some of the batch itself), and what failed if the batch could not be stored
    /// on disk (it is then kept in memory).
    func append(_ batch: [OutboxEntry], sparing: Set<UInt64>) -> (dropped: [OutboxEntry], failure: UplinkError?)
    /// Removes the event with this sequence number after the broker acknowledged it. On disk the removal may wait
    /// for the next write (see `writeChanges`).
    func remove(seq: UInt64)
    /// Something the disk does not have yet: removals waiting for the next write, (after a failed write) events
    /// held in memory only, or a compaction that is due. True until a write succeeds.
    var hasUnwrittenChanges: Bool { get }
    /// A compaction waits: `writeChanges()` is best called as soon as nothing else is to be done.
    var compactionDue: Bool { get }
    /// Writes down what `hasUnwrittenChanges` says waits; what failed, if it did.
    func writeChanges() -> UplinkError?
    /// Replaces every pending entry (same events, in the same order, e.g. with corrected times).
    func replaceAll(_ entries: [OutboxEntry]) -> UplinkError?
    /// The broker acknowledged the announcement of these seqs: their drop records need not outlive a compaction.
    func dropsAnnounced(_ seqs: ClosedRange<UInt64>)
    /// Records, synced, that seqs up to `seq` were used (an announcement's, which the outbox never holds), so that a
    /// start never takes it for a seq nothing accounts for.
    func recordFloor(_ seq: UInt64) -> UplinkError?
    /// Removes events loaded at start that an announcement already declared: drop records for them, synced, so they
    /// are never sent.
    func discard(_ seqs: [UInt64]) -> UplinkError?
    /// Records, synced, that these seqs were given up (a start found them unaccounted for): kept like the overflow's
    /// drop records until their announcement is acknowledged.
    func recordDrops(_ ranges: [ClosedRange<UInt64>]) -> UplinkError?
}

/// The outbox held in memory only: lost with the process.
public final class MemoryOutbox: Outbox {
    public let capacity: Int
    private var events = PendingEvents()

    public init(capacity: Int) { self.capacity = capacity }

    public var count: Int { events.count }
    public var pending: ArraySlice<OutboxEntry> { events.all }

    public func append(_ batch: [OutboxEntry], sparing: Set<UInt64>) -> (dropped: [OutboxEntry], failure: UplinkError?) {
        (events.admit(batch, capacity: capacity, sparing: sparing), nil)
    }

    public func remove(seq: UInt64) { events.remove(seq: seq) }

    public func replaceAll(_ entries: [OutboxEntry]) -> UplinkError? {
        events.replace(with: entries)
        return nil
    }

    public var hasUnwrittenChanges: Bool { false }
    public var compactionDue: Bool { false }
    public func dropsAnnounced(_ seqs: ClosedRange<UInt64>) {}
    public func recordFloor(_ seq: UInt64) -> UplinkError? { nil }
    public func discard(_ seqs: [UInt64]) -> UplinkError? {
        events.removeAll(seqs: Set(seqs))
        return nil
    }
    public func writeChanges() -> UplinkError? { nil }
    public func recordDrops(_ ranges: [ClosedRange<UInt64>]) -> UplinkError? { nil }
}

extension Outbox {
    /// The pending event with this seq.
    public func entry(seq: UInt64) -> OutboxEntry? {
        let events = pending
        return events.index(seq: seq).map { events[$0] }
    }

    /// The pending event's bytes as published: no copy of the entry (a dozen strings retained and released) for them.
    public func wire(seq: UInt64) -> [UInt8]? {
        let events = pending
        guard let i = events.index(seq: seq) else { return nil }
        // (A subscript copied the whole entry first; the buffer counts from 0, the slice's indices from its start.)
        return events.withUnsafeBufferPointer { $0[i - events.startIndex].wire }
    }
}

extension ArraySlice<OutboxEntry> {
    /// Where the event with this seq is, an index of this slice (binary search: an outbox holds its events in seq
    /// order).
    func index(seq: UInt64) -> Int? {
        // Through the buffer: a subscript copies each entry it is asked for (a dozen strings retained).
        let found: Int? = withUnsafeBufferPointer { events in
            var low = 0, high = events.count
            while low < high {
                let mid = (low + high) / 2
                if events[mid].event.seq < seq { low = mid + 1 } else { high = mid }
            }
            if low < events.count && events[low].event.seq == seq { return low }
            return events.firstIndex { $0.event.seq == seq }   // (never out of order on disk; cheap insurance if one was)
        }
        return found.map { startIndex + $0 }
    }
}

extension Outbox {
    /// Stores one event, sparing nothing from the overflow policy.
    public func append(_ entry: OutboxEntry) -> (dropped: [OutboxEntry], failure: UplinkError?) {
        append([entry], sparing: [])
    }
}
