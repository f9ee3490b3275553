import CMosquitto
import Glibc

/// Wakes the link's thread out of its poll(): a publish from another thread that left bytes to write, or a stop.
/// An eventfd, polled beside the broker's socket; signals before the thread reads it add up to one wake-up.
final class LinkWakeup: Sendable {
    let fd: Int32

    /// nil when the process is out of descriptors; `errno` tells why.
    init?() {
        fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        if fd < 0 { return nil }
    }

    deinit { close(fd) }

    func signal() {
        var one: UInt64 = 1
        while write(fd, &one, 8) < 0, errno == EINTR {}
    }

    /// Resets it after poll() reported it readable.
    func drain() {
        var count: UInt64 = 0
        _ = read(fd, &count, 8)
    }

    /// Waits until signalled or `seconds` have passed; true if signalled.
    func wait(seconds: Double) -> Bool {
        var slot = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&slot, 1, Int32(min(max(0, seconds * 1000), Double(Int32.max)).rounded(.up)))
        if ready > 0 { drain() }
        return ready > 0
    }
}
