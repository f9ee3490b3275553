#if canImport(Glibc)
import Glibc
import ParkWiseLog
#endif

/// What the MQTT thread hands the database thread: messages in arrival order. The libmosquitto
/// callback only appends under the lock; the database thread takes batches, waiting when empty.
final class FeedQueue: @unchecked Sendable {
    struct Item: Sendable {
        var topic: String
        var payload: [UInt8]
        /// Monotonic nanoseconds when it came off the socket (for latency figures).
        var received: Int64
    }

    // Guarded by `mutex`; the consumer waits on `ready`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var items: [Item] = []
    private var head = 0
    /// Held at most: beyond, events and retained states are dropped (`takeDropped`), statuses still go in (one per
    /// device and connection). Once the queue is short again the bridge asks every online device for a rebirth,
    /// which brings the retained states back.
    private let limit: Int
    private var dropped = 0

    init(limit: Int = .max) {
        self.limit = limit
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(ready, nil)
    }

    deinit {
        pthread_cond_destroy(ready)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        ready.deallocate()
    }

    func push(topic: String, payload: [UInt8]) {
        let item = Item(topic: topic, payload: payload, received: monotonicNanoseconds())
        pthread_mutex_lock(mutex)
        if items.count - head >= limit && !topic.hasSuffix("/status") {
            dropped += 1
            pthread_mutex_unlock(mutex)
            return
        }
        items.append(item)
        pthread_cond_signal(ready)
        pthread_mutex_unlock(mutex)
    }

    /// Wakes a waiting `take` (to stop, or to run periodic work).
    func wake() {
        pthread_mutex_lock(mutex)
        pthread_cond_signal(ready)
        pthread_mutex_unlock(mutex)
    }

    /// Up to `limit` items, oldest first; waits up to `timeoutMs` while there are none.
    func take(limit: Int, timeoutMs: Int) -> [Item] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if head == items.count {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            let ns = Int(deadline.tv_nsec) + timeoutMs * 1_000_000
            deadline.tv_sec += ns / 1_000_000_000
            deadline.tv_nsec = ns % 1_000_000_000
            _ = pthread_cond_timedwait(ready, mutex, &deadline)
        }
        let end = min(items.count, head + limit)
        let batch = Array(items[head..<end])
        head = end
        if head == items.count || head > 4096 {
            items.removeFirst(head)
            head = 0
        }
        return batch
    }

    /// Messages dropped since the last call, the queue being full.
    func takeDropped() -> Int {
        pthread_mutex_lock(mutex)
        defer { dropped = 0; pthread_mutex_unlock(mutex) }
        return dropped
    }

    var count: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return items.count - head
    }
}
