import FoundationEssentials
import ParkWiseContract

/// The parts of an X.509 certificate a technician needs: whose it is and when it expires. Read from DER
/// (or the first certificate of a PEM file) with a small DER walker; nothing is verified here
/// (libmosquitto's TLS does that).
public struct CertificateInfo: Sendable, Equatable {
    /// The subject's common name, when it has one.
    public var commonName: String?
    /// notAfter, seconds since 1970 (UTC).
    public var notAfter: Int64
    /// notBefore, seconds since 1970 (UTC), when it could be read.
    public var notBefore: Int64?

    public init(commonName: String?, notAfter: Int64, notBefore: Int64? = nil) {
        self.commonName = commonName
        self.notAfter = notAfter
        self.notBefore = notBefore
    }

    /// The date it becomes valid ("2026-12-01") when `now` is before it: a clock behind (a board without an RTC before
    /// NTP set it), not a certificate at fault. Nil once valid (or when notBefore was not read).
    public func notYetValid(now unixSeconds: Int64) -> String? {
        guard let notBefore, unixSeconds < notBefore else { return nil }
        return String(WireTimeDate.format(unixSeconds: notBefore))
    }

    /// A broker that takes the certificate's CN as the username (mosquitto's `use_identity_as_username`, as the
    /// site's broker does) lets the device write only its own tree: the CN must be the config's device id.
    public func checkCommonName(device: String, path: String) throws(ServiceSetupError) {
        guard let commonName, commonName != device else { return }
        throw ServiceSetupError(message: "TLS certificate \(path) is issued to CN=\(commonName) but the config's device is "
                                  + "'\(device)': the broker would refuse every event this board sends",
                                  hint: "use the certificate provisioned for \(device) (provision.sh SITE \(device)), or set "
                                    + "`device: \(commonName)` if this board is \(commonName)")
    }

    /// The first certificate of a PEM file's text.
    public static func pem(_ bytes: [UInt8]) -> CertificateInfo? {
        let lines = String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.filter { !$0.isWhitespace } }   // spaces too: "-----BEGINCERTIFICATE-----"
        guard let begin = lines.firstIndex(of: "-----BEGINCERTIFICATE-----"),
              let end = lines[begin...].firstIndex(of: "-----ENDCERTIFICATE-----") else { return nil }
        guard let der = Data(base64Encoded: lines[(begin + 1)..<end].joined()) else { return nil }
        return CertificateInfo.der(Array(der))
    }

    /// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version?, serial, signature, issuer, validity, subject, ... } }
    public static func der(_ der: [UInt8]) -> CertificateInfo? {
        guard let cert = DER.element(der, at: 0), cert.tag == 0x30,
              let tbs = DER.element(der, at: cert.content), tbs.tag == 0x30 else { return nil }
        var fields: [DER.Element] = []
        var offset = tbs.content
        while offset < tbs.end, let e = DER.element(der, at: offset) {
            fields.append(e)
            offset = e.end
        }
        if fields.first?.tag == 0xA0 { fields.removeFirst() }   // version
        // serial, signature, issuer, validity, subject
        guard fields.count >= 5, fields[3].tag == 0x30,
              let notBefore = DER.element(der, at: fields[3].content),
              let notAfter = DER.element(der, at: notBefore.end),
              let time = DER.time(der, notAfter) else { return nil }
        return CertificateInfo(commonName: DER.commonName(der, fields[4]), notAfter: time, notBefore: DER.time(der, notBefore))
    }

    /// "2027-03-01", and how many whole days are left from `now` (negative: expired).
    public func expiry(now unixSeconds: Int64) -> (date: String, daysLeft: Int64) {
        let date = String(WireTimeDate.format(unixSeconds: notAfter))
        let left = notAfter - unixSeconds
        return (date, left >= 0 ? left / 86_400 : -((-left + 86_399) / 86_400))
    }
}

/// Just enough DER for a certificate's validity and subject.
enum DER {
    struct Element {
        var tag: UInt8
        var content: Int
        var end: Int
    }

    static func element(_ b: [UInt8], at offset: Int) -> Element? {
        guard offset + 2 <= b.count else { return nil }
        let tag = b[offset]
        var length = Int(b[offset + 1])
        var content = offset + 2
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard count >= 1, count <= 4, content + count <= b.count else { return nil }
            length = 0
            for i in 0..<count { length = length << 8 | Int(b[content + i]) }
            content += count
        }
        guard content + length <= b.count else { return nil }
        return Element(tag: tag, content: content, end: content + length)
    }

    /// UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ) as seconds since 1970.
    static func time(_ b: [UInt8], _ e: Element) -> Int64? {
        let text = String(decoding: b[e.content..<e.end], as: UTF8.self)
        // ASCII digits only: `isNumber` also takes "½" or "٣", which Int64() refuses.
        let digits = text.prefix(while: { $0.isASCII && $0.isNumber })
        let year: Int64, rest: Substring
        switch (e.tag, digits.count) {
        case (0x17, 12): let yy = Int64(digits.prefix(2))!; year = yy < 50 ? 2000 + yy : 1900 + yy; rest = digits.dropFirst(2)
        case (0x18, 14): year = Int64(digits.prefix(4))!; rest = digits.dropFirst(4)
        default: return nil
        }
        let n = stride(from: 0, to: 10, by: 2).map { Int64(rest.dropFirst($0).prefix(2))! }
        return WireTimeDate.unixSeconds(year: year, month: n[0], day: n[1]) + n[2] * 3600 + n[3] * 60 + n[4]
    }

    /// The value after the OID 2.5.4.3 (commonName) inside a Name.
    static func commonName(_ b: [UInt8], _ name: Element) -> String? {
        let oid: [UInt8] = [0x06, 0x03, 0x55, 0x04, 0x03]
        var i = name.content
        while i + oid.count < name.end {
            if Array(b[i..<i + oid.count]) == oid, let value = element(b, at: i + oid.count), value.end <= name.end {
                return String(decoding: b[value.content..<value.end], as: UTF8.self)
            }
            i += 1
        }
        return nil
    }
}

/// Civil dates in integers (Howard Hinnant's algorithms), as the wire times are computed.
enum WireTimeDate {
    static func unixSeconds(year: Int64, month: Int64, day: Int64) -> Int64 {
        WireTime.unixSeconds(year: year, month: month, day: day)
    }

    /// "YYYY-MM-DD".
    static func format(unixSeconds: Int64) -> String { WireTime.formatDate(unixSeconds: unixSeconds) }
}
