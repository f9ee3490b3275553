import ParkWiseLog
#if canImport(Glibc)
import Glibc
#endif

/// A mutex and a condition whose timed waits run on CLOCK_MONOTONIC, the clock of `monotonicSeconds()`: a deadline
/// is not moved by a step of the wall clock. What the bridge's threads wait on: nothing wakes them but a signal or
/// a deadline of their own. With a flag, `raised`, for a wake-up that must not be lost when the waiting thread is
/// busy elsewhere: its next wait sees it.
final class MonotonicCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Under the lock: set by `raise()`, cleared by the one waiting thread.
    var raised = false

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    /// Under the lock: wakes the waiting thread.
    func signal() { pthread_cond_signal(condition) }

    /// Under the lock: waits for a signal (or a spurious wake-up) until `deadline` (`monotonicSeconds()`; nil or
    /// infinite: none). False, without waiting, once the deadline has passed.
    func wait(until deadline: Double?) -> Bool {
        guard let deadline, deadline.isFinite else {
            pthread_cond_wait(condition, mutex)
            return true
        }
        guard monotonicSeconds() < deadline else { return false }
        let whole = deadline.rounded(.down)
        var at = timespec(tv_sec: Int(whole), tv_nsec: min(999_999_999, Int((deadline - whole) * 1e9)))
        return pthread_cond_timedwait(condition, mutex, &at) != ETIMEDOUT
    }

    /// Under the lock: sets `raised` and wakes the waiting thread.
    func raise() {
        raised = true
        signal()
    }

    /// Under the lock: waits until `raised` or `deadline` passes; true (and `raised` cleared) when raised.
    func waitRaised(until deadline: Double?) -> Bool {
        while !raised {
            guard wait(until: deadline) else { return false }
        }
        raised = false
        return true
    }
}

/// A flag one thread raises and another waits for: the bridge's main thread waits on it for its events (connected,
/// stop requested), each wait taking what was raised since the last.
final class Doorbell: Sendable {
    private let condition = MonotonicCondition()

    /// From any thread.
    func ring() {
        condition.lock()
        condition.raise()
        condition.unlock()
    }

    /// Waits until rung or `deadline` (`monotonicSeconds()`; nil: none) passes; true when rung.
    func wait(until deadline: Double? = nil) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return condition.waitRaised(until: deadline)
    }
}
