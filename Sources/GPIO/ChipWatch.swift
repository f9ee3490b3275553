import Glibc

/// Notices a GPIO chip removed under the agent without waking periodically. On Linux 6.1 (Debian 12) a removed chip
/// does not wake a poll() already waiting on its line fds; a poll() made after the removal reports them hung up. The
/// chip's device node (/dev/gpiochipN) goes away with it, so an inotify watch on /dev for deleted nodes tells the
/// event thread when to look again. Without inotify (`fd` -1) the thread falls back to looking every few seconds.
final class ChipWatch {
    let fd: Int32

    init() {
        var fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        if fd >= 0 && inotify_add_watch(fd, "/dev", UInt32(IN_DELETE)) < 0 {
            close(fd)
            fd = -1
        }
        self.fd = fd
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Reads the pending notices (which node went does not matter: the line fds tell which inputs are lost).
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }
}
