import ParkWiseLog
import Postgres
#if canImport(Glibc)
import Glibc
#endif

/// The database thread's work: batches in, one transaction each; periodic sweeps (stale devices,
/// re-assert over the backend's writes, snapshots). Runs until stopped and drained.
///
/// A message whose data the server refuses (SQLSTATE class 22, 23, 21, 54) is the only thing ever skipped.
/// Any other failure is the database's (connection lost, read-only after a failover, disk full, a
/// timeout, a privilege revoked…): the batch is kept and retried after a wait that doubles from 1 s
/// to 30 s (5 s while no server takes a new connection), on a new connection when the old one is gone or
/// read-only. Retrying is safe: a failed transaction left nothing, and every write is idempotent or ordered by the
/// device's seq (a batch whose COMMIT was done but whose reply was lost is found done: FailoverTests).
/// So is a data error raised by a statement of the whole batch (`WholeStatement`: a rule someone added to a table
/// the bridge writes), and a batch cancelled by the site's `statement_timeout` is cut in half first (`BatchLimit`).
///
/// It never polls: every wait (for messages, a backoff, a deadlock's retry) is on the feed queue's condition, until a
/// message, a wake-up (a stop, a broker connection) or its next real deadline (the sweep, the backoff's end, the
/// stop's grace, the minute's figures, a metrics change held back by its interval). Idle, it wakes once per
/// `reassert_every`.
struct DatabaseLoop {
    let runtime: BridgeRuntime
    var applier: Applier?
    var gate: DeviceGate
    /// Admitted messages not yet committed; kept across failures.
    private var pending: [FeedMessage] = []
    private var pendingReceived: [Int64] = []
    private var outage = LogStreak(.error, "database unavailable, holding received messages", ended: "database available again")
    /// What the current outage's cause was explained as (a line of its own, once per outage and cause).
    private var explained: String?
    private var limit: BatchLimit
    private var batchesCut = LogStreak(.warn, "batches cut: the database's statement_timeout cancels bigger ones",
                                       ended: "batches back to full size")
    private var overflow = LogStreak(.error, "too many messages held, new events and states dropped (rebuilt by a rebirth)",
                                     ended: "messages no longer dropped, every online device asked for a rebirth")
    /// The current outage's SQLSTATE (or error code): a change is worth a line of its own.
    private var outageKind = ""
    /// The server (`host:port`) of the last session: another one after a reconnection is a failover, said at info.
    private var sessionServer: String?
    private var attempt = 0
    /// Deadlocks and serialization failures in a row (retried at once a few times).
    private var collisions = 0
    /// When a stop stops waiting for the database (set when the stop is seen).
    private var stopDeadline: Double?
    private var sweep: Sweep
    private var seenConnection: UInt64 = 0
    /// The broker link's state last written to `sensor_bridges`.
    private var recordedLink: String?
    /// Every online device is to be asked for a rebirth at the next sweep: after a new broker connection, or at the
    /// end of an overflow that dropped their states.
    private var rebirthEveryOnline = false
    private var stats = (applied: 0, duplicates: 0, batches: 0, roundTrips: 0, since: monotonicSeconds())
    private var latencies: [Double] = []
    /// Delivery to commit lately, in seconds: the last minute's p99, and the longest of this minute so far.
    private var lateness = (lastMinute: 0.0, thisMinute: 0.0)
    /// The figures for node-exporter (`metrics_file`; nil: not asked for).
    private var metrics: MetricsFile?

    init(runtime: BridgeRuntime, db: PostgresConnection, gate: DeviceGate) {
        self.runtime = runtime
        self.gate = gate
        limit = BatchLimit(full: runtime.config.batchSize)
        sweep = Sweep(config: runtime.config)
        metrics = runtime.config.metricsFile.map(MetricsFile.init)
        logSession(db)
        applier = try? Applier(db: db, spotOwners: runtime.config.spotOwners)
    }

