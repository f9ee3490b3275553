import SystemIO
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
                      failed: @escaping @Sendable (InputLostError) -> Void) -> EventThread? {
        func cannot(_ what: String, _ number: Errno) -> EventThread? {
            failed(InputLostError(input: nil, message: "GPIO: cannot \(what): \(number.text); no input is watched, "
                                   + "restart the agent"))
            return nil
        }
        guard let wakeup = Wakeup() else { return cannot("create the event thread's wakeup pipe", .current) }
        let buffer: EdgeBuffer
        do {
            buffer = try EdgeBuffer.make()
        } catch {
            return cannot("allocate the event thread's edge buffer", error.errno)
        }
        let loop = EventLoop(watch: EdgeWatch(lines: lines, names: names, buffer: buffer, deliver: deliver, failed: failed),
                             wakeup: wakeup, failed: failed)
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
            return cannot("start the event thread", Errno(status))
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

/// What runs on the event thread: the edge watch's rounds, between polls that also watch the wakeup fd.
private final class EventLoop {
    private let watch: EdgeWatch
    private let wakeup: Wakeup
    private let failed: @Sendable (InputLostError) -> Void

    init(watch: EdgeWatch, wakeup: Wakeup, failed: @escaping @Sendable (InputLostError) -> Void) {
        self.watch = watch
        self.wakeup = wakeup
        self.failed = failed
    }

    func run() {
        nameThread("pw-gpio")
        while true {
            // Slot 0 is the wakeup; then the watch's slots.
            var slots = [pollfd(fd: wakeup.readFD, events: Int16(POLLIN), revents: 0)] + watch.slots
            // The timeout is computed again for a poll made again after a signal.
            let ready = retryingOnInterrupt {
                let timeout = watch.due().map { Int32(clamping: max(0, $0 - monotonicMilliseconds())) } ?? -1
                return slots.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeout) }
            }
            if ready < 0 {
                let number = Errno.current
                if number == .wouldBlock { continue }
                // Not a line's fault (EFAULT, EINVAL, ENOMEM): nothing can be watched any more.
                failed(InputLostError(input: nil, message: "GPIO: poll() on the line event fds failed: \(number.text); "
                                       + "no input is watched any more, restart the agent"))
                return
            }
            if slots[0].revents != 0 { return }  // stop() was called
            watch.round(revents: slots.dropFirst().map(\.revents))
        }
    }
}
