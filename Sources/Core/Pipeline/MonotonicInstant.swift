/// A point on the monotonic clock (CLOCK_MONOTONIC nanoseconds on a board, virtual in tests).
/// The core never reads a clock: every instant comes with the input that carries it.
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static func milliseconds(_ ms: Int64) -> MonotonicInstant { MonotonicInstant(nanoseconds: ms * 1_000_000) }

    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }
    public static func + (a: Self, d: Duration) -> Self { Self(nanoseconds: a.nanoseconds + d.nanosecondCount) }
    public static func - (a: Self, b: Self) -> Duration { .nanoseconds(a.nanoseconds - b.nanoseconds) }

    public var description: String { "\(nanoseconds / 1_000_000)ms" }
}

/// One level change of one input, as the board (or simulator, or trace) saw it.
/// `active` is the logical level: true means the sensor reports something present (after active-low).
public struct LineChange: Sendable, Hashable {
    public var input: Int
    public var active: Bool
    public var at: MonotonicInstant
    /// The board reads this input again after it was lost (its line was busy at start): `active` is its level then.
    public var regained: Bool

    public init(input: Int, active: Bool, at: MonotonicInstant, regained: Bool = false) {
        self.input = input
        self.active = active
        self.at = at
        self.regained = regained
    }

    /// This change in place of an earlier one of the same input that a queue shedding under load gives up for it: the
    /// level and time are this one's, and an input regained in between stays regained (else the garage would drop
    /// this change for an input it still believes lost, and the spot would stay unknown).
    public func superseding(_ earlier: LineChange?) -> LineChange {
        var change = self
        change.regained = regained || earlier?.regained == true
        return change
    }
}
