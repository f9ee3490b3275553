/// What the database thread does next (`DatabaseLoop` does it and says how it went). Pure: no I/O, no clock (`now` is
/// passed in, `monotonicSeconds()`), its randomness injected.
///
/// A round: take messages when none are held (waiting until one comes, a wake-up or the next idle deadline), stop once
/// stopped and drained, or when the stop's grace ran out during an outage; reconnect when there is no session; apply
/// the held messages in batches of at most `limit.current` (`BatchLimit`); then, once the bridge has started, record
/// the broker link when it changed, ask every online device for a rebirth when due (a new broker connection, the end
/// of an overflow that dropped their states) and sweep when due; a round without a fault ends the outage.
///
/// A message whose data the server refuses is the only thing ever skipped: a batch refused for it is applied one
/// message at a time, and only that one is skipped. Any other failure is the database's: what is held stays held and
/// the same work is tried again after a backoff of 1, 2, 4 … 30 s (less a random part of up to half, so that bridges
/// do not retry in step; at most 5 s while no server takes a connection: after a failover the promoted standby is
/// found within 5 s of its promotion). Deadlocks and serialization failures are retried at once (after 10 to 100 ms)
/// up to 5 times in a row; a batch cancelled by the site's `statement_timeout` is cut in half and tried again at once.
/// A stop waits for the database at most `stop_grace`.
struct BatchPolicy {
    struct Settings {
        var batchSize: Int
        /// Messages held at most (`hold_at_most`): an overflow ends once the queue holds less than half of it.
        var holdAtMost: Int
        var stopGrace: Double
        var reassertEvery: Double

        init(batchSize: Int, holdAtMost: Int, stopGrace: Double, reassertEvery: Double) {
            self.batchSize = batchSize
            self.holdAtMost = holdAtMost
            self.stopGrace = stopGrace
            self.reassertEvery = reassertEvery
        }

        init(_ config: BridgeConfig) {
            self.init(batchSize: config.batchSize, holdAtMost: config.holdAtMost, stopGrace: seconds(config.stopGrace),
                      reassertEvery: seconds(config.reassertEvery))
        }
    }

    /// What to do now. Each step is answered (its input below) before `next` is asked again.
    enum Step: Equatable {
        /// Up to `limit` messages, waiting while there are none until one comes, a wake-up or `until` (nil: no
        /// deadline); answer `taken`.
        case take(limit: Int, until: Double?)
        /// The first `n` held messages in one transaction; answer `applied` or `failed`.
        case apply(Int)
        /// The first held message alone (its batch was refused for one message's data); answer `isolated` or `failed`.
        case applyAlone
        /// Wait until `until`, or a wake-up (messages coming in do not end it).
        case pause(until: Double)
        /// A new database session; answer `connected` or `failed`.
        case reconnect
        /// The broker link's state written to `sensor_bridges`; answer `linkRecorded` or `failed`.
        case recordLink(String)
        /// Every online device asked for a rebirth; answer `rebirthsAsked` or `failed`.
        case rebirth
        /// The periodic sweep (`Sweep`); answer `swept` or `failed`.
        case sweep
        /// A round without a fault: an outage is over.
        case settled
        /// Done: `abandoned` when the stop's grace ran out with messages held (else all were committed).
        case stop(abandoned: Bool)
    }

    /// A failed step, as the policy tells failures apart.
    struct Failure: Equatable {
        enum Cause: Equatable {
            /// A message's own data refused (SQLSTATE class 22, 23, 21, 54), the session still usable.
            case messageData
            /// The bridge's own write refused by a rule of the database (a data error of a whole-batch statement).
            case rule
            /// A statement cancelled (the site's `statement_timeout`, an operator), the session still usable.
            case cancelled
            /// A deadlock or a serialization failure.
            case collision
            /// The database's own failure: lost, read-only, full, a privilege…
            case database
        }
        var cause: Cause
        /// The SQLSTATE, or the error's code: another one during an outage is said.
        var kind: String
        /// The session cannot be used again (lost, read-only, broken): a new one is made.
        var sessionLost = false
        /// No connection (no server took it, or it broke): while reconnecting, tried again within 5 s.
        var noConnection = false
    }

    /// What a failure means.
    enum Verdict: Equatable {
        /// The batch is cut (from `was` messages `to` fewer) and tried again at once.
        case cut(to: Int, was: Int)
        /// The batch of `n` messages is applied one message at a time.
        case isolate(Int)
        /// The first held message is skipped.
        case skip
        /// Tried again after a short pause.
        case collision
        /// Held: the same work is tried again after a backoff.
        case hold(Hold)
    }

    struct Hold: Equatable {
        /// What the outage comes from when the error alone does not say it (once per outage and cause).
        var explain: Explanation?
        /// The outage goes on for another reason (another SQLSTATE).
        var anotherReason: Bool
        /// The session is dropped; a new one is made.
        var reconnect: Bool
        /// The backoff's end.
        var until: Double
    }

