import ServiceSetup
import SystemIO

/// Why a TLS handshake may have failed on dates, read from this board's own CA and client certificate against its
/// clock: libmosquitto says only "A TLS error occurred.", and a board without an RTC whose clock NTP has not set yet
/// sees every certificate as not valid yet.
enum CertificateDates {
    /// The first of the configured certificates not valid by `now` (unix seconds), said for the log; nil: their dates
    /// are not the cause (or the files are unreadable: the start checked them).
    static func cause(ca: String?, cert: String?, now: Int64) -> String? {
        for (path, what) in [(ca, "CA"), (cert, "client certificate")] {
            guard let path, let info = DurableFile.read(path: path).flatMap(CertificateInfo.pem) else { continue }
            if let from = info.notYetValid(now: now) {
                return "the \(what) \(path) is not valid until \(from) by this board's clock: the clock is behind "
                    + "(no RTC, NTP not reached), not the certificates"
            }
            let (date, days) = info.expiry(now: now)
            if days < 0 { return "the \(what) \(path) expired on \(date)" }
        }
        return nil
    }
}
