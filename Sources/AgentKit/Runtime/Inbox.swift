import Glibc
import ParkWiseLog
import MQTT

/// What the event loop waits on: inputs posted from any thread (the line queue's nudge, the link's events, a stop),
/// taken in order by the one thread that runs the loop, which sleeps in poll() until an input comes, its next
/// deadline passes, or a descriptor it watches is ready (the broker's socket, whose rounds the loop runs itself).
/// Plain POSIX (a mutex, an eventfd), no Swift concurrency and no Dispatch: nothing wakes the process while
/// nothing happens. Bounded by what posts into it: one nudge for all waiting line changes, link events bounded by
/// the session's window (and one state per retained topic written), commands by `messageBound`, timers that are deadlines, not inputs.
final class Inbox: @unchecked Sendable {
    /// What woke the loop.
    enum Wake {
        case input(AgentInput)
        /// A watched descriptor is ready: the watched slots, with their revents.
        case watched([pollfd])
        /// The deadline passed.
        case deadline
    }

    // Guarded by `mutex`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var items: [AgentInput] = []
    private var head = 0
    private var waiting = false
    /// Commands (MQTT messages) waiting, and those turned away because `messageBound` were waiting already.
    private var messagesWaiting = 0
    private var messagesDropped = 0
    /// Inputs taken one after the other without looking at the watched descriptor (the loop's thread only).
    private var takenInARow = 0
    /// What a wait polls: the wakeup, then the watched descriptors (the loop's thread only; kept between waits).
    private var slots: [pollfd] = []
    /// Signalled by a post while the loop waits (nil: out of descriptors; the loop then looks every 10 ms).
    private let wakeup = LinkWakeup()

    /// Commands waiting for the loop, at most: a flood of them from the broker is cut here (counted, and said by
    /// the loop), so it cannot grow the process.
    static let messageBound = 256
    /// Under a backlog the watched descriptor is still looked at (without waiting) after this many inputs.
    static let fairness = 8

    init() {
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
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
        if wake { wakeup?.signal() }
    }

    /// The next input; nil once `deadline` (CLOCK_MONOTONIC nanoseconds) has passed with none.
    func next(until deadline: Int64?) -> AgentInput? {
        while true {
            switch wait(until: deadline, watching: []) {
            case .input(let input): return input
            case .deadline: return nil
            case .watched: continue
            }
        }
    }

    /// The next input, or watched descriptors ready (`watching`: fds and events), or the deadline (CLOCK_MONOTONIC
    /// nanoseconds) passed. Inputs come first, in order, but under a backlog the descriptors are looked at every
    /// `fairness` inputs. From the loop's thread only.
    func wait(until deadline: Int64?, watching: [pollfd]) -> Wake {
        while true {
            pthread_mutex_lock(mutex)
            if head < items.count {
                if !watching.isEmpty && takenInARow >= Self.fairness {
                    pthread_mutex_unlock(mutex)
                    takenInARow = 0
                    var ready = watching
                    if poll(&ready, nfds_t(ready.count), 0) > 0 { return .watched(ready) }
                    continue
                }
                takenInARow += 1
                let input = take()
                pthread_mutex_unlock(mutex)
                return .input(input)
            }
            takenInARow = 0
            waiting = true
            pthread_mutex_unlock(mutex)
            // Until the deadline, rounded up to whole milliseconds (a clock is read only when there is one). A deadline
            // well ahead is timed by the coarse clock, which costs no system call: the wait is shortened by the most
            // that clock can be behind, so it never ends late, and a wait that ended early looks again. Only a
            // deadline that near is timed by the precise clock.
            var timeout: Int32 = -1
            var early = false
            if let deadline {
                var left = deadline - coarseMonotonicNanoseconds() - coarseClockResolution
                early = left > coarseClockResolution
                if !early {
                    left = deadline - monotonicNanoseconds()
                    if left <= 0 {
                        if stopWaiting() { continue }
                        return .deadline
                    }
                }
                timeout = Int32(clamping: (left + 999_999) / 1_000_000)
            }
            if wakeup == nil { timeout = timeout < 0 ? 10 : min(timeout, 10) }
            slots.removeAll(keepingCapacity: true)
            slots.append(pollfd(fd: wakeup?.fd ?? -1, events: Int16(POLLIN), revents: 0))
            slots.append(contentsOf: watching)
            let ready = poll(&slots, nfds_t(slots.count), timeout)
            if slots[0].revents != 0 { wakeup?.drain() }
            let posted = stopWaiting()
            if ready > 0 && slots.dropFirst().contains(where: { $0.revents != 0 }) { return .watched(Array(slots.dropFirst())) }
            if posted || ready != 0 || wakeup == nil || early { continue }
            return .deadline
        }
    }

    /// Leaves the waiting state; true if something was posted meanwhile.
    private func stopWaiting() -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        waiting = false
        return head < items.count
    }

    /// The first input (under the mutex).
    private func take() -> AgentInput {
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
}
