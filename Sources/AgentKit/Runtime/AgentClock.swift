import CTimex
import Glibc
import ParkWiseCore
import ParkWiseLog
import Synchronization

/// The agent's time: the monotonic instants the core runs on, and the wall-clock time of each.
/// In simulation and replay it runs `speed` times faster than real time; an instant's wall-clock time is then the real
/// moment it was played (see `wallNanoseconds(at:offset:)`).
struct AgentClock: Sendable {
    let speed: Double
    private let realOrigin: Int64
    /// The core's instant at start.
    let origin: MonotonicInstant

    init(speed: Double = 1) {
        self.speed = speed
        realOrigin = AgentClock.read(CLOCK_MONOTONIC)
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
        guard isScaled else { return instant.nanoseconds }
        return realOrigin + Int64(Double(instant.nanoseconds - realOrigin) / speed)
    }

    /// Wall-clock nanoseconds since 1970 at a core instant: the wall clock at the real moment the clock showed it,
    /// with the offset read now (or read for the batch at hand, `offset`), so a clock NTP has just set is used for
    /// every event not yet sent.
    ///
    /// At `--speed` S the instant is the real moment it was played, not the simulated start plus simulated time
    /// (which at S > 1 ran ahead of the wall clock: an event stamped in the future, a release before its check-in in
    /// a backend's database). An event is stamped after its instant, so no time stamped lies after the wall clock's
    /// now, and later instants keep later times. The price: durations between wire times are real ones, S times
    /// shorter than the simulated durations (a 2-hour simulated stay at --speed 60 is 2 minutes apart; `stay_s`
    /// says the same, see `realElapsed`).
    func wallNanoseconds(at instant: MonotonicInstant, offset: Int64? = nil) -> Int64 {
        real(at: instant) + (offset ?? AgentClock.wallOffset())
    }

    /// Real time between two instants: what their wall-clock times are apart (at speed 1 the instants' own distance).
    func realElapsed(from start: MonotonicInstant, to end: MonotonicInstant) -> Duration {
        .nanoseconds(real(at: end) - real(at: start))
    }

    /// The wall clock's offset from the monotonic one now, for a whole batch of events stamped together.
    func wallOffsetNow() -> Int64 {
        AgentClock.wallOffset()
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

    /// Whether the kernel says NTP has synchronised the wall clock (adjtimex). A kernel that will not say (the
    /// call refused, e.g. by a seccomp filter) is taken as not synchronised, and said once: a clock taken for
    /// synchronised when it is not would stamp events with a wrong time as if it were right.
    static func wallClockSynchronized() -> Bool {
        var tx = timex()
        let state = adjtimex(&tx)   // glibc makes it clock_adjtime(CLOCK_REALTIME): the system call to allow
        guard state != -1 else {
            let code = errno
            if !clockStateRefused.exchange(true, ordering: .relaxed) {
                Log.warn("cannot read whether NTP has set the clock: events are stamped clock unsynced",
                         ["errno": code, "error": String(cString: strerror(code)),
                          "hint": "a sandbox must allow the clock_adjtime system call (read-only without CAP_SYS_TIME)"])
            }
            return false
        }
        return state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0
    }

    /// Whether the kernel refused to say (warned once).
    private static let clockStateRefused = Atomic<Bool>(false)

    static func read(_ clock: clockid_t) -> Int64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
