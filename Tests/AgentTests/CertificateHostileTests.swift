import Foundation
import Synchronization
import TestSupport
import Testing
import ServiceSetup
import MQTT

/// A broker is not trusted before its certificate is verified: whatever bytes it sends as a certificate, `doctor`
/// reads an answer or nil, and never traps.
struct CertificateHostileTests {
    /// SEQUENCE { SEQUENCE { serial, signature, issuer, validity { notBefore, notAfter }, subject } }, short lengths.
    static func certificate(notAfter: [UInt8], tag: UInt8 = 0x18) -> [UInt8] {
        func tlv(_ tag: UInt8, _ body: [UInt8]) -> [UInt8] { [tag, UInt8(body.count)] + body }
        let validity = tlv(0x30, tlv(0x17, Array("260101000000Z".utf8)) + tlv(tag, notAfter))
        let subject = tlv(0x30, [0x06, 0x03, 0x55, 0x04, 0x03] + tlv(0x0C, Array("broker".utf8)))
        let tbs = tlv(0x30, tlv(0x02, [1]) + tlv(0x30, []) + tlv(0x30, []) + validity + subject)
        return tlv(0x30, tbs)
    }

    @Test func farExpiryDatesAreShownNotTrapped() throws {
        // RFC 5280: 99991231235959Z means "no well-defined expiration"; past 2262 in nanoseconds overflowed.
        let info = try #require(CertificateInfo.der(Self.certificate(notAfter: Array("99991231235959Z".utf8))))
        #expect(info.commonName == "broker")
        let (date, days) = info.expiry(now: 1_800_000_000)
        #expect(date == "9999-12-31")
        #expect(days > 2_900_000)
        let utc = try #require(CertificateInfo.der(Self.certificate(notAfter: Array("491231235959Z".utf8), tag: 0x17)))
        #expect(utc.expiry(now: 0).date == "2049-12-31")
    }

    /// A board whose clock is a year behind (no RTC, NTP not reached): its certificates are "not valid yet". Doctor says
    /// so with both dates and blames the clock, not the CA, the host name or the broker (issue 33: it said ✓ "valid
    /// until 2029" and blamed the broker's CA).
    @Test func aCertificateNotValidYetByTheBoardsClockBlamesTheClock() throws {
        let info = try #require(CertificateInfo.der(Self.certificate(notAfter: Array("20291231235959Z".utf8))))
        let yearBehind: Int64 = 1_748_736_000   // 2025-06-01, the certificate's notBefore is 2026-01-01
        #expect(info.notYetValid(now: yearBehind) == "2026-01-01")
        let step = BrokerProbe.expiryStep(info, what: "TLS CA file", owner: .siteCA, now: yearBehind)
        #expect(step.status == .failed)
        #expect(step.title == "TLS CA file (CN broker) not valid until 2026-01-01: this board's clock says 2025-06-01", "\(step.title)")
        #expect(step.fix?.contains("this board's clock is behind") == true && step.fix?.contains("not at fault") == true)
        let cause = try #require(BrokerProbe.handshakeCause(peer: info, now: yearBehind))
        #expect(cause.hasPrefix("the broker's certificate (CN broker) is valid from 2026-01-01 but this board's clock is behind"), "\(cause)")
        // With the clock right: valid, and no cause in its dates.
        let inTime: Int64 = 1_780_000_000   // 2026-05-28
        #expect(info.notYetValid(now: inTime) == nil && BrokerProbe.handshakeCause(peer: info, now: inTime) == nil)
        #expect(BrokerProbe.expiryStep(info, what: "TLS CA file", owner: .siteCA, now: inTime).status == .ok)
    }

    @Test func numbersThatAreNotASCIIDigitsAreRefused() {
        // "½" and "٣" are numbers to Character.isNumber but not to Int64(_:).
        #expect(CertificateInfo.der(Self.certificate(notAfter: Array("½½1231235959Z".utf8), tag: 0x17)) == nil)
        #expect(CertificateInfo.der(Self.certificate(notAfter: Array("٣٣٣٣1231235959Z".utf8))) == nil)
    }