    /// Runs until stopped; returns how many received messages a database fault kept from being
    /// committed before the stop's grace ran out (0 after a clean drain).
    mutating func run() -> Int {
        while true {
            publishMetrics()
            let dropped = runtime.feed.takeDropped()
            if dropped > 0 {
                overflow.occurred(dropped, ["held": pending.count + runtime.feed.count, "hold_at_most": runtime.config.holdAtMost])
            } else if overflow.total > 0 && runtime.feed.count < runtime.config.holdAtMost / 2 {
                overflow.ended()
                rebirthEveryOnline = true   // their states come back
            }
            if pending.isEmpty {
                if runtime.isStopping && runtime.isDrained { break }
                let items = runtime.feed.take(limit: limit.current, until: idleDeadline())
                let messages = items.map { FeedMessage.decode(topic: $0.topic, payload: $0.payload) }
                metrics?.heard(messages, items, accepts: runtime.config.accepts)
                pending = gate.admit(messages)
                pendingReceived = items.map(\.received)
            }
            if graceOver() {
                let held = pending.count + runtime.feed.count
                Log.error("stopping with messages not committed, the devices' retained states rebuild them",
                          ["held": held, "grace_s": seconds(runtime.config.stopGrace)])
                logStats(force: true)
                publishMetrics(final: true)
                return held
            }
            guard let applier = connected() else { continue }
            let size = min(pending.count, limit.current)
            do {
                if size > 0 { try commit(applier, size) }
            } catch {
                failed(applier, error, size: size)
                continue
            }
            do {
                try periodic(applier)
                attempt = 0
                collisions = 0
                outage.ended()
                explained = nil
                logStats(force: false)
            } catch {
                failed(applier, error, size: 0)
            }
        }
        if recordedLink != nil, let applier {   // (best effort: a database down at the stop leaves "lost" or "connected")
            _ = try? applier.db.query(SQL.brokerLink, [runtime.clientID, runtime.brokers, "stopped"])
        }
        logStats(force: true)
        publishMetrics(final: true)
        return 0
    }

    /// The first `size` held messages, in one transaction.
    private mutating func commit(_ applier: Applier, _ size: Int) throws(ApplyError) {
        let before = applier.db.roundTrips
        let outcome = try applier.apply(Array(pending.prefix(size)))
        stats.roundTrips += applier.db.roundTrips - before
        for key in outcome.rebirth { runtime.rebirth(key) }
        let now = monotonicNanoseconds()
        let batch = pendingReceived.prefix(size).map { Double(now - $0) / 1e6 }
        latencies += batch
        lateness.thisMinute = max(lateness.thisMinute, (batch.max() ?? 0) / 1000)
        stats.applied += outcome.applied
        stats.duplicates += outcome.duplicates
        stats.batches += 1
        metrics?.committed(outcome, lags: batch.map { $0 / 1000 })
        Log.debug("batch committed", ["messages": size, "applied": outcome.applied, "duplicates": outcome.duplicates])
        dropFirst(size)
        limit.committed(size: size)
        if !limit.isCut { batchesCut.ended(["batch_size": limit.current]) }
        logStats(force: false)
    }

    /// Done with the first `count` held messages (applied or skipped). (`pendingReceived` may be shorter: the gate
    /// drops some and releases messages it held for a status.)
    private mutating func dropFirst(_ count: Int) {
        pending.removeFirst(count)
        pendingReceived.removeFirst(min(count, pendingReceived.count))
    }

    /// A failure of the batch of the first `size` held messages (0: of the sweep).
    private mutating func failed(_ applier: Applier, _ failure: ApplyError, size: Int) {
        let error = failure.error
        if failure.isCancelled && size > 0 && applier.db.isOK {
            return cancelled(applier, error, size: size)
        }
        if let statement = failure.statement, error.isDataError {
            explain("refused " + statement.rawValue, "a rule of the database refuses the bridge's own write, not a message's data: messages held",
                    ["statement": statement, "table": statement.table, "error": error, "hint": statement.hint])
            return fault(error)
        }
        guard failure.isMessageData && applier.db.isOK && size > 0 else { return fault(error) }
        if size > 1 {
            isolate(applier, error, size: size)   // one message's data: apply one at a time to keep the rest
        } else {
            Log.error("message cannot be applied, skipped", ["error": error])
            dropFirst(1)
        }
    }

    /// The site's `statement_timeout` (or an operator) cancelled the batch: half of it is tried at once; one
    /// message alone cancelled is held like any fault, and said so.
    private mutating func cancelled(_ applier: Applier, _ error: PostgresError, size: Int) {
        let timeout = (try? applier.db.query("SHOW statement_timeout"))?.first?[0] ?? "-"
        if limit.cancelled(size: size) {
            batchesCut.occurred(1, ["batch_size": limit.current, "was": size, "statement_timeout": timeout, "error": error])
            return
        }
        explain("timeout", "one message alone takes longer than the database's statement_timeout, messages held",
                ["statement_timeout": timeout, "error": error, "hint": ApplyError.timeoutHint])
        fault(error)
    }

