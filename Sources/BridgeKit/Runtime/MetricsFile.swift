import Metrics
import ParkWiseLog
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// The bridge's figures in node-exporter's textfile directory (`metrics_file`), kept by the database thread: noted as
/// messages come and batches commit, and the file replaced whole (temp file, fsync, rename: node-exporter never reads
/// half of it) when they changed, at most once a second. An idle bridge changes nothing and writes nothing. Mode 0644
/// whatever the unit's UMask=0077: node-exporter reads it as its own user.
struct MetricsFile {
    let path: String
    private(set) var figures = BridgeFigures()
    private var pace = TextfilePace<BridgeFigures>(every: 1, retry: 30)
    private var failing = LogStreak(.warn, "cannot write the metrics file, tried again every 30 s while the figures change",
                                    ended: "metrics file written again")
    /// When a change held back by the interval is to be written (`monotonicSeconds()`; nil: nothing waits).
    private(set) var due: Double?

    init(path: String) { self.path = path }

    /// What the messages taken off the queue say of their devices (those the config accepts): a status its state
    /// and outbox, any message of its own (not the broker's retained copy) that it was heard from.
    mutating func heard(_ messages: [FeedMessage], _ items: [FeedQueue.Item], accepts: (DeviceKey) -> Bool) {
        let nowWall = wallSeconds(), nowMono = monotonicNanoseconds()
        for (message, item) in zip(messages, items) {
            guard let key = message.device, accepts(key) else { continue }
            if case .register = message { continue }   // the broker host's word, not the device's
            figures.device(site: key.site, device: key.device) { device in
                if case .status(_, let status) = message {
                    device.online = status.state == "online"
                    if let depth = status.outboxDepth { device.outboxEvents = depth }
                }
                if !item.retained { device.lastSeen = nowWall - (nowMono - item.received) / 1_000_000_000 }
            }
        }
    }

    /// A batch committed: its counts, and each message's lag from receipt to now.
    mutating func committed(_ outcome: Applier.Outcome, lags: [Double]) {
        figures.messagesApplied += outcome.applied
        figures.eventsApplied += outcome.events
        figures.duplicates += outcome.duplicates
        for seconds in lags { figures.lag.observe(seconds) }
    }

    /// The loop's own database faults (a batch, a connection); the sweep counts its steps'.
    private var faults = 0

    mutating func databaseFailed() { faults += 1 }

    /// Writes the figures when they changed (with the broker link, the messages held and the sweep's failed steps as
    /// they are now), or says when (`due`). `final`: the bridge stops, the change is written at once.
    mutating func publish(brokerConnected: Bool, held: Int, sweepFailures: Int, final: Bool = false) {
        figures.brokerConnected = brokerConnected
        figures.held = held
        figures.databaseErrors = faults + sweepFailures
        let now = monotonicSeconds()
        switch pace.decide(figures, now: now, final: final) {
        case .nothing: due = nil
        case .wait(let until): due = until
        case .writeNow:
            due = nil
            if let failure = DurableFile.replace(path: path, with: Array(figures.text.utf8), mode: 0o644) {
                pace.failed(at: now)
                due = final ? nil : now + pace.retry
                failing.occurred(1, ["file": path, "error": failure.message, "errno": failure.errno?.rawValue ?? 0])
            } else {
                pace.wrote(figures, at: now)
                failing.ended(["file": path])
            }
        }
    }
}

/// Unix seconds now (CLOCK_REALTIME): the only wall time the figures carry.
private func wallSeconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec)
}
