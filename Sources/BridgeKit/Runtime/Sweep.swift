import ParkWiseLog
import Postgres

/// Every `reassert_every` (`BatchPolicy`): devices offline too long leave the free count, detected gaps are checked, holds that ran out
/// expire (the backend's rule), app check-ins whose car never came are released (`no_show_after`), check-ins the API
/// held up are completed, the sensors' view is re-asserted over the backend's writes, and the current slot's snapshot
/// is written for the levels that have data and no row yet (the slot chosen on the database's clock). Each step is a
/// statement of its own (no transaction), and the feed does not wait for any: a step that fails — refused by a rule
/// someone added to its table (a data error), cancelled by the site's statement_timeout, a privilege missing — is said
/// once per streak and tried again at the next sweep, and the other steps still run.
/// Only a lost connection or a read-only server is thrown: the loop's fault (reconnect, hold, backoff).
struct Sweep {
    let config: BridgeConfig
    private var nextSpotRefresh = 0.0
    private var failing: [WholeStatement: LogStreak] = [:]
    /// The database role the steps run as, for the fix of a privilege refused.
    private var role: String?
    /// Steps the database failed since the start (the metrics' database errors).
    private(set) var failures = 0

    init(config: BridgeConfig) { self.config = config }

    /// One sweep (when it is due is `BatchPolicy`'s to say); returns the devices to ask for a rebirth (`gapWait`: seconds
    /// a detected seq jump waits for the missing seqs first; `now`: `monotonicSeconds()`).
    mutating func run(_ applier: Applier, gapWait: Double, now: Double) throws(ApplyError) -> Set<DeviceKey> {
        role = applier.db.option("user")
        if now >= nextSpotRefresh {
            try step(.refreshSpots) { () throws(PostgresError) in try applier.refreshSpots() }
            nextSpotRefresh = now + 60
        }
        let staleAfter = seconds(config.staleAfter)
        let stale = try step(.markStale) { () throws(PostgresError) in try applier.markStale(after: staleAfter) }
        for key in stale ?? [] { Log.warn("device offline too long, its spots leave the free count", ["device": key]) }
        let gaps = try step(.checkGaps) { () throws(PostgresError) in try applier.checkGaps(after: gapWait) } ?? []
        for key in gaps { Log.warn("events missing, reconciling from the device's retained states", ["device": key]) }
        try step(.keepHolds) { () throws(PostgresError) in try applier.keepHoldsWithArrival() }
        let expired = try step(.expireHolds) { () throws(PostgresError) in try applier.expireHolds() } ?? []
        if !expired.isEmpty { Log.info("holds ran out, reservations expired", ["count": expired.count, "spots": listed(expired)]) }
        if let noShowAfter = config.noShowAfter.map(seconds) {
            let released = try step(.releaseNoShows) { () throws(PostgresError) in try applier.releaseNoShows(after: noShowAfter) } ?? []
            if !released.isEmpty {
                Log.warn("checked in from the app but no car came, reservations released (no-show)",
                         ["count": released.count, "spots": listed(released), "no_show_after_s": Int(noShowAfter)])
            }
        }
        let completed = try step(.sweepReservations) { () throws(PostgresError) in try applier.sweepReservations() } ?? 0
        if completed > 0 { Log.info("completed check-ins and check-outs held up by the API", ["reservations": completed]) }
        let fixed = try step(.reassertAll) { () throws(PostgresError) in try applier.reassertAll() } ?? 0
        if fixed > 0 { Log.info("re-asserted sensor state", ["spots": fixed]) }
        let slotLength = max(seconds(config.snapshotEvery).rounded(), 1)
        let written = try step(.snapshot) { () throws(PostgresError) in try applier.snapshot(slotSeconds: slotLength) } ?? 0
        if written > 0 { Log.info("occupancy snapshot written", ["levels": written]) }
        return gaps
    }

    /// One step: its value, or nil when the database's rules refused its write.
    @discardableResult
    private mutating func step<T>(_ statement: WholeStatement, _ body: () throws(PostgresError) -> T) throws(ApplyError) -> T? {
        do {
            let value = try body()
            failing[statement]?.ended(["statement": statement])
            return value
        } catch {
            guard !error.isConnectionLoss && !error.isReadOnly else { throw ApplyError(error, statement: statement) }
            failures += 1
            failing[statement, default: LogStreak(.error, "a step of the sweep failed, tried again at the next sweep (the feed goes on)",
                                                  ended: "the sweep's step works again")]
                .occurred(1, ["statement": statement, "table": statement.table, "error": error,
                            "hint": error.sqlState == "42501" ? Grants.fix(role: role) : statement.hint(for: error)])
            return nil
        }
    }
}

/// At most five ids, for a log line.
private func listed(_ ids: [String]) -> String {
    ids.prefix(5).joined(separator: ",") + (ids.count > 5 ? ",…" : "")
}

func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}
