import Foundation
import TestSupport
import Testing
import ServiceSetup

/// The DER walker against certificates openssl made: the same notAfter and CN as `openssl x509` prints.
struct CertificateInfoTests {
    @Test func notAfterAndCommonNameMatchOpenssl() throws {
        let pki = try TestPKI()
        let pem = try Data(contentsOf: URL(fileURLWithPath: pki.ca))
        let info = try #require(CertificateInfo.pem(Array(pem)))
        #expect(info.commonName == "ParkWise test CA")
        let openssl = try Child("/usr/bin/openssl", ["x509", "-in", pki.ca, "-noout", "-enddate"])
        #expect(openssl.wait(10) == 0)
        // notAfter=Dec  3 08:52:10 2026 GMT
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "MMM d HH:mm:ss yyyy zzz"
        let text = openssl.stdout.dropFirst("notAfter=".count).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let date = try #require(formatter.date(from: text), "\(text)")
        #expect(info.notAfter == Int64(date.timeIntervalSince1970))
        let (_, days) = info.expiry(now: Int64(Date().timeIntervalSince1970))
        // Two days from openssl, less the seconds since (1); 2 only if the wall clock stepped back meanwhile.
        #expect((1...2).contains(days), "\(info.notAfter) \(Date().timeIntervalSince1970) \(text)")
        #expect(CertificateInfo.pem(Array("not a certificate".utf8)) == nil)
    }
}
