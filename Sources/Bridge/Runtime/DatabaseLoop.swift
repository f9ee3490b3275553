import ParkWiseLog
import Postgres
import Uplink
#if canImport(Glibc)
import Glibc
#endif

/// The database thread's work: batches in, one transaction each; periodic sweeps (stale devices,
/// re-assert over the backend's writes, snapshots). Runs until stopped and drained.
struct DatabaseLoop {
    let runtime: BridgeRuntime
    var applier: Applier?
    var gate: DeviceGate
    /// Admitted messages not yet committed; kept across failures.
    private var pending: [FeedMessage] = []
    private var pendingReceived: [Int64] = []
    private var attempt = 0
    private var nextSweep = 0.0
    private var nextSpotRefresh = 0.0
    private var lastSlot: Int64 = -1
    private var seenConnection: UInt64 = 0
    private var stats = (applied: 0, duplicates: 0, batches: 0, since: monotonicSeconds())
    private var latencies: [Double] = []

    init(runtime: BridgeRuntime, db: PostgresConnection, gate: DeviceGate) {
        self.runtime = runtime
        self.gate = gate
        applier = try? Applier(db: db)
    }

    mutating func run() {
        while true {
            if pending.isEmpty {
                if runtime.isStopping && runtime.isDrained { break }
                let items = runtime.feed.take(limit: runtime.config.batchSize, timeoutMs: 200)
                pending = gate.admit(items.map { FeedMessage.decode(topic: $0.topic, payload: $0.payload) })
                pendingReceived = items.map(\.received)
            }
            guard let applier = connected() else {
                backoff()
                continue
            }
            do {
                if !pending.isEmpty { try commit(applier) }
                try periodic(applier)
                attempt = 0
                runtime.problem(nil)
            } catch {
                if error.isConnectionLoss || !applier.db.isOK {
                    self.applier = nil
                    runtime.problem(error.description)
                } else if error.isTransient {
                    Log.debug("batch retried", ["error": error])   // a deadlock or serialization failure
                } else if pending.count > 1 {
                    // A statement the server rejects: apply one at a time to keep the rest.
                    isolate(applier, error)
                } else {
                    Log.error("message cannot be applied, skipped", ["error": error])
                    pending = []
                }
            }
        }
        logStats(force: true)
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

    private mutating func isolate(_ applier: Applier, _ error: PostgresError) {
        Log.warn("batch rejected, applying its messages one by one", ["error": error, "messages": pending.count])
        var rest: [FeedMessage] = []
        for (i, message) in pending.enumerated() {
            do { _ = try applier.apply([message]) } catch {
                if error.isConnectionLoss || !applier.db.isOK {
                    rest = Array(pending[i...])
                    self.applier = nil
                    runtime.problem(error.description)
                    break
                }
                Log.error("message cannot be applied, skipped", ["error": error])
            }
        }
        pending = rest
        pendingReceived = Array(pendingReceived.suffix(rest.count))
    }

    private mutating func connected() -> Applier? {
        if let applier { return applier }
        do {
            let db = try PostgresConnection.connect(url: runtime.databaseURL)
            let fresh = try Applier(db: db)
            applier = fresh
            return fresh
        } catch {
            runtime.problem(error.description)
            return nil
        }
    }

    private mutating func backoff() {
        attempt += 1
        let delay = min(10.0, 0.2 * Double(1 << min(attempt, 6))) * Double.random(in: 0.5...1.0)
        let until = monotonicSeconds() + delay
        while monotonicSeconds() < until { sleepThread(microseconds: 20_000) }
    }

    /// Every `reassert_every`: devices offline too long leave the free count, the sensors' view is
    /// re-asserted over the backend's writes, the slot's snapshot is written; after a (re)connection
    /// to the broker, online devices are asked to republish their states.
    private mutating func periodic(_ applier: Applier) throws(PostgresError) {
        let number = runtime.connectionNumber
        guard number > 0 else { return }   // nothing is written before the bridge has started
        if number != seenConnection {
            seenConnection = number
            let online = try applier.db.query(SQL.onlineDevices).rows
            for row in online { if let site = row[0], let device = row[1] { runtime.rebirth(DeviceKey(site: site, device: device)) } }
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
        let fixed = try applier.reassert(all: true)
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
