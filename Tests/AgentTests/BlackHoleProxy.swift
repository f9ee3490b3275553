import Foundation
import TestSupport

/// A TCP proxy on 127.0.0.1 in front of a broker. `swallow()` makes every connection open at that
/// moment a black hole — bytes are read and dropped both ways, nothing is closed (a half-open link,
/// as when a cable is cut far away) — while new connections are forwarded normally.
final class BlackHoleProxy: @unchecked Sendable {
    final class Connection: @unchecked Sendable {
        let client: Int32
        let upstream: Int32
        private let lock = NSLock()
        private var silent = false
        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
        var isSilent: Bool {
            get { lock.withLock { silent } }
            set { lock.withLock { silent = newValue } }
        }
    }

    let port: Int
    private let listener: Int32
    private let target: Int
    private let lock = NSLock()
    private var connections: [Connection] = []
    private var stopped = false

    init(to target: Int) throws {
        self.target = target
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound, listen(fd, 8) == 0 else { throw HarnessError("proxy cannot listen") }
        listener = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    func swallow() {
        lock.withLock { connections.forEach { $0.isSilent = true } }
    }

    func stop() {
        lock.withLock {
            stopped = true
            for c in connections {
                shutdown(c.client, Int32(SHUT_RDWR))
                shutdown(c.upstream, Int32(SHUT_RDWR))
            }
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = UInt16(target).bigEndian
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard ok else { close(client); close(upstream); continue }
            let connection = Connection(client: client, upstream: upstream)
            let keep = lock.withLock { () -> Bool in
                guard !stopped else { return false }
                connections.append(connection)
                return true
            }
            guard keep else { close(client); close(upstream); return }
            Thread.detachNewThread { BlackHoleProxy.pump(from: client, to: upstream, connection) }
            Thread.detachNewThread { BlackHoleProxy.pump(from: upstream, to: client, connection) }
        }
    }

    private static func pump(from: Int32, to: Int32, _ connection: Connection) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            if connection.isSilent { continue }
            _ = buffer.withUnsafeBytes { send(to, $0.baseAddress, n, Int32(MSG_NOSIGNAL)) }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}
