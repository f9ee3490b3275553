import Glibc
import ParkWiseCLI
import ParkWiseLog
import Synchronization
import Uplink

/// SIGTERM and SIGINT for `run`, without Dispatch (whose worker pool keeps a timer waking the process every
/// second): the signals are blocked in every thread (`block()` runs before any thread starts, and threads inherit
/// the mask), and one thread waits for them with sigwait(). First signal: a graceful stop through the event loop.
/// Second: forced exit. A repeat within half a second is the same request delivered twice (to the process and to
/// its group, as `timeout` does) and does not force anything. A signal that comes before `start` waits, pending.
enum StopSignals {
    private static var set: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        return set
    }

    /// Call before any thread starts.
    static func block() {
        var set = self.set
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Starts the thread that waits for the signals; it lives as long as the process.
    static func start(onStop stop: @escaping @Sendable () -> Void) {
        _ = DedicatedThread {
            nameThread("pw-signal")
            var set = StopSignals.set
            var first: Int64 = 0
            while true {
                var number: Int32 = 0
                guard sigwait(&set, &number) == 0 else { continue }
                let now = Inbox.now()
                if first == 0 {
                    first = now
                    Log.info("stop requested", ["signal": number == SIGTERM ? "TERM" : "INT"])
                    stop()
                } else if now - first > 500_000_000 {
                    Log.warn("second stop signal, forced exit", [:])
                    _exit(ExitCode.failure)
                }
            }
        }
    }
}
