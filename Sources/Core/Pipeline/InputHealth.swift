/// Whether one input can be trusted: stuck (held active longer than its kind allows) or chattering
/// (more changes in a minute than any vehicle makes; a burst of contact bounce within 100 ms counts
/// once, a continuous buzz ten times a second). A chattering input recovers after a quiet
/// `recoverAfter`; a stuck one when it releases.
struct InputHealth {
    let stuckAfter: Duration?
    let chatterLimit: Int
    let recoverAfter: Duration
    private(set) var fault: FaultReason?
    /// When the filtered level became active, while it is.
    private(set) var activeSince: MonotonicInstant?
    private var lastEdge: MonotonicInstant?
    /// The edge last counted towards chatter: contact bounce within `burst` of it counts once.
    private var counted: MonotonicInstant?
    /// The last `chatterLimit + 1` raw edge times, a ring.
    private var recent: [MonotonicInstant]
    private var next = 0

    static let chatterWindow: Duration = .seconds(60)
    static let burst: Duration = .milliseconds(100)

    init(stuckAfter: Duration?, chatterLimit: Int, recoverAfter: Duration) {
        self.stuckAfter = stuckAfter
        self.chatterLimit = chatterLimit
        self.recoverAfter = recoverAfter
        recent = []
        recent.reserveCapacity(chatterLimit + 1)
    }

    /// When this input's health may change by the passing of time alone.
    var deadline: MonotonicInstant? {
        switch fault {
        case .chatter: return lastEdge.map { $0 + recoverAfter }
        case .stuck, .lost: return nil
        case nil: return activeSince.flatMap { since in stuckAfter.map { since + $0 } }
        }
    }

    /// Records a raw edge. True when it starts a chatter fault.
    mutating func rawEdge(at: MonotonicInstant) -> Bool {
        guard fault != .lost else { return false }
        lastEdge = at
        if let counted, at - counted < InputHealth.burst { return false }
        counted = at
        if recent.count <= chatterLimit {
            recent.append(at)
        } else {
            recent[next] = at
            next = (next + 1) % recent.count
        }
        guard fault != .chatter, recent.count > chatterLimit else { return false }
        // The ring's oldest entry sits where the next one will be written.
        let oldest = recent[next % recent.count]
        guard at - oldest < InputHealth.chatterWindow else { return false }
        fault = .chatter
        activeSince = nil
        return true
    }

    /// The input cannot be read any more. False if it already was lost.
    mutating func lose() -> Bool {
        guard fault != .lost else { return false }
        fault = .lost
        activeSince = nil
        return true
    }

    /// A lost input is read again (its line was busy at start, and is free now), at this level. False if it was not lost.
    mutating func regain(active: Bool, at: MonotonicInstant) -> Bool {
        guard fault == .lost else { return false }
        fault = nil
        recent.removeAll(keepingCapacity: true)
        next = 0
        lastEdge = nil
        counted = nil
        resume(active: active, at: at)
        return true
    }

    /// Records a filtered level change. True when it clears a stuck fault.
    mutating func filtered(active: Bool, at: MonotonicInstant) -> Bool {
        activeSince = active ? at : nil
        guard !active, fault == .stuck else { return false }
        fault = nil
        return true
    }

    enum Change { case stuck(since: MonotonicInstant), quiet }

    /// Called when `deadline` has passed.
    mutating func expire(now: MonotonicInstant) -> Change? {
        switch fault {
        case .chatter:
            guard let lastEdge, lastEdge + recoverAfter <= now else { return nil }
            fault = nil
            recent.removeAll(keepingCapacity: true)
            next = 0
            return .quiet
        case .stuck, .lost:
            return nil
        case nil:
            guard let since = activeSince, let limit = stuckAfter, since + limit <= now else { return nil }
            fault = .stuck
            return .stuck(since: since)
        }
    }

    /// After a chatter fault clears, the level the input settled at.
    mutating func resume(active: Bool, at: MonotonicInstant) {
        activeSince = active ? at : nil
    }
}