    /// What the outage comes from, when it is more than the error says: one line per outage and cause.
    private mutating func explain(_ cause: String, _ message: StaticString,
                                  _ fields: KeyValuePairs<String, any CustomStringConvertible>) {
        guard explained != cause else { return }
        explained = cause
        Log.error(message, fields)
    }

    /// The database's own failure: what is held stays held, and the same work is tried again later.
    /// `connecting`: no server would take the connection (down, or none writable yet during a failover).
    private mutating func fault(_ error: PostgresError, connecting: Bool = false) {
        metrics?.databaseFailed()
        if error.isTransient && collisions < 5 {
            collisions += 1
            Log.debug("batch retried", ["error": error])   // a deadlock or serialization failure
            _ = runtime.feed.pause(until: monotonicSeconds() + Double.random(in: 0.01...0.1))
            return
        }
        // A privilege refused: said with its fix, and held like any other fault (granted later, nothing is lost).
        let fix = error.sqlState == "42501" ? Grants.fix(role: applier?.db.option("user")) : nil
        if error.isConnectionLoss || error.isReadOnly || applier?.db.isOK == false { applier = nil }
        let held = pending.count + runtime.feed.count
        let kind = error.sqlState ?? error.code.rawValue
        if outage.total > 0 && kind != outageKind {
            if let fix {
                Log.error("database still unavailable, for another reason", ["error": error, "held": held, "fix": fix])
            } else {
                Log.error("database still unavailable, for another reason", ["error": error, "held": held])
            }
        }
        outageKind = kind
        if let fix { outage.occurred(1, ["error": error, "held": held, "fix": fix]) } else { outage.occurred(1, ["error": error, "held": held]) }
        publishMetrics()   // the error counted now, not after the backoff
        backoff(cap: connecting ? 5 : 30)
    }

    /// Applies the first `size` held messages one at a time: only the one whose own data is refused is skipped.
    private mutating func isolate(_ applier: Applier, _ error: PostgresError, size: Int) {
        Log.warn("batch rejected, applying its messages one by one", ["error": error, "messages": size])
        for i in 0..<size {
            do { for key in try applier.apply([pending[i]]).rebirth { runtime.rebirth(key) } } catch {
                guard error.isMessageData && applier.db.isOK else {
                    dropFirst(i)   // applied or skipped
                    return failed(applier, error, size: 1)
                }
                Log.error("message cannot be applied, skipped", ["error": error])
            }
        }
        dropFirst(size)
    }

    private mutating func connected() -> Applier? {
        if let applier { return applier }
        do {
            let db = try PostgresConnection.connect(url: runtime.databaseURL)
            let fresh = try Applier(db: db, spotOwners: runtime.config.spotOwners)
            logSession(db)
            applier = fresh
            return fresh
        } catch {
            fault(error, connecting: error.code == .connection)
            return nil
        }
    }

    /// Waits 1, 2, 4 … `cap` s (less a random part, so that bridges do not retry in step); a stop
    /// waits at most until its grace is over. Messages coming in do not end it; a stop asked meanwhile shortens it.
    /// A new connection is tried at least every 5 s: it costs the servers next to nothing, and after a failover the
    /// promoted standby is found within 5 s of its promotion, not up to 30 s later (measured: promoted 12 s after the
    /// crash, first batch 26.7 s after it with 30 s). A failing statement on a live connection waits up to 30 s.
    private mutating func backoff(cap: Double) {
        attempt += 1
        let delay = min(cap, Double(1 << min(attempt - 1, 5))) * Double.random(in: 0.5...1.0)
        let until = monotonicSeconds() + delay
        while !graceOver() {
            let end = min(until, stopDeadline ?? .infinity)
            guard monotonicSeconds() < end else { return }
            _ = runtime.feed.pause(until: end)   // woken: a stop, which brings its deadline
        }
    }

