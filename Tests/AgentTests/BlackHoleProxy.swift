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
        private var deaf = false
        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
        var isSilent: Bool {
            get { lock.withLock { silent } }
            set { lock.withLock { silent = newValue } }
        }
        /// The broker hears the client, the client no longer hears the broker (no PUBACK, no PINGRESP).
        var isDeaf: Bool {
            get { lock.withLock { deaf } }
            set { lock.withLock { deaf = newValue } }
        }
    }

    let port: Int
    private let listener: Int32
    private let target: Int
    private let lock = NSLock()
    private var connections: [Connection] = []
    private var stopped = false

    /// `refusingMQTT5`: a CONNECT of MQTT 5 is answered as a 3.1.1-only broker answers it (CONNACK 1, unacceptable
    /// protocol version) and closed; any other is forwarded.
    private let refusingMQTT5: Bool

    init(to target: Int, refusingMQTT5: Bool = false) throws {
        self.target = target
        self.refusingMQTT5 = refusingMQTT5
        (listener, port) = try loopbackListener()
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    func swallow() {
        lock.withLock { connections.forEach { $0.isSilent = true } }
    }

    /// Every connection open at that moment still carries what the client sends to the broker, but nothing back: a
    /// broker that records every publish and acknowledges none. New connections are forwarded normally.
    func deafen() {
        lock.withLock { connections.forEach { $0.isDeaf = true } }
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
            if refusingMQTT5 && BlackHoleProxy.connectLevel(client) == 5 {
                let refusal: [UInt8] = [0x20, 0x02, 0x00, 0x01]
                _ = refusal.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(client)
                continue
            }
            guard let upstream = connectLoopback(target) else { close(client); continue }
            let connection = Connection(client: client, upstream: upstream)
            let keep = lock.withLock { () -> Bool in
                guard !stopped else { return false }
                connections.append(connection)
                return true
            }
            guard keep else { close(client); close(upstream); return }
            Thread.detachNewThread { BlackHoleProxy.pump(from: client, to: upstream, connection, toClient: false) }
            Thread.detachNewThread { BlackHoleProxy.pump(from: upstream, to: client, connection, toClient: true) }
        }
    }

    /// The protocol level of the CONNECT the client sends first (peeked: it is still forwarded whole), if it comes
    /// within a few seconds.
    private static func connectLevel(_ client: Int32) -> UInt8? {
        var header = [UInt8](repeating: 0, count: 16)
        for _ in 0..<300 {
            let n = header.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, Int32(MSG_PEEK | MSG_DONTWAIT)) }
            if n == 0 { return nil }
            if n > 0, header[0] == 0x10 {
                // Fixed header, remaining length (1 to 4 bytes), then "\0\4MQTT" and the level.
                var at = 1
                while at < 5 && header[at] & 0x80 != 0 { at += 1 }
                let level = at + 1 + 6
                if n > level { return header[level] }
            }
            usleep(10_000)
        }
        return nil
    }

    private static func pump(from: Int32, to: Int32, _ connection: Connection, toClient: Bool) {
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            if connection.isSilent || (toClient && connection.isDeaf) { continue }
            _ = buffer.withUnsafeBytes { send(to, $0.baseAddress, n, Int32(MSG_NOSIGNAL)) }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}
