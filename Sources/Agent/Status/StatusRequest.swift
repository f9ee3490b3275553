import AgentStatus
import Dispatch
import Synchronization

/// One request for the status, handed from the socket thread to the event loop: the loop fills
/// it in when it gets to it (never waiting on anyone), the socket thread waits for it with a deadline.
final class StatusRequest: Sendable {
    private let slot = Mutex<AgentStatus?>(nil)
    private let done = DispatchSemaphore(value: 0)

    /// Called by the event loop; nil when it cannot answer (it is stopping).
    func answer(_ status: AgentStatus?) {
        slot.withLock { $0 = status }
        done.signal()
    }

    /// Called by the socket thread: the answer, or nil if none came within `seconds`.
    func wait(seconds: Double) -> AgentStatus? {
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        return slot.withLock { $0 }
    }
}
