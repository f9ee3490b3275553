/// When a metrics textfile is rewritten: only when its facts changed since the last write, and at most once per
/// `every` (a change within it is written at its end: the caller sleeps until then, the only deadline this sets).
/// Nothing changed, nothing to do: an idle daemon never wakes for its metrics. Times are the caller's monotonic
/// seconds; no clock is read here.
public struct TextfilePace<Facts: Equatable> {
    public let every: Double
    /// After a failed write (a directory missing, a full disk): the wait before the next try, so that a failing
    /// directory costs a wake-up that often, not one per `every`.
    public let retry: Double
    private var written: Facts?
    /// No write before this.
    private var notBefore = -Double.infinity

    public enum Decision: Equatable {
        case nothing
        case writeNow
        /// Changed, but written too recently: come back then.
        case wait(until: Double)
    }

    public init(every: Double, retry: Double) {
        self.every = every
        self.retry = retry
    }

    /// `final`: the last chance (the daemon stops), the interval does not hold a change back.
    public func decide(_ facts: Facts, now: Double, final: Bool = false) -> Decision {
        guard facts != written else { return .nothing }
        return now >= notBefore || final ? .writeNow : .wait(until: notBefore)
    }

    public mutating func wrote(_ facts: Facts, at now: Double) {
        written = facts
        notBefore = now + every
    }

    /// The write failed: the facts are still unwritten, tried again `retry` from now.
    public mutating func failed(at now: Double) {
        notBefore = now + retry
    }
}
