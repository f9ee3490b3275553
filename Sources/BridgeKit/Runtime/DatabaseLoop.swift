import ParkWiseLog
import Postgres
#if canImport(Glibc)
import Glibc
#endif

/// The database thread's work: does what `BatchPolicy` decides — batches in, one transaction each; periodic sweeps
/// (stale devices, re-assert over the backend's writes, snapshots); waits, reconnections, the stop — and tells it how
/// each step went. Runs until stopped and drained. The policy says why; this says what happened (the log lines, the
/// metrics file).
///
/// Retrying is safe: a failed transaction left nothing, and every write is idempotent or ordered by the device's seq
/// (a batch whose COMMIT was done but whose reply was lost is found done: FailoverTests).
///
/// It never polls: every wait (for messages, a backoff, a deadlock's retry) is on the feed queue's condition, until a
/// message, a wake-up (a stop, a broker connection) or the policy's next real deadline. Idle, it wakes once per
/// `reassert_every`.
///
/// It knows the rest of the bridge through `BrokerSide` and makes its sessions with `connect`: `BridgeRuntime` and
/// `PostgresConnection` in the bridge, a fake broker side and `FakeDatabase` in `DatabaseLoopTests`.
struct DatabaseLoop {
    let broker: any BrokerSide
    /// A new database session (`reconnect`).
    private let connect: () throws(PostgresError) -> any Database
    private var policy: BatchPolicy
    private var applier: Applier?
    private var gate: DeviceGate
    /// Admitted messages not yet committed (`policy.held` of them); kept across failures.
    private var pending: [FeedMessage] = []
    /// When they came off the socket (may be shorter: the gate drops some and releases messages it held for a status).
    private var pendingReceived: [Int64] = []
    private var outage = LogStreak(.error, "database unavailable, holding received messages", ended: "database available again")
    private var batchesCut = LogStreak(.warn, "batches cut: the database's statement_timeout cancels bigger ones",
                                       ended: "batches back to full size")
    private var overflow = LogStreak(.error, "too many messages held, new events and states dropped (rebuilt by a rebirth)",
                                     ended: "messages no longer dropped, every online device asked for a rebirth")
    /// The server (`host:port`) of the last session: another one after a reconnection is a failover, said at info.
    private var sessionServer: String?
    private var sweep: Sweep
    private var figures = MinuteFigures()
    /// The figures for node-exporter (`metrics_file`; nil: not asked for).
    private var metrics: MetricsFile?

