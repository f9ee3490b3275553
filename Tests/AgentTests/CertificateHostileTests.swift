import Foundation
import TestSupport
import Testing
import Uplink

/// A broker is not trusted before its certificate is verified: whatever bytes it sends as a certificate, `doctor`
/// reads an answer or nil, and never traps.
struct CertificateHostileTests {
    /// SEQUENCE { SEQUENCE { serial, signature, issuer, validity { notBefore, notAfter }, subject } }, short lengths.
    private static func certificate(notAfter: [UInt8], tag: UInt8 = 0x18) -> [UInt8] {
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
