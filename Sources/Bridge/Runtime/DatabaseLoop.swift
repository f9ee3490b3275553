import ParkWiseLog
import Postgres
import Uplink
#if canImport(Glibc)
import Glibc
#endif

/// The database thread's work: batches in, one transaction each; periodic sweeps (stale devices,
/// re-assert over the backend's writes, snapshots). Runs until stopped and drained.
///
/// A message whose data the server refuses (SQLSTATE class 22 or 23) is the only thing ever skipped.
/// Any other failure is the database's (connection lost, read-only after a failover, disk full, a
/// timeout, a privilege revoked…): the batch is kept and retried after a wait that doubles from 1 s
/// to 30 s, on a new connection when the old one is gone or read-only. Retrying is safe: a failed
/// transaction left nothing, and every write is idempotent or ordered by the device's seq.
struct DatabaseLoop {
    let runtime: BridgeRuntime
    var applier: Applier?
    var gate: DeviceGate
    /// Admitted messages not yet committed; kept across failures.
    private var pending: [FeedMessage] = []
    private var pendingReceived: [Int64] = []
    private var outage = LogStreak(.error, "database unavailable, holding received messages", ended: "database available again")
    private var overflow = LogStreak(.error, "too many messages held, new events and states dropped (rebuilt by a rebirth)",
                                     ended: "messages no longer dropped, every online device asked for a rebirth")
    /// The current outage's SQLSTATE (or error code): a change is worth a line of its own.
    private var outageKind = ""
    private var sessionLogged = false
    private var attempt = 0
    /// Deadlocks and serialization failures in a row (retried at once a few times).
    private var collisions = 0
    /// When a stop stops waiting for the database (set when the stop is seen).
    private var stopDeadline: Double?
    private var nextSweep = 0.0
    private var nextSpotRefresh = 0.0
    private var lastSlot: Int64 = -1
    private var seenConnection: UInt64 = 0
    /// Every online device is to be asked for a rebirth at the next sweep: after a new broker connection, or at the
    /// end of an overflow that dropped their states.
    private var rebirthEveryOnline = false
    private var stats = (applied: 0, duplicates: 0, batches: 0, since: monotonicSeconds())
    private var latencies: [Double] = []

    init(runtime: BridgeRuntime, db: PostgresConnection, gate: DeviceGate) {
        self.runtime = runtime
        self.gate = gate
        logSession(db)
        applier = try? Applier(db: db)
    }

    /// Runs until stopped; returns how many received messages a database fault kept from being
    /// committed before the stop's grace ran out (0 after a clean drain).
    mutating func run() -> Int {
        while true {
            let dropped = runtime.feed.takeDropped()
            if dropped > 0 {
                overflow.occurred(dropped, ["held": pending.count + runtime.feed.count, "hold_at_most": runtime.config.holdAtMost])
            } else if overflow.total > 0 && runtime.feed.count < runtime.config.holdAtMost / 2 {
                overflow.ended()
                rebirthEveryOnline = true   // their states come back
            }
            if pending.isEmpty {
                if runtime.isStopping && runtime.isDrained { break }
                let items = runtime.feed.take(limit: runtime.config.batchSize, timeoutMs: 200)
                pending = gate.admit(items.map { FeedMessage.decode(topic: $0.topic, payload: $0.payload) })
                pendingReceived = items.map(\.received)
            }
            if graceOver() {
                let held = pending.count + runtime.feed.count
                Log.error("stopping with messages not committed, the devices' retained states rebuild them",
                          ["held": held, "grace_s": seconds(runtime.config.stopGrace)])
                logStats(force: true)
                return held
            }
            guard let applier = connected() else { continue }
            do {
                if !pending.isEmpty { try commit(applier) }
                try periodic(applier)
                attempt = 0
                collisions = 0
                outage.ended()
            } catch {
                failed(applier, error)
            }
        }
        logStats(force: true)
        return 0
    }

    private mutating func commit(_ applier: Applier) throws(PostgresError) {
        let outcome = try applier.apply(pending)
        for key in outcome.rebirth { runtime.rebirth(key) }
        let now = monotonicNanoseconds()
        latencies += pendingReceived.map { Double(now - $0) / 1e6 }
        stats.applied += outcome.applied
        stats.duplicates += outcome.duplicates
        stats.batches += 1
        Log.debug("batch committed", ["messages": pending.count, "applied": outcome.applied, "duplicates": outcome.duplicates])
        pending = []
        pendingReceived = []
        logStats(force: false)
    }

    private mutating func failed(_ applier: Applier, _ error: PostgresError) {
        guard error.isDataError && applier.db.isOK else { return fault(error) }
        if pending.isEmpty {
            Log.warn("sweep failed, tried again at the next one", ["error": error])   // nothing held
        } else if pending.count > 1 {
            isolate(applier, error)   // one message's data: apply one at a time to keep the rest
        } else {
            Log.error("message cannot be applied, skipped", ["error": error])
            pending = []
            pendingReceived = []
        }
    }

