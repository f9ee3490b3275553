import Synchronization

/// One request for the status, handed from the socket thread to the event loop: the loop fills
/// it in when it gets to it (never waiting on anyone) and `notify` wakes the socket thread.
final class StatusRequest: Sendable {
    private let slot = Mutex<AgentStatus?>(nil)
    private let notify: @Sendable () -> Void

    init(notify: @escaping @Sendable () -> Void) {
        self.notify = notify
    }

    /// Called by the event loop.
    func answer(_ status: AgentStatus) {
        slot.withLock { $0 = status }
        notify()
    }

    /// The answer, once there is one.
    var answered: AgentStatus? { slot.withLock { $0 } }
}

/// Requests waiting for the event loop, which answers them before its next input: a technician's
/// `status` does not wait behind a backlog of line changes (each stored with a disk sync).
final class StatusInbox: Sendable {
    private let waiting = Mutex<[StatusRequest]>([])

    func add(_ request: StatusRequest) {
        waiting.withLock { $0.append(request) }
    }

    /// Answers every waiting request with one status, built only if someone waits.
    func answer(_ build: () -> AgentStatus) {
        let requests = waiting.withLock { list in
            defer { list.removeAll() }
            return list
        }
        guard !requests.isEmpty else { return }
        let status = build()
        for request in requests { request.answer(status) }
    }
}
