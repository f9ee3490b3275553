import Foundation
import Glibc

/// A loopback TCP relay in front of a broker that holds back everything the broker sends (PUBACKs,
/// CONNACK) by a random 5–20 ms, in order: a broker a network away, for the sustained-rate figures.
/// Benchmark only; one connection at a time is all the bench needs.
final class SlowBroker: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let upstream: Int

    init?(upstream: Int) {
        self.upstream = upstream
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { close(fd); return nil }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = loopback(port: upstream)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard connected else { close(client); close(server); continue }
            var on: Int32 = 1
            for fd in [client, server] { setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size)) }
            Thread.detachNewThread { relay(from: client, to: server, delayed: false) }
            Thread.detachNewThread { relay(from: server, to: client, delayed: true) }
        }
    }
}

private func loopback(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return address
}

/// Chunks waiting for their time, shared by the reading and the sending thread of one direction.
private final class DelayedChunks: @unchecked Sendable {
    private let condition = NSCondition()
    private var chunks: [(due: Double, bytes: [UInt8])] = []
    private var closed = false

    func put(_ bytes: [UInt8], due: Double) {
        condition.withLock { chunks.append((due, bytes)); condition.signal() }
    }

    func close() {
        condition.withLock { closed = true; condition.signal() }
    }

    /// The next chunk, waiting for one; nil once closed and empty.
    func take() -> (due: Double, bytes: [UInt8])? {
        condition.withLock {
            while chunks.isEmpty && !closed { condition.wait() }
            return chunks.isEmpty ? nil : chunks.removeFirst()
        }
    }
}

/// Copies bytes until either side closes; with `delayed`, each chunk leaves 5–20 ms after it came,
/// never before the chunk ahead of it.
private func relay(from source: Int32, to sink: Int32, delayed: Bool) {
    let queue = DelayedChunks()
    if delayed {
        Thread.detachNewThread {
            while let (due, bytes) = queue.take() {
                let wait = due - Date().timeIntervalSinceReferenceDate
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
                _ = bytes.withUnsafeBytes { send(sink, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }
    var buffer = [UInt8](repeating: 0, count: 65536)
    var lastDue = 0.0
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        if delayed {
            lastDue = max(lastDue, Date().timeIntervalSinceReferenceDate + Double.random(in: 0.005...0.020))
            queue.put(Array(buffer[..<n]), due: lastDue)
        } else {
            _ = buffer.withUnsafeBytes { send(sink, $0.baseAddress, n, Int32(MSG_NOSIGNAL)) }
        }
    }
    queue.close()
    shutdown(sink, Int32(SHUT_RDWR))
}
