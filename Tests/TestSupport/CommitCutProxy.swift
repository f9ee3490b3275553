import Foundation

/// A TCP proxy on 127.0.0.1 in front of PostgreSQL that can lose the reply to a COMMIT: once armed, the first
/// CommandComplete `COMMIT` a server sends is not forwarded and that connection is cut both ways, as when the primary
/// dies after the commit and before its reply reaches the client. The transaction is committed on the server; the
/// client only sees its connection lost. (It reads the server's messages, so clients connect with sslmode=disable.)
public final class CommitCutProxy: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    private let target: Int
    private let lock = NSLock()
    private var armed = false
    private var cuts = 0
    private var sockets: [Int32] = []
    private var stopped = false

    public init(to target: Int) throws {
        self.target = target
        (listener, port) = try loopbackListener()
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// The next COMMIT's reply is lost.
    public func armCut() { lock.withLock { armed = true } }

    /// How many COMMIT replies were lost so far.
    public var cutCount: Int { lock.withLock { cuts } }

    /// Closes the listener and every connection.
    public func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
            sockets = []
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard let upstream = connectLoopback(target) else {
                close(client)   // the server is gone: the client sees its connection refused, as without the proxy
                continue
            }
            lock.withLock { sockets += [client, upstream] }
            Thread.detachNewThread { [self] in forward(from: client, to: upstream) }
            Thread.detachNewThread { [self] in forwardReplies(from: upstream, to: client) }
        }
    }

    private func forward(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            _ = buffer.withUnsafeBytes { send(to, $0.baseAddress, n, Int32(MSG_NOSIGNAL)) }
        }
        shutdown(to, Int32(SHUT_WR))
    }

    /// The server's messages (a type byte, then a 4-byte length that counts itself), forwarded whole, one by one.
    private func forwardReplies(from server: Int32, to client: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        var stream: [UInt8] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            stream += buffer[..<n]
            while stream.count >= 5 {
                let length = stream[1...4].reduce(0) { $0 << 8 | Int($1) }
                guard stream.count >= 1 + length else { break }
                let message = Array(stream[..<(1 + length)])
                stream.removeFirst(1 + length)
                if isCommitDone(message) && takeCut() {
                    shutdown(client, Int32(SHUT_RDWR))
                    shutdown(server, Int32(SHUT_RDWR))
                    return
                }
                _ = message.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
        shutdown(client, Int32(SHUT_WR))
    }

    /// CommandComplete ('C') with the tag COMMIT.
    private func isCommitDone(_ message: [UInt8]) -> Bool {
        message[0] == UInt8(ascii: "C") && message[5...].starts(with: Array("COMMIT".utf8))
    }

    private func takeCut() -> Bool {
        lock.withLock {
            guard armed else { return false }
            armed = false
            cuts += 1
            return true
        }
    }
}