    enum Explanation: Equatable {
        /// One message alone takes longer than the site's statement_timeout.
        case timeout
        /// A rule of the database refuses the bridge's own write.
        case rule
    }

    enum Overflow: Equatable {
        /// Messages are dropped, the queue being full.
        case dropping
        /// No longer: every online device is asked for a rebirth (their states come back).
        case ended
    }

    private enum Phase: Equatable {
        case gather, taking, ready, connecting, applying(Int), isolating(left: Int), housekeeping
        case recording(String), rebirthing, sweeping, swept
        case collision(until: Double, paused: Bool)
        case backoff(until: Double)
        case stopped(abandoned: Bool)
    }

    let settings: Settings
    /// A random number in the range (`Double.random(in:)`; tests pass their own).
    private let random: (ClosedRange<Double>) -> Double
    private var phase = Phase.gather
    private(set) var limit: BatchLimit
    /// Admitted messages not committed yet (nor skipped).
    private(set) var held = 0
    private(set) var connected: Bool
    /// Since a hold, until a round without a fault.
    private(set) var outage = false
    private var outageKind = ""
    private var explained: Explanation?
    /// Backoffs in a row.
    private var attempt = 0
    /// Deadlocks and serialization failures in a row.
    private var collisions = 0
    private var stopping = false
    /// When a stop stops waiting for the database (set when the stop is seen).
    private var stopDeadline: Double?
    /// The feed is stopped and empty.
    var drained = false
    private var brokerConnection: UInt64 = 0
    private var brokerState = "lost"
    private var seenConnection: UInt64 = 0
    /// The broker link's state last written to `sensor_bridges`.
    private(set) var recordedLink: String?
    /// Every online device is to be asked for a rebirth: after a new broker connection, or at the end of an overflow
    /// that dropped their states.
    private(set) var rebirthEveryOnline = false
    private var overflowing = false
    private var sweepDue = 0.0
    /// The minute's figures: since when, and how many batches they count.
    private(set) var figures: (since: Double, batches: Int)
    /// When the metrics file has a change held back by its interval (nil: none).
    var metricsDue: Double?