    /// How long an empty queue is waited for: not at all when there is work to do now (the database failing: the
    /// backoff was the wait; a new broker connection or an overflow's end to answer with rebirths); otherwise until
    /// a message comes, a wake-up (a stop, a broker connection) or the next of the loop's own deadlines: the sweep
    /// (`reassert_every`, once the bridge has started) and the minute's figures (when there are any).
    private func idleDeadline() -> Double? {
        let number = runtime.connectionNumber
        if applier == nil || outage.total > 0 || rebirthEveryOnline || number != seenConnection { return monotonicSeconds() }
        var deadline: Double?
        if number > 0 { deadline = sweep.due }
        if stats.batches > 0 { deadline = min(deadline ?? .infinity, stats.since + 60) }
        if let due = metrics?.due { deadline = min(deadline ?? .infinity, due) }
        return deadline
    }

    /// A stop was asked for `stop_grace` ago while the database is failing.
    private mutating func graceOver() -> Bool {
        guard runtime.isStopping else { return false }
        let now = monotonicSeconds()
        if stopDeadline == nil { stopDeadline = now + seconds(runtime.config.stopGrace) }
        return outage.total > 0 && now >= stopDeadline!
    }

    /// The session's server and its network and timeout settings, as libpq and the server use them.
    /// At info the first time and on another server (a multi-host URL's failover), else (each reconnection) at debug.
    private mutating func logSession(_ db: PostgresConnection) {
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

    /// After a (re)connection to the broker, online devices are asked to republish their states; then the sweep,
    /// when due.
    private mutating func periodic(_ applier: Applier) throws(ApplyError) {
        let number = runtime.connectionNumber
        guard number > 0 else { return }   // nothing is written before the bridge has started
        if number != seenConnection {
            seenConnection = number
            rebirthEveryOnline = true
        }
        let link = runtime.brokerState
        if link != recordedLink {
            do { _ = try applier.db.query(SQL.brokerLink, [runtime.clientID, runtime.brokers, link]) } catch {
                throw ApplyError(error, statement: .brokerLink)
            }
            recordedLink = link
        }
        if rebirthEveryOnline {
            let online: PostgresRows
            do { online = try applier.db.query(SQL.onlineDevices) } catch { throw ApplyError(error, statement: .onlineDevices) }
            for row in online.rows { if let site = row[0], let device = row[1] { runtime.rebirth(DeviceKey(site: site, device: device)) } }
            rebirthEveryOnline = false   // only now: a failed query tries again (a rebirth is the only way to the retained states)
        }
        for key in try sweep.run(applier, gapWait: gapWait) { runtime.rebirth(key) }
    }

    /// How long a seq jump waits for the missing seqs before the device is asked for a rebirth: 2 s; with a shared
    /// subscription the missing seqs may still be in another bridge's queue, as late as this bridge's own messages are:
    /// twice this bridge's delivery-to-commit latency lately when that is longer, at most 60 s. (fleet-bench.sh at 300
    /// boards: about 600 rebirths a run either way; the other bridge's lag can be 2-3 times this one's.)
    private var gapWait: Double {
        guard runtime.config.shareGroup != nil else { return 2 }
        return min(60, max(2, 2 * max(lateness.lastMinute, lateness.thisMinute)))
    }

    /// The metrics file, when it is asked for and its figures changed (the link and the messages held as they are now).
    private mutating func publishMetrics(final: Bool = false) {
        metrics?.publish(brokerConnected: runtime.brokerState == "connected", held: pending.count + runtime.feed.count,
                         sweepFailures: sweep.failures, final: final)
    }

    /// The figures of the last minute (at least), once there are any: after a commit, and when idle at the minute.
    private mutating func logStats(force: Bool) {
        let elapsed = monotonicSeconds() - stats.since
        guard force || elapsed >= 60, stats.batches > 0 else { return }
        latencies.sort()
        let p50 = latencies.isEmpty ? 0 : latencies[latencies.count / 2]
        let p99 = latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        Log.info("applied", ["messages": stats.applied, "duplicates": stats.duplicates, "batches": stats.batches,
                             "per_s": Int(Double(stats.applied) / max(elapsed, 0.001)),
                             "latency_p50_ms": rounded(p50), "latency_p99_ms": rounded(p99),
                             "round_trips_per_batch": rounded(Double(stats.roundTrips) / Double(stats.batches))])
        lateness = (lastMinute: p99 / 1000, thisMinute: 0)
        stats = (0, 0, 0, 0, monotonicSeconds())
        latencies.removeAll(keepingCapacity: true)
    }
}

private func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }
