import ParkWiseContract
import ServiceSetup
import Glibc

/// One check of a broker, as `doctor` lists it: ok, failed or a warning, with what was found and the fix.
public struct ProbeStep: Error, Sendable {
    public enum Status: String, Sendable { case ok, failed, warning }
    public var status: Status
    public var title: String
    public var detail: String?
    public var fix: String?

    public init(_ status: Status, _ title: String, detail: String? = nil, fix: String? = nil) {
        self.status = status
        self.title = title
        self.detail = detail
        self.fix = fix
    }
}

/// Checks one broker the way the agent will use it, step by step, each bounded by `timeout` seconds so a
/// black-holed address cannot hang the caller: the name resolves, TCP connects, the TLS handshake and the
/// certificate check pass, the broker accepts the credentials, the device may publish in its own tree (an MQTT 5
/// PUBACK's reason code says so, as 3.1.1 brokers drop refused messages silently; the message coming back
/// through a subscription proves it), and it may subscribe to its commands (the SUBACK does not refuse it).
/// Blocking: call it off the Swift cooperative pool (it runs its own threads and waits for them).
public enum BrokerProbe {
    public struct Topics: Sendable {
        /// A topic in the device's tree it may write and read, for the round trip.
        public var echo: String
        /// The device's command filter.
        public var commands: String
        public init(echo: String, commands: String) {
            self.echo = echo
            self.commands = commands
        }
    }

    public static func run(settings: LinkSettings, broker: LinkSettings.Broker, topics: Topics, timeout: Double) -> [ProbeStep] {
        var steps: [ProbeStep] = []
        let target = "\(broker.host):\(broker.port)"
        let addresses: [Address]
        switch NetworkProbe.resolve(host: broker.host, port: broker.port, timeout: timeout) {
        case .failure(let step): return [step]
        case .success(let found):
            addresses = found
            steps.append(ProbeStep(.ok, "\(broker.host) resolves", detail: found.map { $0.text }.joined(separator: ", ")))
        }
        switch NetworkProbe.connect(addresses, port: broker.port, timeout: timeout) {
        case .failure(let step): return steps + [step]
        case .success(let ms): steps.append(ProbeStep(.ok, "TCP connect to \(target)", detail: "\(ms) ms"))
        }
        var mqtt = session(settings: settings, broker: broker, topics: topics, timeout: timeout, version: 5)
        if mqtt.contains(where: { $0.title == refusedVersion }) {
            // An MQTT 3.1.1-only broker: the agent works with it (mqtt.protocol 4), only without reason codes.
            mqtt = [ProbeStep(.warning, "the broker does not speak MQTT 5: checked with 3.1.1",
                              detail: "a 3.1.1 broker drops a refused publish silently: only the round trip shows it")]
                + session(settings: settings, broker: broker, topics: topics, timeout: timeout, version: 4)
        }
        if broker.tls, let handshake = mqtt.firstIndex(where: { $0.title.hasPrefix("TLS handshake") }) {
            let answer = PeerCertificate.answer(addresses, host: broker.host, port: broker.port, timeout: timeout)
            let failed = mqtt[handshake].status == .failed
            if failed, answer == .notTLS {
                // A plain listener: no certificate to blame, and no expiry to read.
                mqtt[handshake] = notTLSStep(broker, detail: mqtt[handshake].detail)
                return steps + mqtt
            }
            let peer: CertificateInfo?
            if case .certificate(let info) = answer { peer = info } else { peer = nil }
            if failed, let peer, let cause = handshakeCause(peer: peer, now: Int64(time(nil))) {
                // The handshake failed on the certificate's dates: the CA and host name are not what to change.
                mqtt[handshake].fix = cause
            }
            mqtt.insert(expiryStep(peer, what: "broker certificate"), at: handshake + 1)
        }
        return steps + mqtt
    }

