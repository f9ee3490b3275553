import CMosquitto
import Glibc
import SystemIO

/// Wakes a thread out of its poll(): the link's (a publish from another thread that left bytes to write, or a stop),
/// or the event loop's (an input posted into its inbox).
/// An eventfd, polled beside the broker's socket; signals before the thread reads it add up to one wake-up.
public final class LinkWakeup: Sendable {
    public let fd: Int32

    /// nil when the process is out of descriptors; `errno` tells why.
    public init?() {
        fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        if fd < 0 { return nil }
    }

    deinit { close(fd) }

    public func signal() {
        var one: UInt64 = 1
        _ = retryingOnInterrupt { write(fd, &one, 8) }
    }

    /// Resets it after poll() reported it readable.
    public func drain() {
        var count: UInt64 = 0
        _ = read(fd, &count, 8)
    }

    /// Waits until signalled or `seconds` have passed (`.infinity`: until signalled); true if signalled.
    public func wait(seconds: Double) -> Bool {
        var slot = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let timeout = seconds.isInfinite ? -1 : Int32(min(max(0, seconds * 1000), Double(Int32.max)).rounded(.up))
        let ready = poll(&slot, 1, timeout)
        if ready > 0 { drain() }
        return ready > 0
    }
}
