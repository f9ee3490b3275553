import Glibc
import ParkWiseLog

/// What the event loop waits on: inputs posted from any thread (the line queue's nudge, the link's events, a stop),
/// taken in order by the one thread that runs the loop, which sleeps until an input comes or its next deadline
/// passes. Plain POSIX (a mutex and a condition variable on the monotonic clock), no Swift concurrency and no
/// Dispatch: nothing wakes the process while nothing happens. Bounded by what posts into it: one nudge for all
/// waiting line changes, link events bounded by the session's window, timers that are deadlines, not inputs.
final class Inbox: @unchecked Sendable {
    // Guarded by `mutex`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let posted = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var items: [AgentInput] = []
    private var head = 0
    private var waiting = false
    /// Commands (MQTT messages) waiting, and those turned away because `messageBound` were waiting already.
    private var messagesWaiting = 0
    private var messagesDropped = 0

    /// Commands waiting for the loop, at most: a flood of them from the broker is cut here (counted, and said by
    /// the loop), so it cannot grow the process.
    static let messageBound = 256

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(posted, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(posted)
        pthread_mutex_destroy(mutex)
        posted.deallocate()
        mutex.deallocate()
    }

    /// From any thread.
    func post(_ input: AgentInput) { post(contentsOf: CollectionOfOne(input)) }

    /// Several inputs at once (what one round of the network loop brought): one lock, one wake-up.
    func post(contentsOf inputs: some Sequence<AgentInput>) {
        pthread_mutex_lock(mutex)
        for input in inputs {
            if case .uplink(.message) = input {
                guard messagesWaiting < Self.messageBound else {
                    messagesDropped += 1
                    continue
                }
                messagesWaiting += 1
            }
            items.append(input)
        }
        let wake = waiting
        waiting = false   // one signal per wait
        pthread_mutex_unlock(mutex)
        // Signalled after unlocking, so the woken loop does not at once block on the mutex still held here.
        if wake { pthread_cond_signal(posted) }
    }

    /// The next input; nil once `deadline` (CLOCK_MONOTONIC nanoseconds, real time) has passed with none.
    func next(until deadline: Int64?) -> AgentInput? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while head == items.count {
            if let deadline {
                // No clock read: the absolute wait itself says when the deadline has passed (at once if it has).
                var ts = timespec(tv_sec: Int(max(0, deadline) / 1_000_000_000), tv_nsec: Int(max(0, deadline) % 1_000_000_000))
                waiting = true
                let rc = pthread_cond_timedwait(posted, mutex, &ts)
                waiting = false
                if rc == ETIMEDOUT && head == items.count { return nil }
            } else {
                waiting = true
                pthread_cond_wait(posted, mutex)
                waiting = false
            }
        }
        let input = items[head]
        head += 1
        if case .uplink(.message) = input { messagesWaiting -= 1 }
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 64)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            // Under sustained load the inbox may never run empty: what was taken is let go of all the same.
            items.removeFirst(head)
            head = 0
        }
        return input
    }

    /// Commands turned away since the last call, and how many wait now.
    func takeDroppedMessages() -> (dropped: Int, waiting: Int) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        defer { messagesDropped = 0 }
        return (messagesDropped, messagesWaiting)
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    static func now() -> Int64 { monotonicNanoseconds() }
}
