#if canImport(Glibc)
import Glibc
#endif

/// Monotonic seconds, for timeouts and backoff.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Monotonic milliseconds, for keepalives and rechecks.
public func monotonicMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// CLOCK_MONOTONIC in nanoseconds, for deadlines.
public func monotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// CLOCK_MONOTONIC_COARSE in nanoseconds: the monotonic clock as of the last timer tick, behind by less than
/// `coarseClockResolution`. The vDSO answers it without a system call whatever the clocksource (a board or VM whose
/// clocksource the vDSO cannot read makes every CLOCK_MONOTONIC read a system call): for keepalives, deadlines
/// seconds away, and to know whether a deadline is near enough to need the precise clock.
public func coarseMonotonicNanoseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// The same in milliseconds.
public func coarseMonotonicMilliseconds() -> Int64 {
    coarseMonotonicNanoseconds() / 1_000_000
}

/// How far the coarse clock may be behind the precise one (one timer tick: 1-10 ms), in nanoseconds.
public let coarseClockResolution: Int64 = {
    var ts = timespec()
    guard clock_getres(CLOCK_MONOTONIC_COARSE, &ts) == 0 else { return 10_000_000 }
    return max(1, Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
}()

/// Sleeps the calling (dedicated) thread.
public func sleepThread(microseconds: UInt32) {
    _ = usleep(microseconds)
}