    /// The database's own failure: what is held stays held, and the same work is tried again later.
    private mutating func fault(_ error: PostgresError) {
        if error.isTransient && collisions < 5 {
            collisions += 1
            Log.debug("batch retried", ["error": error])   // a deadlock or serialization failure
            sleepThread(microseconds: UInt32.random(in: 10_000...100_000))
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
        backoff()
    }

    private mutating func isolate(_ applier: Applier, _ error: PostgresError) {
        Log.warn("batch rejected, applying its messages one by one", ["error": error, "messages": pending.count])
        for (i, message) in pending.enumerated() {
            do { for key in try applier.apply([message]).rebirth { runtime.rebirth(key) } } catch {
                guard error.isDataError && applier.db.isOK else {
                    pending = Array(pending[i...])
                    pendingReceived = Array(pendingReceived.suffix(pending.count))
                    return fault(error)
                }
                Log.error("message cannot be applied, skipped", ["error": error])
            }
        }
        pending = []
        pendingReceived = []
    }

    private mutating func connected() -> Applier? {
        if let applier { return applier }
        do {
            let db = try PostgresConnection.connect(url: runtime.databaseURL)
            let fresh = try Applier(db: db)
            logSession(db)
            applier = fresh
            return fresh
        } catch {
            fault(error)
            return nil
        }
    }

    /// Waits 1, 2, 4 … 30 s (less a random part, so that bridges do not retry in step); a stop
    /// waits at most until its grace is over.
    private mutating func backoff() {
        attempt += 1
        let delay = min(30.0, Double(1 << min(attempt - 1, 5))) * Double.random(in: 0.5...1.0)
        let until = monotonicSeconds() + delay
        while monotonicSeconds() < until && !graceOver() { sleepThread(microseconds: 20_000) }
    }

    /// A stop was asked for `stop_grace` ago while the database is failing.
    private mutating func graceOver() -> Bool {
        guard runtime.isStopping else { return false }
        let now = monotonicSeconds()
        if stopDeadline == nil { stopDeadline = now + seconds(runtime.config.stopGrace) }
        return outage.total > 0 && now >= stopDeadline!
    }

    /// The session's network and timeout settings, as libpq and the server use them.
    /// Once at info, then (each reconnection) at debug.
    private mutating func logSession(_ db: PostgresConnection) {
        let idle = (try? db.query("SELECT current_setting('idle_in_transaction_session_timeout')"))?.first?[0]
        defer { sessionLogged = true }
        Log.log(sessionLogged ? .debug : .info, "database session", [
            "keepalives_idle_s": db.option("keepalives_idle") ?? "-", "keepalives_interval_s": db.option("keepalives_interval") ?? "-",
            "keepalives_count": db.option("keepalives_count") ?? "-", "tcp_user_timeout_ms": db.option("tcp_user_timeout") ?? "-",
            "idle_in_transaction_session_timeout": idle ?? "-",
        ])
    }

    /// Every `reassert_every`: devices offline too long leave the free count, the sensors' view is
    /// re-asserted over the backend's writes, the slot's snapshot is written; after a (re)connection
    /// to the broker, online devices are asked to republish their states.
    private mutating func periodic(_ applier: Applier) throws(PostgresError) {
        let number = runtime.connectionNumber
        guard number > 0 else { return }   // nothing is written before the bridge has started
        if number != seenConnection {
            seenConnection = number
            rebirthEveryOnline = true
        }
        if rebirthEveryOnline {
            let online = try applier.db.query(SQL.onlineDevices).rows
            for row in online { if let site = row[0], let device = row[1] { runtime.rebirth(DeviceKey(site: site, device: device)) } }
            rebirthEveryOnline = false   // only now: a failed query tries again (a rebirth is the only way to the retained states)
        }
        let now = monotonicSeconds()
        guard now >= nextSweep else { return }
        nextSweep = now + Double(runtime.config.reassertEvery.components.seconds)
            + Double(runtime.config.reassertEvery.components.attoseconds) / 1e18
        if now >= nextSpotRefresh {
            try applier.refreshSpots()
            nextSpotRefresh = now + 60
        }
        let stale = try applier.markStale(after: seconds(runtime.config.staleAfter))
        for key in stale { Log.warn("device offline too long, its spots leave the free count", ["device": key]) }
        for key in try applier.checkGaps(after: 2) {
            Log.warn("events missing, reconciling from the device's retained states", ["device": key])
            runtime.rebirth(key)
        }
        let completed = try applier.sweepReservations()
        if completed > 0 { Log.info("completed check-ins and check-outs held up by the API", ["reservations": completed]) }
        let fixed = try applier.reassertAll()
        if fixed > 0 { Log.info("re-asserted sensor state", ["spots": fixed]) }
        let slotLength = Int64(seconds(runtime.config.snapshotEvery))
        let slot = Int64(time(nil)) / max(slotLength, 1)
        if slot != lastSlot {
            let written = try applier.snapshot(slotSeconds: Double(slotLength))
            lastSlot = slot
            if written > 0 { Log.info("occupancy snapshot written", ["levels": written]) }
        }
    }

    private mutating func logStats(force: Bool) {
        let elapsed = monotonicSeconds() - stats.since
        guard force || elapsed >= 60, stats.batches > 0 else { return }
        latencies.sort()
        let p50 = latencies.isEmpty ? 0 : latencies[latencies.count / 2]
        let p99 = latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        Log.info("applied", ["messages": stats.applied, "duplicates": stats.duplicates, "batches": stats.batches,
                             "per_s": Int(Double(stats.applied) / max(elapsed, 0.001)),
                             "latency_p50_ms": rounded(p50), "latency_p99_ms": rounded(p99)])
        stats = (0, 0, 0, monotonicSeconds())
        latencies.removeAll(keepingCapacity: true)
    }
}

private func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

private func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }
