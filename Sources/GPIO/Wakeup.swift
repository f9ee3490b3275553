import SystemIO
import Glibc

/// The stop signal of the event thread: a descriptor the thread polls next to the line event fds.
///
/// This is a pipe, not an eventfd: Swift's Glibc module does not export <sys/eventfd.h> (nor pipe2), and
/// this module may not add a C shim of its own. Once Sources/CGPIOD/shim.h includes <sys/eventfd.h>,
/// `init?` can become `eventfd(0, EFD_CLOEXEC)` with `readFD == writeFD` and nothing else changes.
final class Wakeup: Sendable {
    /// Becomes readable (POLLIN) once `signal()` was called, and stays so.
    let readFD: Int32
    private let writeFD: Int32

    /// nil when the process is out of descriptors; `errno` tells why.
    init?() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        // Not atomic with pipe() (no pipe2 here): a fork+exec racing this line could inherit the pipe, which is harmless.
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)  // signal() never blocks, however often it is called
        readFD = ends[0]
        writeFD = ends[1]
    }

    deinit {
        close(readFD)
        close(writeFD)
    }

    func signal() {
        var byte: UInt8 = 1
        _ = retryingOnInterrupt { write(writeFD, &byte, 1) }
        // EAGAIN means the pipe is full of earlier signals: readable already.
    }
}
