import ParkWiseCore

/// Line changes as `diagnose --record` writes them: offsets from the start that `run --replay`
/// accepts. An edge the kernel stamped before the start (it happened while the lines were being
/// opened) is recorded at 0, and an edge delivered out of order at the previous offset: a trace
/// never goes back in time.
public struct TraceRecording: Sendable {
    public let start: MonotonicInstant
    private var last: Duration = .zero

    public init(start: MonotonicInstant) { self.start = start }

    public mutating func record(_ change: LineChange) -> TimedChange {
        last = max(last, change.at - start)
        return TimedChange(offset: last, input: change.input, active: change.active)
    }
}
