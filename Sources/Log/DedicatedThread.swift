#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A POSIX thread for blocking work (the MQTT network loop), kept off Swift's cooperative pool.
public final class DedicatedThread: Sendable {
    private final class Body {
        let run: @Sendable () -> Void
        public init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private nonisolated(unsafe) var thread = pthread_t()
    private final class Finished: Sendable { let flag = Atomic<Bool>(false) }
    private let finished = Finished()

    public init(_ run: @escaping @Sendable () -> Void) {
        let body = Unmanaged.passRetained(Body { [finished] in
            run()
            finished.flag.store(true, ordering: .releasing)
        }).toOpaque()
        let rc = pthread_create(&thread, nil, { arg in
            let body = Unmanaged<Body>.fromOpaque(arg!).takeRetainedValue()
            body.run()
            return nil
        }, body)
        precondition(rc == 0, "pthread_create failed: \(rc)")
    }

    /// Waits for the thread to finish, for `seconds` at most; true if it did. A thread still busy
    /// after that (stuck in a blocking call: a name lookup with the network gone) is left to end
    /// with the process. Call once.
    public func join(within seconds: Double) -> Bool {
        let until = monotonicSeconds() + seconds
        while !finished.flag.load(ordering: .acquiring) {
            guard monotonicSeconds() < until else {
                pthread_detach(thread)
                return false
            }
            sleepThread(microseconds: 10_000)
        }
        pthread_join(thread, nil)
        return true
    }

    /// Waits for the thread to finish, however long it takes. Call once.
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

/// Monotonic milliseconds, for the link's keepalive.
public func monotonicMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// Sleeps the calling (dedicated) thread.
public func sleepThread(microseconds: UInt32) {
    _ = usleep(microseconds)
}
