import Foundation

/// systemd's end of a `Type=notify` unit's notify socket: a bound unix datagram socket in `dir` (pass `path` as
/// `NOTIFY_SOCKET`), read with a 10 s deadline per message.
public final class NotifySocket {
    public let path: String
    private let fd: Int32

    public init(_ dir: URL) throws {
        path = dir.appendingPathComponent("notify").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in path.utf8.enumerated() { raw[i] = b } }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, bound == 0 else { throw HarnessError("cannot bind the notify socket \(path): errno \(errno)") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// The next message, nil after 10 s without one.
    public func next() -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
    }
}
