#if canImport(Glibc)
import Glibc
#endif
import ParkWiseLog
import Synchronization

/// SIGTERM and SIGINT, taken by one thread with sigwait() for the whole life of the process. `takeOver()` is
/// main's first step: the signals are blocked before any other thread exists (threads inherit the mask), so no
/// thread is ever interrupted by them and none can be lost on the way (a signal ignored or caught in a thread not
/// yet set up). A command that wants a graceful stop says so with `handle`: the first signal then calls `onStop`,
/// a second one later forces the exit (after `onForce` has put back what must not outlive the process: a terminal
/// without echo, or on the alternate screen). A repeat within half a second is the same request delivered twice
/// (to the process and to its group, as `timeout` does) and forces nothing. Without a handler a signal ends the
/// process as it would by default.
public enum StopSignals {
    private struct Handler {
        let stop: @Sendable () -> Void
        let force: @Sendable () -> Void
        let announce: Bool
    }

    private static let handler = Mutex<Handler?>(nil)

    private static var set: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        return set
    }

    /// Call first in main, before any thread starts.
    public static func takeOver() {
        var set = self.set
        pthread_sigmask(SIG_BLOCK, &set, nil)
        _ = DedicatedThread {
            nameThread("pw-signal")
            var set = StopSignals.set
            var first: Int64 = 0
            while true {
                var number: Int32 = 0
                guard sigwait(&set, &number) == 0 else { continue }
                let now = monotonicNanoseconds()
                if first != 0 && now - first <= 500_000_000 { continue }   // the same request, delivered twice
                guard let handler = StopSignals.handler.withLock({ $0 }) else { endByDefault(number) }
                if first == 0 {
                    first = now
                    if handler.announce { Log.info("stop requested", ["signal": number == SIGTERM ? "TERM" : "INT"]) }
                    handler.stop()
                } else if now - first > 500_000_000 {
                    Log.warn("second stop signal, forced exit", [:])
                    handler.force()
                    _exit(ExitCode.failure)
                }
            }
        }
    }

    /// From now on the first signal calls `onStop` and a later one forces the exit. `announce`: the first one is logged
    /// ("stop requested", for a service's journal); a tool the technician quits (status --watch, diagnose) quits silently.
    public static func handle(announce: Bool = false, onStop: @escaping @Sendable () -> Void,
                              onForce: @escaping @Sendable () -> Void = {}) {
        handler.withLock { $0 = Handler(stop: onStop, force: onForce, announce: announce) }
    }

    /// From now on a signal ends the process again.
    public static func release() {
        handler.withLock { $0 = nil }
    }

    /// Ends the process by the signal, as its default action would (the shell and systemd see which).
    private static func endByDefault(_ number: Int32) -> Never {
        signal(number, SIG_DFL)
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, number)
        pthread_sigmask(SIG_UNBLOCK, &only, nil)
        raise(number)
        _exit(128 + number)
    }
}
