#if canImport(Glibc)
import Glibc
#endif
import SystemIO

/// Where the running agent's status socket is, and the one request it answers.
///
/// Under systemd (`RuntimeDirectory=parkwise-agent`) the agent listens on
/// `$RUNTIME_DIRECTORY/status.sock` (`/run/parkwise-agent/status.sock`, mode 0660: the service's
/// group may read it); run by hand (a simulation, a replay) on `<outbox dir>/status.sock`.
public enum StatusSocket {
    public static let fileName = "status.sock"
    /// The service's runtime directory (deploy/systemd/parkwise-agent.service).
    public static let serviceDirectory = "/run/parkwise-agent"
    /// The request line a client sends; the agent answers with one JSON document and closes.
    public static let request = "status\n"
    /// A request longer than this is refused unread.
    public static let requestLimit = 256
    /// A sun_path holds 108 bytes with its terminating zero.
    public static let pathLimit = 107

    /// Where an agent started with this environment and outbox directory listens.
    public static func path(runtimeDirectory: String?, outboxPath: String) -> String {
        if let dir = runtimeDirectory?.split(separator: ":").first, !dir.isEmpty { return "\(dir)/\(fileName)" }
        return "\(outboxPath)/\(fileName)"
    }

    /// Where a client looks, in order: the config's outbox directory (a run by hand), this environment's
    /// `RUNTIME_DIRECTORY` (a client run from the service's unit), then the service's.
    public static func candidates(outboxPath: String?) -> [String] {
        let runtime = getenv("RUNTIME_DIRECTORY").map { String(cString: $0) }.flatMap { $0.split(separator: ":").first }
        return (outboxPath.map { ["\($0)/\(fileName)"] } ?? []) + (runtime.map { ["\($0)/\(fileName)"] } ?? [])
            + ["\(serviceDirectory)/\(fileName)"]
    }

    /// Fills a unix socket address; nil when the path does not fit.
    public static func address(_ path: String) -> sockaddr_un? {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= pathLimit else { return nil }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }

    /// `connect(2)` to a unix socket path; the errno on failure, nil once connected.
    static func connect(_ fd: Int32, to path: String) -> Errno? {
        guard var addr = address(path) else { return .nameTooLong }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return rc == 0 ? nil : .current
    }

    /// Sets SO_RCVTIMEO and SO_SNDTIMEO.
    public static func setTimeouts(_ fd: Int32, seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
}
