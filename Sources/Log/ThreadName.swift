#if canImport(Glibc)
import Glibc
#endif

/// Names the calling thread (at most 15 bytes) as `top -H`, `ps -L` and /proc/PID/task/*/comm show it, so a
/// thread's wake-ups and CPU can be told apart (pw-loop, pw-mqtt, pw-gpio). Best effort: nothing fails without it.
public func nameThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
