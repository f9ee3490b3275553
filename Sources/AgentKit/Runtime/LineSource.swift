import GPIO
import Glibc
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import Simulation
import Synchronization
import SystemIO

/// Where line changes come from: the board's GPIO, the traffic simulator, or a recorded trace.
/// All three feed the same garage with the same values and monotonic timestamps.
enum LineSource {
    case board(GPIOBoard)
    case simulator(TrafficSimulator)
    case trace([TimedChange])

    /// How the birth message marks the feed: nil for a board, so only real sensors look live.
    var mode: String? {
        switch self {
        case .board: return nil
        case .simulator: return StatusPayload.simulatedMode
        case .trace: return StatusPayload.replayMode
        }
    }

    /// The level of every input at start: read from the board, all inactive otherwise.
    func initialLevels(count: Int) -> [Bool] {
        if case .board(let board) = self { return board.initialLevels }
        return Array(repeating: false, count: count)
    }

    /// Inputs whose lines were busy at start: lost until the board gets them (see `GPIOBoard.open`).
    var busyAtStart: [InputLostError] {
        if case .board(let board) = self { return board.busyAtStart }
        return []
    }

    /// Starts delivering changes into the line queue (a lost input, the end of a trace into the inbox). Returns
    /// what stops it. Simulated and replayed changes come from a thread of their own that sleeps until each is due,
    /// as the board's event thread does: nothing else wakes. `hosted`: the board's lines are polled by the caller's
    /// thread (`hostedPoll`, `serviceHosted`) instead of an event thread.
    func start(clock: AgentClock, into queue: LineQueue, inbox: Inbox, hosted: Bool = false) -> @Sendable () -> Void {
        switch self {
        case .board(let board):
            let deliver: @Sendable ([LineChange]) -> Void = { changes in queue.push(changes) }
            let failed: @Sendable (InputLostError) -> Void = { failure in inbox.post(.inputLost(failure.input, failure.message)) }
            if hosted {
                board.startHosted(deliver: deliver, failed: failed)
            } else {
                board.start(deliver: deliver, failed: failed)
            }
            return { board.stop() }
        case .simulator(let simulator):
            let stopped = Flag()
            _ = DedicatedThread {
                nameThread("pw-simulator")
                var simulator = simulator
                while !stopped.isSet, let change = simulator.next() {
                    LineSource.feed(change, clock: clock, into: queue)
                }
                if !stopped.isSet {
                    Log.warn("traffic simulator stalled: no vehicle can arrive or leave, no more line changes", [:])
                }
            }
            return { stopped.set() }
        case .trace(let changes):
            let stopped = Flag()
            _ = DedicatedThread {
                nameThread("pw-replay")
                for change in changes where !stopped.isSet {
                    LineSource.feed(change, clock: clock, into: queue)
                }
                if !stopped.isSet { inbox.post(.sourceFinished) }
            }
            return { stopped.set() }
        }
    }

    /// A board started hosted: its descriptors to poll and when a round is due without an event.
    func hostedPoll() -> (slots: [pollfd], due: Int64?)? {
        if case .board(let board) = self { return board.hostedPoll() }
        return nil
    }

    func serviceHosted(revents: [Int16]) {
        if case .board(let board) = self { board.serviceHosted(revents: revents) }
    }

    private final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .acquiring) }
        func set() { value.store(true, ordering: .releasing) }
    }

    /// Sleeps until the clock reaches the change, then hands it over.
    private static func feed(_ change: TimedChange, clock: AgentClock, into queue: LineQueue) {
        let line = change.lineChange(startingAt: clock.origin)
        // An absolute deadline: no clock read (a time already past returns at once).
        let until = clock.real(at: line.at)
        var ts = timespec(tv_sec: Int(until / 1_000_000_000), tv_nsec: Int(until % 1_000_000_000))
        _ = retryingWhileErrorNumberIsInterrupt { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) }
        queue.push([line])
    }
}
