import ParkWiseCLI
import ParkWiseCore
import ParkWiseLog
import Synchronization
import Uplink

/// What reaches a walk-test's loop (the wiring check and `--learn` alike).
enum WalkInput: Sendable {
    case lines([LineChange])
    case tick
    case key(WalkKey)
    case inputLost(Int?, String)
    case sourceFinished
}

/// The walk-test's plumbing: line changes from the source, the installer's keys, a tick for the filter windows and
/// Ctrl-C, all as one stream for `body`; the terminal given back and the source stopped when it returns.
enum WalkInputs {
    static func run<T>(source: LineSource, clock: AgentClock,
                       _ body: (AsyncStream<WalkInput>, _ keyHelp: String) async -> T) async -> T {
        // The source posts into an inbox (its changes wait in the line queue); a thread hands them to the walk.
        let inbox = Inbox()
        let queue = LineQueue(bound: 100_000) { inbox.post(.lines) }
        let (stream, continuation) = AsyncStream.makeStream(of: WalkInput.self)
        _ = DedicatedThread {
            while let input = inbox.next(until: nil) {
                switch input {
                case .lines: continuation.yield(.lines(queue.take().changes))
                case .inputLost(let input, let message): continuation.yield(.inputLost(input, message))
                case .sourceFinished: continuation.yield(.sourceFinished)
                case .stop:
                    continuation.yield(.key(.quit))
                    return
                default: continue
                }
            }
        }
        let stopSource = source.start(clock: clock, into: queue, inbox: inbox)
        // The handler comes before the terminal goes raw, so no Ctrl-C can end the process with it still raw; a
        // forced exit (a second Ctrl-C) gives the terminal its echo back too.
        let reader = ReaderSlot()
        StopSignals.handle(onStop: { inbox.post(.stop) }, onForce: { reader.keys.withLock { $0?.restore() } })
        let keys = KeyReader { continuation.yield(.key($0)) }
        reader.keys.withLock { $0 = keys }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(20))
                continuation.yield(.tick)
            }
        }
        defer {
            keys.restore()
            ticker.cancel()
            stopSource()
            inbox.post(.stop)   // ends the forwarding thread
            StopSignals.release()
        }
        return await body(stream, keys.isTerminal ? "(s skip, r retry, q quit)" : "(skip, retry or quit, then Enter)")
    }
}

/// The key reader, for a forced exit's handler, which exists before it.
private final class ReaderSlot: Sendable {
    let keys = Mutex<KeyReader?>(nil)
}
