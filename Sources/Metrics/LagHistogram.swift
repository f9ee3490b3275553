/// A Prometheus histogram of lags in seconds: cumulative bucket counts, their sum and count. Observing is a few
/// comparisons (no allocation), so the bridge can observe every message it commits.
public struct LagHistogram: Equatable, Sendable {
    /// Upper bounds, seconds: a healthy bridge commits within tens of milliseconds; a database outage shows as
    /// minutes (`+Inf` takes the rest).
    public static let bounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]

    /// Per bucket (not cumulative): observations at most that bound and above the one before; last: above all.
    private var counts = [UInt64](repeating: 0, count: LagHistogram.bounds.count + 1)
    public private(set) var sum = 0.0
    public private(set) var count: UInt64 = 0

    public init() {}

    public mutating func observe(_ seconds: Double) {
        let value = max(seconds, 0)
        var i = 0
        while i < LagHistogram.bounds.count && value > LagHistogram.bounds[i] { i += 1 }
        counts[i] += 1
        sum += value
        count += 1
    }

    /// `name_bucket{le=…}` (cumulative, `+Inf` last), `name_sum`, `name_count`.
    public func family(_ name: String, help: String) -> MetricFamily {
        var samples: [MetricFamily.Sample] = []
        var running: UInt64 = 0
        for (i, bound) in (LagHistogram.bounds + [.infinity]).enumerated() {
            running += counts[i]
            samples.append(.init(suffix: "_bucket", labels: [("le", MetricText.number(bound))], value: Double(running)))
        }
        samples.append(.init(suffix: "_sum", value: sum))
        samples.append(.init(suffix: "_count", value: Double(count)))
        return MetricFamily(name, .histogram, help: help, samples: samples)
    }
}
