import Glibc
import ParkWiseCore
import ParkWiseLog

/// The one dedicated thread (a pthread, outside the Swift concurrency pool) that waits for line events.
/// It sleeps in poll() on the line event fds, the wakeup fd and a watch on /dev (`ChipWatch`): it wakes for edges, a
/// stop, or a removed device node, never periodically (without inotify, every few seconds to notice a removed chip).
final class EventThread: Sendable {
    private let thread: pthread_t
    private let wakeup: Wakeup

    private init(thread: pthread_t, wakeup: Wakeup) {
        self.thread = thread
        self.wakeup = wakeup
    }

    /// Starts the thread. `names` describe the inputs (same order as the lines) for the message of a lost line.
    /// Running out of descriptors, memory or threads here leaves no input watched: reported through `failed` with
    /// input nil (as a poll failure later would be), and nil is returned.
    static func start(lines: LineSet, names: [String], deliver: @escaping @Sendable ([LineChange]) -> Void,
                      failed: @escaping @Sendable (GPIOFailure) -> Void) -> EventThread? {
        func cannot(_ what: String, _ number: Int32) -> EventThread? {
            failed(GPIOFailure(input: nil, message: "GPIO: cannot \(what): \(errnoText(number)); no input is watched, "
                                   + "restart the agent"))
            return nil
        }
        guard let wakeup = Wakeup() else { return cannot("create the event thread's wakeup pipe", Glibc.errno) }
        let buffer: EdgeBuffer
        do {
            buffer = try EdgeBuffer.make()
        } catch {
            return cannot("allocate the event thread's edge buffer", error.errno)
        }
        let loop = EventLoop(lines: lines, names: names, wakeup: wakeup, buffer: buffer, deliver: deliver, failed: failed)
        // The loop (with the line handles) is handed to the new thread through the opaque context pointer and is
        // used only there: the starting thread keeps no reference to it.
        let context = Unmanaged.passRetained(loop).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let loop = Unmanaged<EventLoop>.fromOpaque(context).takeRetainedValue()
            loop.run()
            return nil
        }, context)
        guard status == 0 else {
            Unmanaged<EventLoop>.fromOpaque(context).release()
            return cannot("start the event thread", status)
        }
        return EventThread(thread: thread, wakeup: wakeup)
    }

    /// Wakes the thread and waits until it has returned. Called from the thread itself (from `deliver`),
    /// it cannot wait for itself: it detaches instead, and the thread ends as soon as `deliver` returns.
    func stopAndJoin() {
        wakeup.signal()
        if pthread_equal(pthread_self(), thread) != 0 {
            pthread_detach(thread)
        } else {
            pthread_join(thread, nil)
        }
    }
}

/// What runs on the event thread. Owns the thread's edge buffer; shares the line handles with nobody while it runs.
private final class EventLoop {
    private let lines: LineSet
    private let names: [String]
    private let wakeup: Wakeup
    private let deliver: @Sendable ([LineChange]) -> Void
    private let failed: @Sendable (GPIOFailure) -> Void
    private let buffer: EdgeBuffer
    private let chips = ChipWatch()

    init(lines: LineSet, names: [String], wakeup: Wakeup, buffer: EdgeBuffer,
         deliver: @escaping @Sendable ([LineChange]) -> Void, failed: @escaping @Sendable (GPIOFailure) -> Void) {
        self.lines = lines
        self.names = names
        self.wakeup = wakeup
        self.buffer = buffer
        self.deliver = deliver
        self.failed = failed
    }

    /// A chip removed under the agent does not wake poll() on Linux 6.1 (Debian 12), but a poll() made after
    /// the removal reports its line fds as hung up: so after a device node left /dev the thread looks again, at once
    /// and after these delays (the node may go before the chip's lines are marked gone), and without inotify it
    /// looks every `recheckMilliseconds` while idle.
    static let recheckMilliseconds: Int32 = 5000
    static let recheckAfterRemoval: [Int64] = [200, 1000, 5000]

    func run() {
        nameThread("pw-gpio")
        let input = Int16(POLLIN)
        // Slot 0 is the wakeup; slot i + 1 is input i.
        var slots = [pollfd(fd: wakeup.readFD, events: input, revents: 0)]
        slots += lines.lines.map { pollfd(fd: $0.eventFD, events: input, revents: 0) }
        // Last slot: the watch on /dev (-1 without inotify: poll ignores it).
        slots.append(pollfd(fd: chips.fd, events: input, revents: 0))
        let watchSlot = slots.count - 1
        var rechecks: [Int64] = []   // monotonic ms: look again then, after a device node left /dev
        var edges: [RawEdge] = []
        var batch: [(change: LineChange, sequence: Int)] = []

        while true {
            let now = rechecks.isEmpty ? 0 : monotonicMilliseconds()   // the clock only matters for a recheck
            rechecks.removeAll { $0 <= now }
            let timeout = rechecks.first.map { Int32(clamping: $0 - now) } ?? (chips.fd >= 0 ? -1 : Self.recheckMilliseconds)
            let ready = slots.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeout) }
            if ready < 0 {
                let number = Glibc.errno
                if number == EINTR || number == EAGAIN { continue }
                // Not a line's fault (EFAULT, EINVAL, ENOMEM): nothing can be watched any more.
                failed(GPIOFailure(input: nil, message: "GPIO: poll() on the line event fds failed: \(errnoText(number)); "
                                       + "no input is watched any more, restart the agent"))
                return
            }
            if slots[0].revents != 0 { return }  // stop() was called
            if slots[watchSlot].revents != 0 {
                chips.drain()
                let at = monotonicMilliseconds()
                rechecks = Self.recheckAfterRemoval.map { at + $0 }
            }

            batch.removeAll(keepingCapacity: true)
            for slot in 1..<watchSlot where slots[slot].revents != 0 {
                let index = slot - 1
                guard slots[slot].revents & input != 0 else {
                    lost(index, reason: "its event descriptor reported an error or hang-up (revents \(slots[slot].revents))",
                         slot: &slots[slot])
                    continue
                }
                edges.removeAll(keepingCapacity: true)
                do {
                    try lines.lines[index].readEdges(using: buffer, into: &edges)
                } catch {
                    if error.errno == EINTR || error.errno == EAGAIN { continue }
                    lost(index, reason: "reading its events failed: \(errnoText(error.errno))", slot: &slots[slot])
                    continue
                }
                for edge in edges {
                    let change = LineChange(input: index, active: edge.rising, at: MonotonicInstant(nanoseconds: edge.nanoseconds))
                    batch.append((change, batch.count))
                }
            }
            guard !batch.isEmpty else { continue }
            // Kernel timestamp order across lines; the sequence keeps one line's equal-time edges in the order read.
            batch.sort { ($0.change.at, $0.sequence) < ($1.change.at, $1.sequence) }
            deliver(batch.map(\.change))
        }
    }

    /// A line whose chip went away (an expander unbound, a driver crashed) can no longer be watched. It leaves the poll
    /// set (a negative fd is ignored by poll) and is reported once; the other inputs carry on. Its sensor is frozen
    /// from now on, so the report should make it a fault (its spot or lane `unknown`), never a silent state.
    private func lost(_ index: Int, reason: String, slot: inout pollfd) {
        slot.fd = -1
        slot.revents = 0
        let line = lines.lines[index]
        failed(GPIOFailure(input: index,
                           message: "GPIO: lost \(names[index]) on \(line.chip.label) line \(line.offset) (\(line.chip.name)): "
                               + "\(reason). The GPIO chip was removed or failed; check its wiring and the kernel log "
                               + "(dmesg), then restart the agent"))
    }
}