    /// mqtts:// to a port that answered the TLS hello as a plain listener does.
    static func notTLSStep(_ broker: LinkSettings.Broker, detail: String?) -> ProbeStep {
        ProbeStep(.failed, "TLS handshake: \(broker.host):\(broker.port) does not speak TLS",
                  detail: "it hung up on a TLS hello without a TLS answer (a plain MQTT listener)"
                    + (detail.map { "; \($0)" } ?? ""),
                  fix: "use mqtt://\(broker.host):\(broker.port) for this port, or keep mqtts:// with the broker's TLS "
                    + "port (typically 8883)")
    }

    /// A certificate's expiry as a step: ok, a warning within 30 days, failed once expired.
    /// What to do when a certificate is not valid yet by this board's clock: the clock is behind, the certificate is right.
    static let clockBehind = "this board's clock is behind (no RTC, and NTP has not set it): let it reach an NTP server "
        + "(timedatectl shows 'System clock synchronized: yes'), or set it by hand (date -s), then try again; the "
        + "certificates and the broker are not at fault"

    /// Why a handshake failed, when a certificate's dates say it (nil: they do not): not valid yet by this board's clock,
    /// or expired.
    public static func handshakeCause(peer: CertificateInfo, now: Int64) -> String? {
        let name = peer.commonName.map { " (CN \($0))" } ?? ""
        if let from = peer.notYetValid(now: now) {
            return "the broker's certificate\(name) is valid from \(from) but \(clockBehind)"
        }
        let (date, days) = peer.expiry(now: now)
        return days < 0 ? "the broker's certificate\(name) expired on \(date): " + renewal(.broker, commonName: peer.commonName) : nil
    }

    /// Whose certificate it is: that decides what renews it.
    public enum CertificateOwner: Sendable {
        /// The broker's own (renewed on the broker host, which then restarts).
        case broker
        /// The site's CA, which signed the broker's and every board's certificate.
        case siteCA
        /// This board's client certificate (CN = its device id) at its site: a new one for this device, the broker untouched.
        case board(site: String)
    }

    /// What to do about a certificate that expired or soon will, by whose it is.
    static func renewal(_ owner: CertificateOwner, commonName: String?) -> String {
        switch owner {
        case .broker:
            return "renew it (deploy/mosquitto/make-certs.sh makes new ones) and restart the broker"
        case .siteCA:
            return "the site's CA signed the broker's and every board's certificate: make a new CA and new certificates for "
                + "the broker and every board (deploy/mosquitto/README.md), then give this board the new CA file"
        case .board(let site):
            let device = commonName ?? "DEVICE"
            return "renew it on the broker host (sudo deploy/mosquitto/reissue.sh \(site) \(device) --certificate: the site's CA "
                + "signs a new one), copy its bundle here and restart the agent (sudo tar -xpf \(site)-\(device)-certificate.tar "
                + "-C / && sudo systemctl restart parkwise-agent); the broker needs no restart"
        }
    }

    public static func expiryStep(_ certificate: CertificateInfo?, what: String, owner: CertificateOwner = .broker,
                                  now: Int64 = Int64(time(nil))) -> ProbeStep {
        guard let certificate else {
            return ProbeStep(.warning, "\(what): expiry date not read",
                             detail: "the broker did not show its certificate to a TLS 1.2 hello (a TLS 1.3-only listener?)",
                             fix: "check it by hand: openssl s_client -connect HOST:PORT </dev/null | openssl x509 -noout -enddate")
        }
        let (date, days) = certificate.expiry(now: now)
        let name = certificate.commonName.map { " (CN \($0))" } ?? ""
        if let from = certificate.notYetValid(now: now) {
            return ProbeStep(.failed, "\(what)\(name) not valid until \(from): this board's clock says \(WireTime.formatDate(unixSeconds: now))",
                             fix: clockBehind)
        }
        if days < 0 {
            return ProbeStep(.failed, "\(what)\(name) expired on \(date)", fix: renewal(owner, commonName: certificate.commonName))
        }
        if days < 30 {
            return ProbeStep(.warning, "\(what)\(name) expires on \(date), in \(days) days",
                             fix: "before then, or TLS connections will fail: " + renewal(owner, commonName: certificate.commonName))
        }
        return ProbeStep(.ok, "\(what)\(name) valid until \(date) (\(days) days)")
    }
}