    /// `db`: the session the start-up checks used. `random`: the random part of a backoff (`BatchPolicy`).
    init(broker: any BrokerSide, db: any Database, gate: DeviceGate,
         connect: @escaping () throws(PostgresError) -> any Database,
         random: @escaping (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) {
        self.broker = broker
        self.connect = connect
        self.gate = gate
        sweep = Sweep(config: broker.config)
        metrics = broker.config.metricsFile.map(MetricsFile.init)
        applier = try? Applier(db: db, spotOwners: broker.config.spotOwners)
        policy = BatchPolicy(.init(broker.config), connected: applier != nil, now: monotonicSeconds(), random: random)
        logSession(db)
    }

    /// Runs until stopped; returns how many received messages a database fault kept from being
    /// committed before the stop's grace ran out (0 after a clean drain).
    mutating func run() -> Int {
        while true {
            if let abandoned = step() { return abandoned }
        }
    }

    /// One step of the policy's, done; once stopped, what `run` returns (nil: not stopped).
    mutating func step() -> Int? {
        publishMetrics()
        look()
        switch policy.next(now: monotonicSeconds()) {
        case .take(let limit, let until): take(limit, until: until)
        case .apply(let size): apply(size)
        case .applyAlone: applyAlone()
        case .pause(let until): _ = broker.feed.pause(until: until)   // woken: a stop, which brings its deadline
        case .reconnect: reconnect()
        case .recordLink(let state): recordLink(state)
        case .rebirth: rebirthEveryOnline()
        case .sweep: runSweep()
        case .settled:
            outage.ended()
            logFigures(force: false)
        case .stop(let abandoned): return stop(abandoned: abandoned)
        }
        return nil
    }

    /// What the policy needs to know of the feed, the broker and the stop, as they are now.
    private mutating func look() {
        let dropped = broker.feed.takeDropped()
        switch policy.overflow(dropped: dropped, queued: broker.feed.count) {
        case .dropping:
            let held = self.held
            overflow.occurred(dropped, ["held": held, "hold_at_most": broker.config.holdAtMost])
        case .ended: overflow.ended()
        case nil: break
        }
        if broker.isStopping { policy.stopRequested() }
        policy.drained = broker.isDrained
        policy.broker(connection: broker.connectionNumber, state: broker.brokerState)
        policy.metricsDue = metrics?.due
    }

    /// Messages held: admitted and not committed, and still in the queue.
    private var held: Int { pending.count + broker.feed.count }

    private mutating func take(_ limit: Int, until deadline: Double?) {
        let items = broker.feed.take(limit: limit, until: deadline)
        let messages = items.map { FeedMessage.decode(topic: $0.topic, payload: $0.payload) }
        metrics?.heard(messages, items, accepts: broker.config.accepts)
        pending = gate.admit(messages)
        pendingReceived = items.map(\.received)
        policy.taken(pending.count)
    }

    /// The first `size` held messages, in one transaction.
    private mutating func apply(_ size: Int) {
        guard let applier else { return policy.connected(false) }
        let before = applier.db.roundTrips
        let outcome: Applier.Outcome
        do { outcome = try applier.apply(Array(pending.prefix(size))) } catch { return failed(error) }
        for key in outcome.rebirth { broker.rebirth(key) }
        let now = monotonicNanoseconds()
        let lags = pendingReceived.prefix(size).map { Double(now - $0) / 1e6 }
        figures.committed(outcome, latencies: lags, roundTrips: applier.db.roundTrips - before)
        metrics?.committed(outcome, lags: lags.map { $0 / 1000 })
        Log.debug("batch committed", ["messages": size, "applied": outcome.applied, "duplicates": outcome.duplicates])
        dropFirst(size)
        policy.applied()
        if !policy.limit.isCut { batchesCut.ended(["batch_size": policy.limit.current]) }
        logFigures(force: false)
    }

    /// The first held message alone: its batch was refused for one message's data.
    private mutating func applyAlone() {
        guard let applier else { return policy.connected(false) }
        do { for key in try applier.apply([pending[0]]).rebirth { broker.rebirth(key) } } catch { return failed(error) }
        dropFirst(1)
        policy.isolated()
    }

    /// Done with the first `count` held messages (applied or skipped).
    private mutating func dropFirst(_ count: Int) {
        pending.removeFirst(count)
        pendingReceived.removeFirst(min(count, pendingReceived.count))
    }

    /// The current step failed: what the policy makes of it, said.
    private mutating func failed(_ failure: ApplyError) {
        let error = failure.error
        switch policy.failed(failure.failure(sessionOK: applier?.db.isOK ?? true), now: monotonicSeconds()) {
        case .cut(let size, let was):
            batchesCut.occurred(1, ["batch_size": size, "was": was, "statement_timeout": statementTimeout(), "error": error])
        case .isolate(let size):
            Log.warn("batch rejected, applying its messages one by one", ["error": error, "messages": size])
        case .skip:
            Log.error("message cannot be applied, skipped", ["error": error])
            dropFirst(1)
        case .collision:
            metrics?.databaseFailed()
            Log.debug("batch retried", ["error": error])   // a deadlock or serialization failure
        case .hold(let verdict):
            hold(failure, verdict)
        }
    }

    /// The database's own failure: what is held stays held, and the same work is tried again after the backoff.
    private mutating func hold(_ failure: ApplyError, _ verdict: BatchPolicy.Hold) {
        let error = failure.error
        switch verdict.explain {
        case .rule:
            if let statement = failure.statement {
                Log.error("a rule of the database refuses the bridge's own write, not a message's data: messages held",
                          ["statement": statement, "table": statement.table, "error": error, "hint": statement.hint])
            }
        case .timeout:
            Log.error("one message alone takes longer than the database's statement_timeout, messages held",
                      ["statement_timeout": statementTimeout(), "error": error, "hint": ApplyError.timeoutHint])
        case nil:
            break
        }
        metrics?.databaseFailed()
        // A privilege refused: said with its fix, and held like any other fault (granted later, nothing is lost).
        let fix = error.sqlState == "42501" ? Grants.fix(role: applier?.db.option("user")) : nil
        if verdict.reconnect { applier = nil }
        if verdict.anotherReason {
            if let fix {
                Log.error("database still unavailable, for another reason", ["error": error, "held": held, "fix": fix])
            } else {
                Log.error("database still unavailable, for another reason", ["error": error, "held": held])
            }
        }
        if let fix { outage.occurred(1, ["error": error, "held": held, "fix": fix]) } else { outage.occurred(1, ["error": error, "held": held]) }
        publishMetrics()   // the error counted now, not after the backoff
    }

    /// The site's statement_timeout, for the line that says a batch was cancelled.
    private func statementTimeout() -> String {
        (try? applier?.db.query("SHOW statement_timeout"))?.first?[0] ?? "-"
    }

    private mutating func reconnect() {
        do {
            let db = try connect()
            let fresh = try Applier(db: db, spotOwners: broker.config.spotOwners)
            logSession(db)
            applier = fresh
            policy.connected()
        } catch {
            failed(ApplyError(error))
        }
    }

    private mutating func recordLink(_ state: String) {
        guard let applier else { return policy.connected(false) }
        do { _ = try applier.db.query(SQL.brokerLink, [broker.clientID, broker.brokers, state]) } catch {
            return failed(ApplyError(error, statement: .brokerLink))
        }
        policy.linkRecorded(state)
    }

    /// After a (re)connection to the broker, or an overflow's end: online devices are asked to republish their states.
    private mutating func rebirthEveryOnline() {
        guard let applier else { return policy.connected(false) }
        let online: PostgresRows
        do { online = try applier.db.query(SQL.onlineDevices) } catch { return failed(ApplyError(error, statement: .onlineDevices)) }
        for row in online.rows { if let site = row[0], let device = row[1] { broker.rebirth(DeviceKey(site: site, device: device)) } }
        policy.rebirthsAsked()
    }

    private mutating func runSweep() {
        guard let applier else { return policy.connected(false) }
        do {
            for key in try sweep.run(applier, gapWait: gapWait, now: monotonicSeconds()) { broker.rebirth(key) }
        } catch {
            return failed(error)
        }
        policy.swept()
    }

    private mutating func stop(abandoned: Bool) -> Int {
        if abandoned {
            Log.error("stopping with messages not committed, the devices' retained states rebuild them",
                      ["held": held, "grace_s": seconds(broker.config.stopGrace)])
            logFigures(force: true)
            publishMetrics(final: true)
            return held
        }
        if policy.recordedLink != nil, let applier {   // (best effort: a database down at the stop leaves "lost" or "connected")
            _ = try? applier.db.query(SQL.brokerLink, [broker.clientID, broker.brokers, "stopped"])
        }
        logFigures(force: true)
        publishMetrics(final: true)
        return 0
    }

    /// The session's server and its network and timeout settings, as libpq and the server use them.
    /// At info the first time and on another server (a multi-host URL's failover), else (each reconnection) at debug.
    private mutating func logSession(_ db: any Database) {
        let idle = (try? db.query("SELECT current_setting('idle_in_transaction_session_timeout')"))?.first?[0]
        let server = db.server
        defer { sessionServer = server }
        if sessionServer != server { Replication.warnIfAsynchronous(db) }
        Log.log(sessionServer == server ? .debug : .info, "database session", [
            "server": server, "target_session_attrs": db.option("target_session_attrs") ?? "-",
            "keepalives_idle_s": db.option("keepalives_idle") ?? "-", "keepalives_interval_s": db.option("keepalives_interval") ?? "-",
            "keepalives_count": db.option("keepalives_count") ?? "-", "tcp_user_timeout_ms": db.option("tcp_user_timeout") ?? "-",
            "idle_in_transaction_session_timeout": idle ?? "-",
        ])
    }

    /// How long a seq jump waits for the missing seqs before the device is asked for a rebirth: 2 s; with a shared
    /// subscription the missing seqs may still be in another bridge's queue, as late as this bridge's own messages are:
    /// twice this bridge's delivery-to-commit latency lately when that is longer, at most 60 s. (fleet-bench.sh at 300
    /// boards: about 600 rebirths a run either way; the other bridge's lag can be 2-3 times this one's.)
    private var gapWait: Double {
        guard broker.config.shareGroup != nil else { return 2 }
        return min(60, max(2, 2 * figures.lateLately))
    }

    /// The metrics file, when it is asked for and its figures changed (the link and the messages held as they are now).
    private mutating func publishMetrics(final: Bool = false) {
        let held = self.held
        metrics?.publish(brokerConnected: broker.brokerState == "connected", held: held,
                         sweepFailures: sweep.failures, final: final)
    }

    /// The figures of the last minute (at least), once there are any: after a commit, and when idle at the minute.
    private mutating func logFigures(force: Bool) {
        let now = monotonicSeconds()
        guard force || policy.figuresDue(now: now), policy.figures.batches > 0 else { return }
        figures.log(batches: policy.figures.batches, elapsed: now - policy.figures.since)
        policy.figuresLogged(now: now)
    }
}

extension ApplyError {
    /// This failure as the policy tells failures apart (`sessionOK`: the session is usable after it).
    func failure(sessionOK: Bool) -> BatchPolicy.Failure {
        let cause: BatchPolicy.Failure.Cause =
            if isCancelled && sessionOK { .cancelled }
            else if statement != nil && error.isDataError { .rule }
            else if isMessageData && sessionOK { .messageData }
            else if error.isTransient { .collision }
            else { .database }
        return BatchPolicy.Failure(cause: cause, kind: error.sqlState ?? error.code.rawValue,
                                   sessionLost: error.isConnectionLoss || error.isReadOnly || !sessionOK,
                                   noConnection: error.code == .connection)
    }
}
