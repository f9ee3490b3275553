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

    func now() -> MonotonicInstant {
        let real = AgentClock.read(CLOCK_MONOTONIC)
        return MonotonicInstant(nanoseconds: realOrigin + Int64(Double(real - realOrigin) * speed))
    }

    /// Real time to wait until the clock shows `instant`.
    func realDelay(until instant: MonotonicInstant) -> Duration {
        let ahead = instant.nanoseconds - now().nanoseconds
        return .nanoseconds(max(0, Int64(Double(ahead) / speed)))
    }

    /// Wall-clock nanoseconds since 1970 at a core instant. On a real clock the offset is read now,
    /// so a clock NTP has just set is used for every event not yet sent.
    func wallNanoseconds(at instant: MonotonicInstant) -> Int64 {
        if isScaled { return wallOrigin + (instant.nanoseconds - realOrigin) }
        let offset = AgentClock.read(CLOCK_REALTIME) - AgentClock.read(CLOCK_MONOTONIC)
        return instant.nanoseconds + offset
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
