import ParkWiseCore

/// A line change at an offset from the start of a simulation or trace.
public struct TimedChange: Sendable, Hashable {
    public var offset: Duration
    public var input: Int
    public var active: Bool

    public init(offset: Duration, input: Int, active: Bool) {
        self.offset = offset
        self.input = input
        self.active = active
    }

    public func lineChange(startingAt start: MonotonicInstant) -> LineChange {
        LineChange(input: input, active: active, at: start + offset)
    }
}

/// Small, seedable, reproducible random numbers (SplitMix64).
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
