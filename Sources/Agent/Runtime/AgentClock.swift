import CTimex
import Glibc
import ParkWiseCore

/// The agent's time: the monotonic instants the core runs on, and the wall-clock time of each.
/// In simulation and replay it runs `speed` times faster than real time.
struct AgentClock: Sendable {
    let speed: Double
    private let realOrigin: Int64
    private let wallOrigin: Int64
    /// The core's instant at start.
    let origin: MonotonicInstant

    init(speed: Double = 1) {
        self.speed = speed
        realOrigin = AgentClock.read(CLOCK_MONOTONIC)
        wallOrigin = AgentClock.read(CLOCK_REALTIME)
        origin = MonotonicInstant(nanoseconds: realOrigin)
    }

    var isScaled: Bool { speed != 1 }

    func now() -> MonotonicInstant { instant(real: AgentClock.read(CLOCK_MONOTONIC)) }

    /// What the clock shows at `real` (CLOCK_MONOTONIC nanoseconds, as read by the caller): no clock read.
    func instant(real: Int64) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: realOrigin + Int64(Double(real - realOrigin) * speed))
    }

    /// When (CLOCK_MONOTONIC nanoseconds) the clock shows `instant`: what to sleep until, no clock read.
    func real(at instant: MonotonicInstant) -> Int64 {
        realOrigin + Int64(Double(instant.nanoseconds - realOrigin) / speed)
    }

    /// Wall-clock nanoseconds since 1970 at a core instant. On a real clock the offset is read now (or was read
    /// for the batch at hand, `offset`), so a clock NTP has just set is used for every event not yet sent.
    func wallNanoseconds(at instant: MonotonicInstant, offset: Int64? = nil) -> Int64 {
        if isScaled { return wallOrigin + (instant.nanoseconds - realOrigin) }
        return instant.nanoseconds + (offset ?? AgentClock.wallOffset())
    }

    /// The wall clock's offset from the monotonic one now, for a whole batch of events stamped together (nil on a
    /// scaled clock, which needs none).
    func wallOffsetNow() -> Int64? {
        isScaled ? nil : AgentClock.wallOffset()
    }

    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, from their coarse versions: both are the kernel's time at the last tick,
    /// so their difference is the offset itself, as exact as the precise clocks' (a step of the wall clock shows at
    /// once), and the vDSO reads them without a system call. Read again if a tick came between the two.
    private static func wallOffset() -> Int64 {
        while true {
            let monotonic = read(CLOCK_MONOTONIC_COARSE)
            let wall = read(CLOCK_REALTIME_COARSE)
            if read(CLOCK_MONOTONIC_COARSE) == monotonic { return wall - monotonic }
        }
    }

    /// Whether the kernel says NTP has synchronised the wall clock (adjtimex).
    static func wallClockSynchronized() -> Bool {
        var tx = timex()
        let state = adjtimex(&tx)
        return state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0
    }

    static func read(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
