import Glibc
import ParkWiseCLI
import ParkWiseCore
import ParkWiseLog
import Synchronization

/// What reaches a walk-test's loop (the wiring check and `--learn` alike).
enum WalkInput: Sendable {
    case lines([LineChange])
    case tick
    case key(WalkKey)
    case inputLost(Int?, String)
    case sourceFinished
}

/// The walk-test's plumbing: line changes from the source, the installer's keys, Ctrl-C, and a tick at the deadline
/// `body` arms on the timer (a filter window's end), all as one stream for `body`; the terminal given back, the
/// source and the timer stopped when it returns.
enum WalkInputs {
    static func run<T>(source: LineSource, clock: AgentClock,
                       _ body: (AsyncStream<WalkInput>, _ keyHelp: String, WalkTimer) async -> T) async -> T {
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
        let timer = WalkTimer(clock: clock, continuation: continuation)
        defer {
            keys.restore()
            timer.arm(nil)
            stopSource()
            inbox.post(.stop)   // ends the forwarding thread
            StopSignals.release()
        }
        return await body(stream, keys.isTerminal ? "(s skip, r retry, q quit)" : "(skip, retry or quit, then Enter)", timer)
    }
}

/// The walk's one timer: a `.tick` when the state machine's next deadline comes, and none while nothing is due (a
/// walk-test waiting for the installer does not wake up). Armed again after every input, the new deadline replacing
/// the old one.
final class WalkTimer: Sendable {
    private let clock: AgentClock
    private let continuation: AsyncStream<WalkInput>.Continuation
    private let pending = Mutex<Task<Void, Never>?>(nil)

    init(clock: AgentClock, continuation: AsyncStream<WalkInput>.Continuation) {
        self.clock = clock
        self.continuation = continuation
    }

    /// A tick when the clock shows `deadline` (at once if it already has); nil: no tick.
    func arm(_ deadline: MonotonicInstant?) {
        let tick = deadline.map { deadline in
            let wait = Duration.nanoseconds(max(0, clock.real(at: deadline) - AgentClock.read(CLOCK_MONOTONIC)))
            return Task { [continuation] in
                do { try await Task.sleep(for: wait) } catch { return }
                continuation.yield(.tick)
            }
        }
        pending.withLock { armed in
            armed?.cancel()
            armed = tick
        }
    }
}

/// The key reader, for a forced exit's handler, which exists before it.
private final class ReaderSlot: Sendable {
    let keys = Mutex<KeyReader?>(nil)
}
