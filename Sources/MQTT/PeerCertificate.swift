import ServiceSetup
import Glibc
import ParkWiseLog
import SystemIO

/// The broker's own certificate, to show its expiry date: a TLS 1.2 ClientHello is sent and the Certificate
/// message the server answers with (in clear in TLS 1.2) is read; then the connection is dropped. No handshake
/// is completed and nothing is trusted from it (libmosquitto verifies the broker on the real connection).
/// nil when the broker does not answer this way in `timeout` (TLS 1.3 only, not TLS at all).
enum PeerCertificate {
    /// What the port answered to a TLS hello.
    enum Answer: Equatable {
        case certificate(CertificateInfo)
        /// Bytes that are no TLS record, or the connection closed with no TLS record at all: a plain listener (a
        /// plain MQTT broker takes the hello for a malformed packet and hangs up). A TLS server answers with a
        /// record, if only an alert.
        case notTLS
        /// No certificate read (a TLS 1.3-only listener, an alert, no answer in time).
        case unknown
    }

    static func fetch(_ addresses: [Address], host: String, port: Int, timeout: Double) -> CertificateInfo? {
        if case .certificate(let info) = answer(addresses, host: host, port: port, timeout: timeout) { return info }
        return nil
    }

    static func answer(_ addresses: [Address], host: String, port: Int, timeout: Double) -> Answer {
        guard case .success(let connected) = NetworkProbe.open(addresses, port: port, timeout: timeout) else { return .unknown }
        let fd = connected.fd
        defer { close(fd) }
        let deadline = monotonicSeconds() + timeout
        let hello = clientHello(host: host)
        var sent = 0
        while sent < hello.count {
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard retryingOnInterrupt({ poll(&pfd, 1, remainingMs(deadline)) }) > 0 else { return .unknown }
            let n = retryingOnInterrupt { hello.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) } }
            if n < 0 && Errno.current == .wouldBlock { continue }
            guard n > 0 else { return .unknown }
            sent += n
        }
        var received: [UInt8] = []
        var handshake: [UInt8] = []
        var anyRecord = false
        var buffer = [UInt8](repeating: 0, count: 16_384)
        // Bounded in all: a hostile server streaming handshake records that never complete a certificate must not
        // grow doctor until the timeout (at loopback speed, gigabytes).
        while received.count + handshake.count < 256 * 1024 {
            // Whole records so far: handshake bytes collected, an alert ends it.
            if let first = received.first, !(0x14...0x17).contains(first) { return .notTLS }
            while received.count >= 5 {
                let length = Int(received[3]) << 8 | Int(received[4])
                guard received.count >= 5 + length else { break }
                anyRecord = true
                if received[0] == 0x15 { return .unknown }
                if received[0] == 0x16 { handshake += received[5..<5 + length] }
                received.removeFirst(5 + length)
            }
            if let certificate = firstCertificate(handshake) { return CertificateInfo.der(certificate).map { .certificate($0) } ?? .unknown }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard retryingOnInterrupt({ poll(&pfd, 1, remainingMs(deadline)) }) > 0 else { return .unknown }
            let n = retryingOnInterrupt { buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } }
            if n < 0 && Errno.current == .wouldBlock { continue }
            // Closed or reset (the hello's unread rest in its buffer makes the close a reset): a TLS server says why in an
            // alert record first; a plain listener just hangs up.
            guard n > 0 else { return (n == 0 || errno == ECONNRESET) && !anyRecord && received.isEmpty ? .notTLS : .unknown }
            received += buffer[..<n]
        }
        return .unknown
    }

    private static func remainingMs(_ deadline: Double) -> Int32 { Int32(max(0, (deadline - monotonicSeconds()) * 1000)) }

    /// The first certificate (DER) of a Certificate handshake message among `bytes`, once it is complete.
    static func firstCertificate(_ bytes: [UInt8]) -> [UInt8]? {
        var i = 0
        while i + 4 <= bytes.count {
            let length = Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            guard i + 4 + length <= bytes.count else { return nil }
            if bytes[i] == 0x0B, length >= 6 {
                let first = i + 7
                let certLength = Int(bytes[first]) << 16 | Int(bytes[first + 1]) << 8 | Int(bytes[first + 2])
                guard first + 3 + certLength <= i + 4 + length else { return nil }
                return Array(bytes[(first + 3)..<(first + 3 + certLength)])
            }
            i += 4 + length
        }
        return nil
    }

    /// A TLS 1.2 ClientHello with the usual ECDHE/RSA AES-GCM and ChaCha20 suites, SNI for a host name.
    static func clientHello(host: String) -> [UInt8] {
        func u16(_ n: Int) -> [UInt8] { [UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }
        func u24(_ n: Int) -> [UInt8] { [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }
        func ext(_ type: Int, _ body: [UInt8]) -> [UInt8] { u16(type) + u16(body.count) + body }
        let suites: [Int] = [0xC02F, 0xC030, 0xC02B, 0xC02C, 0xCCA8, 0xCCA9, 0x009E, 0x009F, 0x009C, 0x009D, 0x002F, 0x0035]
        var extensions: [UInt8] = []
        let isAddress = host.allSatisfy { $0.isNumber || $0 == "." } || host.contains(":")
        if !isAddress {
            let name = Array(host.utf8)
            var serverName = u16(name.count + 3)
            serverName.append(0)
            serverName += u16(name.count)
            serverName += name
            extensions += ext(0x0000, serverName)
        }
        let groups: [Int] = [0x001D, 0x0017, 0x0018]
        extensions += ext(0x000A, u16(groups.count * 2) + groups.flatMap(u16))
        extensions += ext(0x000B, [1, 0])
        let signatures: [Int] = [0x0403, 0x0503, 0x0603, 0x0804, 0x0805, 0x0806, 0x0401, 0x0501, 0x0601, 0x0201, 0x0203]
        extensions += ext(0x000D, u16(signatures.count * 2) + signatures.flatMap(u16))
        var random = [UInt8](repeating: 0, count: 32)
        for i in random.indices { random[i] = UInt8.random(in: 0...255) }
        // Appended piece by piece: one long `+` chain takes Swift 6.0's type checker too long.
        var body: [UInt8] = [0x03, 0x03]
        body += random
        body.append(0)                                   // no session id
        body += u16(suites.count * 2)
        body += suites.flatMap(u16)
        body += [1, 0]                                   // compression: none
        body += u16(extensions.count)
        body += extensions
        var handshake: [UInt8] = [0x01]
        handshake += u24(body.count)
        handshake += body
        var record: [UInt8] = [0x16, 0x03, 0x01]
        record += u16(handshake.count)
        record += handshake
        return record
    }
}
