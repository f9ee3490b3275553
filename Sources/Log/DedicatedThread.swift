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
