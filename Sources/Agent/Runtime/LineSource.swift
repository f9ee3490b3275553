import GPIO
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import Simulation

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

    /// Starts delivering changes into the line queue (a lost input into the loop). Returns what stops it.
    func start(clock: AgentClock, into queue: LineQueue,
               continuation: AsyncStream<AgentInput>.Continuation) -> @Sendable () -> Void {
        switch self {
        case .board(let board):
            board.start(deliver: { changes in queue.push(changes) },
                        failed: { failure in continuation.yield(.inputLost(failure.input, failure.message)) })
            return { board.stop() }
        case .simulator(let simulator):
            let task = Task {
                var simulator = simulator
                while !Task.isCancelled, let change = simulator.next() {
                    await LineSource.feed(change, clock: clock, into: queue)
                }
                if !Task.isCancelled {
                    Log.warn("traffic simulator stalled: no vehicle can arrive or leave, no more line changes", [:])
                }
            }
            return { task.cancel() }
        case .trace(let changes):
            let task = Task {
                for change in changes where !Task.isCancelled {
                    await LineSource.feed(change, clock: clock, into: queue)
                }
                if !Task.isCancelled { continuation.yield(.sourceFinished) }
            }
            return { task.cancel() }
        }
    }

    /// Waits until the clock reaches the change, then hands it over.
    private static func feed(_ change: TimedChange, clock: AgentClock, into queue: LineQueue) async {
        let line = change.lineChange(startingAt: clock.origin)
        let delay = clock.realDelay(until: line.at)
        if delay > .zero { try? await Task.sleep(for: delay) }
        queue.push([line])
    }
}
