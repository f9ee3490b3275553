#if canImport(Glibc)
import Glibc
import ParkWiseLog
#endif

/// What the MQTT thread hands the database thread: messages in arrival order. The libmosquitto
/// callback only appends under the lock; the database thread takes batches, waiting when empty, and makes its
/// pauses here too, so that a `wake()` (a stop, a new broker connection) reaches it whatever it waits for.
final class FeedQueue: @unchecked Sendable {
    struct Item: Sendable {
        var topic: String
        var payload: [UInt8]
        /// Monotonic nanoseconds when it came off the socket (for latency figures).
        var received: Int64
        /// The broker's stored copy (sent at each subscription), not news from the device.
        var retained = false
    }

    // Guarded by `ready`, which the consumer waits on (raised by `wake()`).
    private let ready = MonotonicCondition()
    private var items: [Item] = []
    private var head = 0
    /// Held at most: beyond, events and retained states are dropped (`takeDropped`), statuses still go in (one per
    /// device and connection). Once the queue is short again the bridge asks every online device for a rebirth,
    /// which brings the retained states back.
    private let limit: Int
    private var dropped = 0
    /// The consumer waits for items (a push signals only then: not during a pause).
    private var awaitingItems = false

    init(limit: Int = .max) {
        self.limit = limit
    }

    func push(topic: String, payload: [UInt8], retained: Bool = false) {
        let item = Item(topic: topic, payload: payload, received: monotonicNanoseconds(), retained: retained)
        ready.lock()
        defer { ready.unlock() }
        if items.count - head >= limit && !topic.hasSuffix("/status") {
            dropped += 1
            return
        }
        items.append(item)
        if awaitingItems { ready.signal() }
    }

    /// Ends the consumer's wait (a `take` or a `pause`), or its next one if it is not waiting: to stop, or to look at
    /// what changed (a new broker connection). From any thread.
    func wake() {
        ready.lock()
        ready.raise()
        ready.unlock()
    }

    /// Up to `limit` items, oldest first. While there are none, waits until one comes, `wake()` is called or
    /// `deadline` (`monotonicSeconds()`; nil: none) passes.
    func take(limit: Int, until deadline: Double?) -> [Item] {
        ready.lock()
        defer { ready.unlock() }
        awaitingItems = true
        while head == items.count && !ready.raised && ready.wait(until: deadline) {}
        awaitingItems = false
        ready.raised = false
        let end = min(items.count, head + limit)
        let batch = Array(items[head..<end])
        head = end
        if head == items.count || head > 4096 {
            items.removeFirst(head)
            head = 0
        }
        return batch
    }

    /// The consumer's pause (a backoff, a deadlock's retry): waits until `wake()` is called or `deadline`
    /// (`monotonicSeconds()`) passes; items pushed meanwhile do not end it. True when woken.
    func pause(until deadline: Double) -> Bool {
        ready.lock()
        defer { ready.unlock() }
        return ready.waitRaised(until: deadline)
    }

    /// Messages dropped since the last call, the queue being full.
    func takeDropped() -> Int {
        ready.lock()
        defer { dropped = 0; ready.unlock() }
        return dropped
    }

    var count: Int {
        ready.lock()
        defer { ready.unlock() }
        return items.count - head
    }
}