    init(_ settings: Settings, connected: Bool, now: Double,
         random: @escaping (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) {
        self.settings = settings
        self.connected = connected
        self.random = random
        limit = BatchLimit(full: settings.batchSize)
        figures = (now, 0)
    }

    // MARK: - Inputs

    mutating func stopRequested() { stopping = true }

    /// The broker link as it is now: its connection number (0: never connected) and state (`connected`, `lost`,
    /// `stopped`).
    mutating func broker(connection: UInt64, state: String) {
        brokerConnection = connection
        brokerState = state
    }

    /// `dropped` messages the full queue dropped since the last call; `queued` waiting in it now.
    mutating func overflow(dropped: Int, queued: Int) -> Overflow? {
        if dropped > 0 {
            overflowing = true
            return .dropping
        }
        guard overflowing && queued < settings.holdAtMost / 2 else { return nil }
        overflowing = false
        rebirthEveryOnline = true   // their states come back
        return .ended
    }

    /// The `take` step gave `count` admitted messages.
    mutating func taken(_ count: Int) {
        held += count
        phase = .ready
    }

    mutating func connected(_ isConnected: Bool = true) {
        connected = isConnected
        phase = .ready
    }

    /// The `apply` step committed its batch.
    mutating func applied() {
        guard case .applying(let size) = phase else { return }
        held -= size
        limit.committed(size: size)
        figures.batches += 1
        phase = .housekeeping
    }

    /// The `applyAlone` step committed its message.
    mutating func isolated() {
        guard case .isolating(let left) = phase else { return }
        held -= 1
        phase = left > 1 ? .isolating(left: left - 1) : .gather
    }

    mutating func linkRecorded(_ state: String) {
        recordedLink = state
        phase = .housekeeping
    }

    mutating func rebirthsAsked() {
        rebirthEveryOnline = false   // only now: a failed query tries again (a rebirth is the only way to the retained states)
        phase = .housekeeping
    }

    /// (The round ends with it: a sweep slower than `reassert_every` does not keep the feed waiting.)
    mutating func swept() { phase = .swept }

    /// The minute's figures were logged.
    mutating func figuresLogged(now: Double) { figures = (now, 0) }

    /// Whether the minute's figures are due (there are some, and a minute passed).
    func figuresDue(now: Double) -> Bool { figures.batches > 0 && now - figures.since >= 60 }

    /// The current step failed.
    mutating func failed(_ failure: Failure, now: Double) -> Verdict {
        let size: Int
        switch phase {
        case .applying(let n): size = n
        case .isolating: size = 1
        default: size = 0
        }
        if failure.cause == .cancelled && size > 0 {
            if limit.cancelled(size: size) {   // (one message alone: nothing left to cut)
                phase = .gather
                return .cut(to: limit.current, was: size)
            }
            return fault(failure, now: now, explaining: .timeout)
        }
        if failure.cause == .rule { return fault(failure, now: now, explaining: .rule) }
        guard failure.cause == .messageData && size > 0 else { return fault(failure, now: now) }
        switch phase {
        case .isolating:
            isolated()   // skipped: done with it
            return .skip
        case .applying(let n) where n > 1:
            phase = .isolating(left: n)
            return .isolate(n)
        default:
            held -= 1
            phase = .gather
            return .skip
        }
    }

    /// The database's own failure: what is held stays held, and the same work is tried again later.
    private mutating func fault(_ failure: Failure, now: Double, explaining explanation: Explanation? = nil) -> Verdict {
        if failure.cause == .collision && collisions < 5 {
            collisions += 1
            phase = .collision(until: now + random(0.01...0.1), paused: false)
            return .collision
        }
        let explain = explanation != nil && explanation != explained ? explanation : nil
        if explain != nil { explained = explain }
        let cap = phase == .connecting && failure.noConnection ? 5.0 : 30.0
        if failure.sessionLost { connected = false }
        let another = outage && failure.kind != outageKind
        outage = true
        outageKind = failure.kind
        attempt += 1
        let until = now + min(cap, Double(1 << min(attempt - 1, 5))) * random(0.5...1.0)
        phase = .backoff(until: until)
        return .hold(Hold(explain: explain, anotherReason: another, reconnect: failure.sessionLost, until: until))
    }

    // MARK: - The next step

    mutating func next(now: Double) -> Step {
        if stopping && stopDeadline == nil { stopDeadline = now + settings.stopGrace }
        while true {
            switch phase {
            case .stopped(let abandoned):
                return .stop(abandoned: abandoned)
            case .collision(let until, let paused):
                if paused { phase = .gather; continue }
                phase = .collision(until: until, paused: true)
                return .pause(until: until)
            case .backoff(let until):
                // Messages coming in do not end it; a stop asked meanwhile shortens it to the stop's grace.
                let end = min(until, stopDeadline ?? .infinity)
                if graceOver(now) || now >= end { phase = .gather; continue }
                return .pause(until: end)
            case .gather, .taking:
                if held > 0 { phase = .ready; continue }
                if stopping && drained {
                    phase = .stopped(abandoned: false)
                    continue
                }
                phase = .taking
                return .take(limit: limit.current, until: idleDeadline(now))
            case .ready:
                if graceOver(now) { phase = .stopped(abandoned: true); continue }
                if !connected { phase = .connecting; return .reconnect }
                let size = min(held, limit.current)
                if size > 0 { phase = .applying(size); return .apply(size) }
                phase = .housekeeping
            case .connecting:
                return .reconnect
            case .applying(let size):
                return .apply(size)
            case .isolating:
                return .applyAlone
            case .recording(let state):
                return .recordLink(state)
            case .rebirthing:
                return .rebirth
            case .sweeping:
                return .sweep
            case .housekeeping, .swept:
                if phase == .housekeeping, let step = housekeeping(now) { return step }
                attempt = 0
                collisions = 0
                outage = false
                explained = nil
                phase = .gather
                return .settled
            }
        }
    }

    /// Once the bridge has started (nothing is written before): after a new broker connection, online devices are
    /// asked to republish their states; the link's state when it changed; then the sweep, when due.
    private mutating func housekeeping(_ now: Double) -> Step? {
        guard brokerConnection > 0 else { return nil }
        if brokerConnection != seenConnection {
            seenConnection = brokerConnection
            rebirthEveryOnline = true
        }
        if brokerState != recordedLink {
            phase = .recording(brokerState)
            return .recordLink(brokerState)
        }
        if rebirthEveryOnline {
            phase = .rebirthing
            return .rebirth
        }
        guard now >= sweepDue else { return nil }
        sweepDue = now + settings.reassertEvery
        phase = .sweeping
        return .sweep
    }

    /// How long an empty queue is waited for: not at all when there is work to do now (the database failing: the
    /// backoff was the wait; a new broker connection or an overflow's end to answer with rebirths); otherwise until
    /// a message comes, a wake-up (a stop, a broker connection) or the next of the loop's own deadlines: the sweep
    /// (`reassert_every`, once the bridge has started), the minute's figures (when there are any) and a metrics change
    /// held back by its interval.
    private func idleDeadline(_ now: Double) -> Double? {
        if !connected || outage || rebirthEveryOnline || brokerConnection != seenConnection { return now }
        var deadline: Double?
        if brokerConnection > 0 { deadline = sweepDue }
        if figures.batches > 0 { deadline = min(deadline ?? .infinity, figures.since + 60) }
        if let metricsDue { deadline = min(deadline ?? .infinity, metricsDue) }
        return deadline
    }

    /// A stop was asked for `stop_grace` ago while the database is failing.
    private func graceOver(_ now: Double) -> Bool {
        guard let stopDeadline else { return false }
        return outage && now >= stopDeadline
    }
}
