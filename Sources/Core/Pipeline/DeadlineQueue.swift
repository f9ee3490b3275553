/// The garage's timers (filters settling, check-ins, input health). Entries are not removed when a
/// timer moves; the garage checks on pop whether an entry is still current.
struct DeadlineQueue {
    enum Timer: Hashable { case filter(Int), checkin(Int), health(Int) }
    struct Entry: Comparable {
        var due: MonotonicInstant
        var order: UInt64
        var timer: Timer
        static func < (a: Entry, b: Entry) -> Bool { (a.due, a.order) < (b.due, b.order) }
    }

    private var heap = MinHeap<Entry>()
    private var scheduled: UInt64 = 0

    var earliest: MonotonicInstant? { heap.first?.due }

    mutating func schedule(_ timer: Timer, at due: MonotonicInstant) {
        scheduled += 1
        heap.push(Entry(due: due, order: scheduled, timer: timer))
    }

    /// Removes and returns the earliest entry if it is due at `now`.
    mutating func popDue(_ now: MonotonicInstant) -> Entry? {
        guard let first = heap.first, first.due <= now else { return nil }
        return heap.popFirst()
    }
}
