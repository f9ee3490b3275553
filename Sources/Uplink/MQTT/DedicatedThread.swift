#if canImport(Glibc)
import Glibc
#endif

/// A POSIX thread for blocking work (the MQTT network loop), kept off Swift's cooperative pool.
public final class DedicatedThread: Sendable {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private nonisolated(unsafe) var thread = pthread_t()

    public init(_ run: @escaping @Sendable () -> Void) {
        let body = Unmanaged.passRetained(Body(run)).toOpaque()
        let rc = pthread_create(&thread, nil, { arg in
            let body = Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue()
            body.run()
            return nil
        }, body)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    /// Waits for the thread to finish. Call once.
    public func join() {
        pthread_join(thread, nil)
    }
}

/// Monotonic seconds, for timeouts and backoff on the network thread.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Sleeps the calling (dedicated) thread.
public func sleepThread(microseconds: UInt32) {
    _ = usleep(microseconds)
}
