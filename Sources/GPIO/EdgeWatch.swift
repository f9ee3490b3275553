import SystemIO
import Glibc
import ParkWiseCore
import ParkWiseLog

/// The watch on the inputs' edges, for whichever thread polls them: the board's event thread, or (hosted) the
/// agent's event loop, which polls them beside its own descriptors so that an edge reaches the garage with no hop
/// between threads. It says what to poll (every line's event fd, then the watch on /dev) and when to look again
/// without an event, and runs a round after a poll: edges read in batches and handed on in kernel timestamp order,
/// a line whose chip went away reported once and left out of the poll from then on.
/// Owns the line handles' use and its edge buffer; one thread at a time.
final class EdgeWatch {
    private let lines: LineSet
    private let names: [String]
    private let deliver: @Sendable ([LineChange]) -> Void
    private let failed: @Sendable (InputLostError) -> Void
    private let buffer: EdgeBuffer
    private let chips = ChipWatch()
    /// Slot i is input i's event fd (-1 once lost: poll ignores it); the last slot is the watch on /dev.
    private(set) var slots: [pollfd]
    private var rechecks: [Int64] = []   // monotonic ms: look again then, after a device node left /dev
    private var edges: [RawEdge] = []
    private var batch: [(change: LineChange, sequence: Int)] = []
    /// Per input, the time of the last change handed on: nothing goes out earlier than that.
    private var lastAt: [Int64]
    private var fullQueues = LogStreak(.warn, "GPIO edge queue was full, edges may be lost; the level was read again",
                                       ended: "GPIO edge queues no longer full")

    /// A chip removed under the agent does not wake poll() on Linux 6.1 (Debian 12), but a poll() made after
    /// the removal reports its line fds as hung up: so after a device node left /dev the watch looks again, at once
    /// and after these delays (the node may go before the chip's lines are marked gone), and without inotify it
    /// looks every `recheckMilliseconds` while idle.
    static let recheckMilliseconds: Int64 = 5000
    static let recheckAfterRemoval: [Int64] = [200, 1000, 5000]
    /// A line busy at start is asked for again this often (monotonic ms), while any is: a real deadline, not a tick.
    static let busyRetryMilliseconds: Int64 = 10_000
    private var busyRetryAt: Int64?

    init(lines: LineSet, names: [String], buffer: EdgeBuffer,
         deliver: @escaping @Sendable ([LineChange]) -> Void, failed: @escaping @Sendable (InputLostError) -> Void) {
        self.lines = lines
        self.names = names
        self.buffer = buffer
        self.deliver = deliver
        self.failed = failed
        slots = lines.lines.map { pollfd(fd: $0?.eventFD ?? -1, events: Int16(POLLIN), revents: 0) }
        lastAt = Array(repeating: 0, count: lines.lines.count)
        slots.append(pollfd(fd: chips.fd, events: Int16(POLLIN), revents: 0))
        let now = monotonicMilliseconds()
        // A chip removed while the agent was starting, after its lines were requested and before this watch existed,
        // left /dev unseen: it is looked for as after a removal seen now (three looks, then nothing).
        rechecks = Self.recheckAfterRemoval.map { now + $0 }
        if !lines.waiting.isEmpty { busyRetryAt = now + Self.busyRetryMilliseconds }
    }

    /// When to look again without an event (monotonic ms; nil: only an event wakes it). `now` is read only when
    /// a recheck is pending or there is no inotify.
    func due() -> Int64? {
        let recheck = rechecks.first ?? (chips.fd >= 0 ? nil : monotonicMilliseconds() + Self.recheckMilliseconds)
        guard let retry = busyRetryAt else { return recheck }
        return min(retry, recheck ?? retry)
    }

