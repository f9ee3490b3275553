import Dispatch
import Glibc
import ParkWiseLog
import Synchronization

/// First SIGTERM/SIGINT: graceful stop through the event loop. Second: forced exit. A repeat within
/// half a second is the same request delivered twice (to the process and to its group, as
/// `timeout` does) and does not force anything. `onForce` runs just before a forced exit: what must not outlive
/// the process (a terminal left without echo, or on the alternate screen) is put back there.
public final class SignalHandlers {
    private let sources: [any DispatchSourceSignal]

    public init(onStop stop: @escaping @Sendable () -> Void, onForce: @escaping @Sendable () -> Void = {}) {
        let first = Atomic<Int64>(0)
        sources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                var ts = timespec()
                clock_gettime(CLOCK_MONOTONIC, &ts)
                let now = Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
                let (exchanged, previous) = first.compareExchange(expected: 0, desired: now, ordering: .relaxed)
                if exchanged {
                    Log.info("stop requested", ["signal": number == SIGTERM ? "TERM" : "INT"])
                    stop()
                } else if now - previous > 500_000_000 {
                    Log.warn("second stop signal, forced exit", [:])
                    onForce()
                    _exit(ExitCode.failure)
                }
            }
            source.resume()
            return source
        }
    }

    public func cancel() { sources.forEach { $0.cancel() } }
}
