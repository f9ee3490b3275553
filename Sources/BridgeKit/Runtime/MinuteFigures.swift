import ParkWiseLog

/// The bridge's figures of the last minute (at least), logged as one `applied` line: messages applied, duplicates,
/// batches, rate, delivery-to-commit latency (p50, p99) and the round trips a batch waited for. Pure: no clock.
struct MinuteFigures {
    private var applied = 0
    private var duplicates = 0
    private var roundTrips = 0
    /// Each committed message's delivery to commit, in milliseconds.
    private var latencies: [Double] = []
    /// Delivery to commit lately, in seconds: the last minute's p99, and the longest of this minute so far.
    private var lateness = (lastMinute: 0.0, thisMinute: 0.0)

    /// A batch committed: its outcome, its messages' delivery to commit (ms) and the round trips it took.
    mutating func committed(_ outcome: Applier.Outcome, latencies batch: [Double], roundTrips: Int) {
        latencies += batch
        lateness.thisMinute = max(lateness.thisMinute, (batch.max() ?? 0) / 1000)
        applied += outcome.applied
        duplicates += outcome.duplicates
        self.roundTrips += roundTrips
    }

    /// Delivery to commit lately (seconds): the longer of the last minute's p99 and this minute's longest.
    var lateLately: Double { max(lateness.lastMinute, lateness.thisMinute) }

    /// Logs the figures of `batches` batches over `elapsed` seconds and starts the next minute's.
    mutating func log(batches: Int, elapsed: Double) {
        latencies.sort()
        let p50 = latencies.isEmpty ? 0 : latencies[latencies.count / 2]
        let p99 = latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        Log.info("applied", ["messages": applied, "duplicates": duplicates, "batches": batches,
                             "per_s": Int(Double(applied) / max(elapsed, 0.001)),
                             "latency_p50_ms": rounded(p50), "latency_p99_ms": rounded(p99),
                             "round_trips_per_batch": rounded(Double(roundTrips) / Double(max(batches, 1)))])
        lateness = (lastMinute: p99 / 1000, thisMinute: 0)
        applied = 0
        duplicates = 0
        roundTrips = 0
        latencies.removeAll(keepingCapacity: true)
    }
}

private func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }
