import SystemIO
import Glibc
import ParkWiseCore
import ParkWiseLog
import Synchronization

/// The configured inputs, requested from the kernel, and the thread that reports their edges.
///
/// Sendable, checked by the compiler: besides the immutable `initialLevels` and `names`, all state (the line
/// handles and the running thread) sits in a Mutex. The line handles are not Sendable themselves; they leave the
/// Mutex only for the event thread (see `EventThread.start`), which is the single user of them while it runs:
/// after `open` nothing else touches them until they are released.
public final class GPIOBoard: Sendable {
    /// The logical levels read right after the request, one per input, same order.
    /// An edge that comes between the request and this read is also delivered once `start` runs,
    /// so the first change of an input may repeat its initial level.
    public let initialLevels: [Bool]
    /// "spot P2-A-01 (GPIO17)", per input, for messages.
    private let names: [String]
    private let state: Mutex<State>

    private struct State {
        var lines: LineSet
        var thread: EventThread?
        /// Hosted: the edge watch, run by the host's thread (`serviceHosted`) instead of an event thread.
        var hosted: EdgeWatch?
    }

    private init(lines: sending LineSet, initialLevels: [Bool], names: [String], busyAtStart: [InputLostError] = []) {
        self.initialLevels = initialLevels
        self.names = names
        self.busyAtStart = busyAtStart
        state = Mutex(State(lines: lines, thread: nil, hosted: nil))
    }

    /// Inputs whose lines were busy at start (`waitForBusyLines`), with what holds them: lost until their line is free.
    public let busyAtStart: [InputLostError]

    /// Resolves and requests every input as input with both-edge events, bias and active-low from config.
    /// Lines are requested one by one, so an error names the one input that failed; the lines requested
    /// before it are released again.
    /// `waitForBusyLines` (the agent's run): a line another program or a driver holds does not stop the others. Its
    /// input is in `busyAtStart`, and the watch asks for the line again every `EdgeWatch.busyRetryMilliseconds`; once
    /// it has it, the input's level comes as a `regained` change. Only when every line is busy does this throw. A line
    /// held by the agent or one of its tools always throws (two of them on one garage is a mistake to say at once).
    public static func open(inputs: [InputConfig], board: BoardChoice, consumer: String,
                            waitForBusyLines: Bool = false) throws(GPIOError) -> GPIOBoard {
        guard !inputs.isEmpty else {
            _ = try LineResolver.profile(for: board)
            return GPIOBoard(lines: LineSet(), initialLevels: [], names: [])
        }
        let resolver = try LineResolver(board: board)
        try KernelCheck.requireMonotonicEventClock()
        let lines = LineSet()
        var levels: [Bool] = []
        var claimed: [String: InputConfig] = [:]
        var busy: [InputLostError] = []
        var busyProblem: GPIOError?
        for input in inputs {
            let target = try resolver.resolve(input)
            let key = "\(target.chip.name):\(target.offset)"
            if let first = claimed[key] {
                throw GPIOError(code: .lineShared,
                                message: "\(input.owner) (\(input.ref), config line \(input.mark.line)) and \(first.owner) "
                                    + "(\(first.ref), config line \(first.mark.line)) are the same line, \(target.place); "
                                    + "each sensor needs its own line, check the wiring plan")
            }
            claimed[key] = input
            let request = { () throws(LineRequestError) -> LineHandle in
                try target.chip.requestBothEdges(offset: target.offset, consumer: consumer, activeLow: input.activeLow,
                                                 bias: input.bias)
            }
            let line: LineHandle
            do {
                line = try request()
            } catch {
                let problem = requestError(error, target, input)
                guard waitForBusyLines, problem.code == .lineBusy, !(error.holder?.hasPrefix("parkwise-") ?? false) else {
                    throw problem
                }
                busy.append(InputLostError(input: lines.lines.count, message: problem.message
                                            + "; the agent runs without it and asks for the line again every "
                                            + "\(EdgeWatch.busyRetryMilliseconds / 1000) s"))
                busyProblem = busyProblem ?? problem
                lines.waiting[lines.lines.count] = request
                lines.lines.append(nil)
                levels.append(false)
                continue
            }
            lines.lines.append(line)
            do {
                levels.append(try line.level())
            } catch {
                throw GPIOError(code: .requestFailed,
                                message: "cannot read the level of \(input.ref) (\(target.place)) for \(input.owner)",
                                errno: error.errno)
            }
        }
        // Nothing to watch at all: as before, the first busy line's error (systemd starts the agent again).
        if let busyProblem, busy.count == inputs.count { throw busyProblem }
        let names = inputs.map { "\($0.owner) (\($0.ref))" }
        return GPIOBoard(lines: lines, initialLevels: levels, names: names, busyAtStart: busy)
    }

