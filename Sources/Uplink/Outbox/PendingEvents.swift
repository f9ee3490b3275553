/// An outbox's pending events in memory, oldest first (seq order). The broker acknowledges the oldest far more often
/// than any other, so its removal moves nothing: the events before `head` are gone, and they leave the array in one
/// move once they are half of it, or at once when nothing is left pending. (Removing the oldest with
/// `remove(at: 0)` shifted every other event: a drain of a full outbox of 20,000 events moved them 20,000 times,
/// half the drain's CPU.)
struct PendingEvents {
    private var storage: [OutboxEntry]
    private var head = 0

    init(_ events: [OutboxEntry] = []) { storage = events }

    /// Oldest first; a view of the storage, not a copy.
    var all: ArraySlice<OutboxEntry> { storage[head...] }
    var count: Int { storage.count - head }

    /// Removes the event with this seq; false if none is pending.
    @discardableResult
    mutating func remove(seq: UInt64) -> Bool {
        guard let i = all.index(seq: seq) else { return false }
        guard i == head else {
            storage.remove(at: i)
            return true
        }
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= Self.compactAfter && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return true
    }

    /// Fewer removed events than this stay in the array whatever their share (each is a few hundred bytes).
    static let compactAfter = 32

    /// Adds a batch (oldest first) and gives up what `OverflowPolicy` picks beyond the capacity; the events given up.
    mutating func admit(_ batch: [OutboxEntry], capacity: Int, sparing: Set<UInt64>) -> [OutboxEntry] {
        compact()
        return OverflowPolicy.admit(batch, into: &storage, capacity: capacity, sparing: sparing)
    }

    mutating func removeAll(seqs: Set<UInt64>) {
        compact()
        storage.removeAll { seqs.contains($0.event.seq) }
    }

    mutating func replace(with events: [OutboxEntry]) {
        storage = events
        head = 0
    }

    private mutating func compact() {
        guard head > 0 else { return }
        storage.removeFirst(head)
        head = 0
    }
}
