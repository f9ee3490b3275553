import Glibc

/// systemd's readiness and watchdog protocol (sd_notify(3)) without libsystemd: one datagram a
/// message to the unix socket in `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).
/// Without the variable (not under systemd, `Type=simple`) every call does nothing. The watchdog is
/// fed from the event loop, so a loop that hangs stops feeding it and systemd restarts the agent. The agent and the
/// bridge both use it (`Type=notify` units).
public final class ServiceNotifier: Sendable {
    private let address: sockaddr_un?
    private let length: socklen_t
    private let fd: Int32
    /// How often to feed the watchdog (half of `$WATCHDOG_USEC`), nil when systemd watches nothing.
    public let watchdogInterval: Duration?
    /// The environment variables it reads.
    public static let variables = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"]

    public init(environment: [String: String]) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty, path.utf8.count < capacity,
              path.hasPrefix("/") || path.hasPrefix("@") else {
            self.address = nil
            length = 0
            fd = -1
            watchdogInterval = nil
            return
        }
        var bytes = Array(path.utf8)
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }   // abstract namespace
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
        }
        self.address = address
        length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let usec = environment["WATCHDOG_USEC"].flatMap { Int64($0) } ?? 0
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        watchdogInterval = usec > 0 && forUs ? .microseconds(usec / 2) : nil
    }

    deinit { if fd >= 0 { close(fd) } }

    /// `READY=1`: started (the agent: lines requested, the event loop running; the bridge: the broker reached).
    public func ready() { send("READY=1\nSTATUS=running") }

    /// `WATCHDOG=1`: the event loop is alive.
    public func alive() { send("WATCHDOG=1") }

    /// `STOPPING=1`: a graceful stop has begun.
    public func stopping() { send("STOPPING=1") }

    /// `STATUS=`: why the program is about to exit with `code`. systemd keeps the text after the process ended, so
    /// `systemctl status` shows it beside "status=78" and during the restart delay, when the journal's excerpt often
    /// holds only systemd's own lines (systemd #7748). systemd reads its notify socket before it reaps the process.
    public func exiting(code: Int32, reason: String?) {
        let text = reason.map { "exit \(code): \($0)" } ?? "exit \(code)"
        send("STATUS=" + text.replacing("\n", with: " "))
    }

    private func send(_ message: String) {
        guard var address = address, fd >= 0 else { return }
        let bytes = Array(message.utf8)
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sockaddr, length) }
            }
        }
    }
}