    /// A round after a poll of `slots` (same order; all revents 0 when the poll timed out).
    func round(revents: [Int16]) {
        if !rechecks.isEmpty {
            let now = monotonicMilliseconds()
            rechecks.removeAll { $0 <= now }
        }
        let watchSlot = slots.count - 1
        if revents[watchSlot] != 0 {
            chips.drain()
            let at = monotonicMilliseconds()
            rechecks = Self.recheckAfterRemoval.map { at + $0 }
        }
        batch.removeAll(keepingCapacity: true)
        if let retry = busyRetryAt, retry <= monotonicMilliseconds() { askForBusyLines() }
        var full = false
        for index in 0..<watchSlot where revents[index] != 0 && slots[index].fd >= 0 {
            guard revents[index] & Int16(POLLIN) != 0 else {
                lost(index, reason: "its event descriptor reported an error or hang-up (revents \(revents[index]))")
                continue
            }
            edges.removeAll(keepingCapacity: true)
            do {
                try lines.lines[index]!.readEdges(using: buffer, into: &edges)
            } catch {
                // Nothing to read after all, or a signal came first: poll reports the line again.
                if error.errno == .interrupted || error.errno == .wouldBlock { continue }
                lost(index, reason: "reading its events failed: \(error.errno.text)")
                continue
            }
            for edge in edges {
                lastAt[index] = max(lastAt[index], edge.nanoseconds)
                let change = LineChange(input: index, active: edge.rising, at: MonotonicInstant(nanoseconds: lastAt[index]))
                batch.append((change, batch.count))
            }
            if edges.count >= EdgeBuffer.capacity {
                full = true
                reread(index, after: edges.last!.rising)
            }
        }
        if !full && !batch.isEmpty { fullQueues.ended() }
        guard !batch.isEmpty else { return }
        // Kernel timestamp order across lines; the sequence keeps one line's equal-time edges in the order read.
        batch.sort { ($0.change.at, $0.sequence) < ($1.change.at, $1.sequence) }
        deliver(batch.map(\.change))
    }

    /// The kernel keeps at most `EdgeBuffer.capacity` edges per line and drops the newest beyond that: a read that
    /// found the queue full may have missed some (the loop was held up, the process stopped). The level read now is
    /// the truth: if it is not where the last edge left the input, it is handed on as a change now, so the final
    /// state is right whatever was lost on the way.
    private func reread(_ index: Int, after last: Bool) {
        fullQueues.occurred(1, ["input": names[index]])
        guard let level = try? lines.lines[index]?.level(), level != last else { return }
        lastAt[index] = max(lastAt[index], monotonicNanoseconds())
        batch.append((LineChange(input: index, active: level, at: MonotonicInstant(nanoseconds: lastAt[index])), batch.count))
    }

    /// Asks the kernel again for the lines that were busy: a line it grants is watched from now on, and its level is
    /// handed on as a `regained` change (its input was lost until now). The others wait for the next retry.
    private func askForBusyLines() {
        for index in lines.waiting.keys.sorted() {
            // A line whose level cannot be read is let go again, and asked for at the next retry.
            guard let request = lines.waiting[index], let line = try? request(), let active = try? line.level() else { continue }
            lines.waiting[index] = nil
            lines.lines[index] = line
            slots[index].fd = line.eventFD
            lastAt[index] = max(lastAt[index], monotonicNanoseconds())
            Log.info("GPIO line free again, watched from now on", ["input": names[index], "active": active])
            batch.append((LineChange(input: index, active: active, at: MonotonicInstant(nanoseconds: lastAt[index]), regained: true),
                          batch.count))
        }
        busyRetryAt = lines.waiting.isEmpty ? nil : monotonicMilliseconds() + Self.busyRetryMilliseconds
    }

    /// A line whose chip went away (an expander unbound, a driver crashed) can no longer be watched. It leaves the poll
    /// set (a negative fd is ignored by poll) and is reported once; the other inputs carry on. Its sensor is frozen
    /// from now on, so the report should make it a fault (its spot or lane `unknown`), never a silent state.
    private func lost(_ index: Int, reason: String) {
        slots[index].fd = -1
        guard let line = lines.lines[index] else { return }
        failed(InputLostError(input: index,
                           message: "GPIO: lost \(names[index]) on \(line.chip.label) line \(line.offset) (\(line.chip.name)): "
                               + "\(reason). The GPIO chip was removed or failed; check its wiring and the kernel log "
                               + "(dmesg), then restart the agent"))
    }
}