    private static func requestError(_ failure: LineRequestError, _ target: ResolvedLine, _ input: InputConfig) -> GPIOError {
        let what = "\(input.ref) (\(target.place)) for \(input.owner), config line \(input.mark.line)"
        let number = failure.errno
        switch number {
        case .busy:
            let holder: String
            if let name = failure.holder, name == "parkwise-agent" {
                holder = "'\(name)': the agent is running (the service, or a `run` by hand); stop it first "
                    + "(systemctl stop parkwise-agent)"
            } else if let name = failure.holder, name.hasPrefix("parkwise-") {
                holder = "'\(name)': `parkwise-agent \(name.dropFirst("parkwise-".count))` is running (a technician's "
                    + "tool); finish it first"
            } else if let name = failure.holder {
                holder = "'\(name)'. Stop that program, or remove the dtoverlay or driver that claims the line "
                    + "(/boot/firmware/config.txt), or wire the sensor to a free line"
            } else {
                holder = "another program or a kernel driver (it gives no name). Stop it, or wire the sensor to a free line"
            }
            return GPIOError(code: .lineBusy, message: "\(what) is already in use by \(holder); "
                                + "`parkwise-agent lines` shows which lines are free", errno: number)
        case _ where number.isPermission:
            return GPIOError(code: .permissionDenied,
                             message: "the kernel refused \(what): permission denied. The user the agent runs as must be "
                                + "in group 'gpio' (or a udev rule must give its group access to \(target.chip.path))",
                             errno: number)
        case Errno(EINVAL) where input.bias != .asIs:
            return GPIOError(code: .requestFailed,
                             message: "the kernel refused \(what) with bias '\(input.bias.rawValue)'. Bias needs Linux 5.5 "
                                + "or later and a GPIO driver that supports it; update the kernel, or set `bias: as-is` "
                                + "and fit an external resistor",
                             errno: number)
        default:
            return GPIOError(code: .requestFailed, message: "the kernel refused \(what); check the kernel log (dmesg)",
                             errno: number)
        }
    }

    /// Starts ONE dedicated thread (a pthread, not the Swift concurrency pool) that poll()s all line event fds and
    /// a wakeup fd; it reads events in batches and calls `deliver` with each batch's changes in kernel timestamp
    /// order, on that thread. No effect while the thread runs already. `deliver` should hand the changes on
    /// (e.g. to an AsyncStream continuation) and return quickly: the kernel queues only 16 edges per line.
    ///
    /// `failed` is called on that thread when an input can no longer be watched (its chip was removed or failed:
    /// `input` is its index, the other inputs carry on) or nothing can (`input` nil: the thread has ended). The
    /// default logs it as an error; the agent should make the input's spot or lane a fault.
    public func start(deliver: @escaping @Sendable ([LineChange]) -> Void,
                      failed: @escaping @Sendable (InputLostError) -> Void = GPIOBoard.logFailure) {
        let names = self.names
        state.withLock { state in
            guard state.thread == nil, state.hosted == nil else { return }
            state.thread = EventThread.start(lines: state.lines, names: names, deliver: deliver, failed: failed)
        }
    }

    /// Like `start`, but with no thread of its own: the caller polls `hostedPoll()`'s descriptors beside its own and
    /// runs `serviceHosted` after each poll, on its one thread (the agent's event loop, so that an edge reaches the
    /// garage with no hop between threads). `deliver` and `failed` are called there, during `serviceHosted`.
    public func startHosted(deliver: @escaping @Sendable ([LineChange]) -> Void,
                            failed: @escaping @Sendable (InputLostError) -> Void) {
        let names = self.names
        state.withLock { state in
            guard state.thread == nil, state.hosted == nil else { return }
            guard let buffer = try? EdgeBuffer.make() else {
                failed(InputLostError(input: nil, message: "GPIO: cannot allocate the edge buffer: \(Errno.current.text); "
                                       + "no input is watched, restart the agent"))
                return
            }
            state.hosted = EdgeWatch(lines: state.lines, names: names, buffer: buffer, deliver: deliver, failed: failed)
        }
    }

    /// While hosted: the descriptors to poll (events set, revents ignored) and when to run a round without an event
    /// (monotonic ms; nil: only an event).
    public func hostedPoll() -> (slots: [pollfd], due: Int64?)? {
        state.withLock { state in state.hosted.map { ($0.slots, $0.due()) } }
    }

    /// A round after the host's poll: `revents` for `hostedPoll()`'s slots, in order (all 0 when its deadline passed).
    public func serviceHosted(revents: [Int16]) {
        state.withLock { state in state.hosted?.round(revents: revents) }
    }

    /// The default report of a lost input: an error line on stderr (journald).
    public static let logFailure: @Sendable (InputLostError) -> Void = { failure in
        Log.error("GPIO input lost", ["input": failure.input.map(String.init) ?? "all", "reason": failure.message])
    }

    /// Wakes the thread and waits for it to end; no `deliver` call follows. Idempotent; `start` may be called again
    /// afterwards. Called from `deliver`, it does not wait (the thread ends once `deliver` returns). Meant to be called
    /// from one controlling place: a second, concurrent stop() returns without waiting for the first one's join.
    public func stop() {
        let thread = state.withLock { state -> EventThread? in
            defer {
                state.thread = nil
                state.hosted = nil
            }
            return state.thread
        }
        thread?.stopAndJoin()  // outside the lock, so a `deliver` that calls stop() cannot deadlock
    }

    /// Stops the thread; then the lines are released and the chips closed, in reverse order of acquisition.
    deinit {
        stop()
    }
}

/// The requested lines, in input order (nil: a line busy at start, asked for again through `waiting`). Releasing it
/// releases the lines last-first; each chip closes when its last line is released, so chips also close in reverse
/// order of acquisition.
final class LineSet {
    var lines: [LineHandle?] = []
    /// Per input whose line was busy at start: the request to try again.
    var waiting: [Int: () throws(LineRequestError) -> LineHandle] = [:]

    deinit {
        waiting.removeAll()
        while !lines.isEmpty { lines.removeLast() }
    }
}