    @Test func truncatedMutatedAndRandomBytesNeverTrap() throws {
        let pki = try TestPKI()
        let pem = try Data(contentsOf: URL(fileURLWithPath: pki.ca))
        let lines = String(decoding: pem, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("-----") }
        let der = try #require(Data(base64Encoded: lines.joined()).map(Array.init))
        #expect(CertificateInfo.der(der) != nil)
        for length in 0..<der.count { _ = CertificateInfo.der(Array(der.prefix(length))) }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            var bytes = der
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[at] = [0x00, 0x7F, 0x80, 0x81, 0x84, 0xFF, UInt8.random(in: 0...255, using: &generator)]
                    .randomElement(using: &generator)!
            }
            if let info = CertificateInfo.der(bytes) { _ = info.expiry(now: 1_800_000_000) }
        }
        for _ in 0..<3000 {
            let bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if let info = CertificateInfo.der([0x30, 0x81] + bytes) { _ = info.expiry(now: 0) }
            _ = CertificateInfo.pem(bytes)
        }
    }
}

extension CertificateHostileTests {
    /// The whole way doctor reads a broker's certificate: a "broker" on loopback that answers every hello with a bare
    /// TLS Certificate message. The probe's TLS handshake fails, its certificate read goes on, and what it reads is
    /// shown, a hostile date refused, nothing traps.
    @Test func aBrokerCertificateForeverIsShown() throws {
        try probe(notAfter: "99991231235959Z", expecting: "valid until 9999-12-31")
    }

    @Test func aBrokerCertificateWithAHostileDateIsNotRead() throws {
        try probe(notAfter: "٣٣٣٣1231235959Z", expecting: "expiry date not read")
    }

    private func probe(notAfter: String, expecting expected: String) throws {
        let certificate = Self.certificate(notAfter: Array(notAfter.utf8))
        func u24(_ n: Int) -> [UInt8] { [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] }
        let list = u24(certificate.count) + certificate
        let message = [0x0B] + u24(list.count + 3) + u24(list.count) + list
        let record: [UInt8] = [0x16, 0x03, 0x03, UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        let server = try HelloServer(answer: record)
        defer { server.stop() }
        var settings = LinkSettings(brokers: [], clientID: "doctor-test", keepaliveSeconds: 5, will: nil, subscriptions: [])
        settings.protocolVersion = 5
        let steps = BrokerProbe.run(settings: settings, broker: .init(host: "127.0.0.1", port: server.port, tls: true),
                                    topics: .init(echo: "t/doctor", commands: "t/cmd/+"), timeout: 2)
        let titles = steps.map(\.title)
        #expect(titles.contains { $0.hasPrefix("TLS handshake") && !$0.contains("verified") }, "\(titles)")
        #expect(titles.contains { $0.contains(expected) }, "\(titles)")
    }
}

/// Accepts connections on a loopback port and answers each with the same bytes, then closes it.
private final class HelloServer: Sendable {
    let port: Int
    private let listener: Int32
    private let stopping: Flag
    private let done: Flag

    private final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    init(answer: [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        listener = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        guard bound == 0, listen(fd, 8) == 0 else { throw HarnessError("cannot listen on loopback") }
        let stopping = Flag(), done = Flag()
        self.stopping = stopping
        self.done = done
        Thread {
            while !stopping.value.load(ordering: .acquiring) {
                var slot = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&slot, 1, 100) > 0 else { continue }
                let client = accept(fd, nil, nil)
                guard client >= 0 else { continue }
                _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                shutdown(client, Int32(SHUT_WR))
                var sink = [UInt8](repeating: 0, count: 4096)
                var wait = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                while poll(&wait, 1, 1000) > 0, recv(client, &sink, sink.count, 0) > 0 {}
                close(client)
            }
            done.value.store(true, ordering: .releasing)
        }.start()
    }

    func stop() {
        stopping.value.store(true, ordering: .releasing)
        _ = eventually(5) { done.value.load(ordering: .acquiring) }
        close(listener)
    }
}
