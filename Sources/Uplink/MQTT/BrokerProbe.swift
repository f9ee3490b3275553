import CMosquitto
import Glibc
import Synchronization

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
        var mqtt = session(settings: settings, broker: broker, topics: topics, timeout: timeout)
        if broker.tls, let handshake = mqtt.firstIndex(where: { $0.title.hasPrefix("TLS handshake") }) {
            let peer = PeerCertificate.fetch(addresses, host: broker.host, port: broker.port, timeout: timeout)
            mqtt.insert(expiryStep(peer, what: "broker certificate"), at: handshake + 1)
        }
        return steps + mqtt
    }

    /// A certificate's expiry as a step: ok, a warning within 30 days, failed once expired.
    public static func expiryStep(_ certificate: CertificateInfo?, what: String, now: Int64 = Int64(time(nil))) -> ProbeStep {
        guard let certificate else {
            return ProbeStep(.warning, "\(what): expiry date not read",
                             detail: "the broker did not show its certificate to a TLS 1.2 hello (a TLS 1.3-only listener?)",
                             fix: "check it by hand: openssl s_client -connect HOST:PORT </dev/null | openssl x509 -noout -enddate")
        }
        let (date, days) = certificate.expiry(now: now)
        let name = certificate.commonName.map { " (CN \($0))" } ?? ""
        if days < 0 {
            return ProbeStep(.failed, "\(what)\(name) expired on \(date)",
                             fix: "renew it (deploy/mosquitto/make-certs.sh makes new ones) and restart the broker")
        }
        if days < 30 {
            return ProbeStep(.warning, "\(what)\(name) expires on \(date), in \(days) days",
                             fix: "renew it before then (deploy/mosquitto/make-certs.sh), or TLS connections will fail")
        }
        return ProbeStep(.ok, "\(what)\(name) valid until \(date) (\(days) days)")
    }

    // MARK: the MQTT session

    private struct Outcome: Sendable {
        var connack: Int32 = -1
        var networkError: Int32?
        var setupError: String?
        var published: Int32?
        var subscribed: Int32?
        var echoed = false
        var finished = false
    }

    private static func session(settings base: LinkSettings, broker: LinkSettings.Broker, topics: Topics, timeout: Double) -> [ProbeStep] {
        var copy = base
        copy.brokers = [broker]
        copy.protocolVersion = 5
        copy.will = nil
        let settings = copy
        let recorder = ProbeRecorder()
        let outcome = Mutex(Outcome())
        let nonce = "doctor-\(getpid())-\(Int(monotonicSeconds() * 1000))"
        let thread = DedicatedThread {
            let connection: MosquittoConnection
            do {
                connection = try MosquittoConnection.make(settings: settings, broker: broker, number: 1, emit: { event in
                    if case .message(let topic, let payload) = event { recorder.message(topic: topic, payload: payload) }
                }, recorder: recorder)
            } catch let error as UplinkError {
                outcome.withLock { $0.setupError = error.description; $0.finished = true }
                return
            } catch {
                outcome.withLock { $0.setupError = "\(error)"; $0.finished = true }
                return
            }
            defer { outcome.withLock { $0.finished = true } }
            let rc = connection.connect(keepalive: max(settings.keepaliveSeconds, 5))
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                outcome.withLock { $0.networkError = rc }
                return
            }
            var phaseEnd = monotonicSeconds() + timeout
            var asked = false
            while monotonicSeconds() < phaseEnd {
                let rc = connection.loop(timeoutMs: 50)
                // A refusing broker sends its CONNACK and closes: the code first, then the loop's error.
                let connack = connection.connack
                if connack >= 0 { outcome.withLock { $0.connack = connack } }
                if connack > 0 { return }
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    outcome.withLock { $0.networkError = rc }
                    return
                }
                if connack == 0 && !asked {
                    asked = true
                    phaseEnd = monotonicSeconds() + timeout
                    let echo = connection.subscribeCounted(topics.echo)
                    let commands = connection.subscribeCounted(topics.commands)
                    outcome.withLock { $0.subscribed = commands.rc == MOSQ_ERR_SUCCESS.rawValue ? commands.mid : nil }
                    _ = echo
                }
                if asked {
                    let state = recorder.state.withLock { $0 }
                    let subscribed = outcome.withLock { $0.subscribed }
                    // Publish once the echo subscription is in place (its SUBACK came), so the message can come back.
                    if outcome.withLock({ $0.published }) == nil, !state.subacks.isEmpty {
                        let sent = connection.publish(topic: topics.echo, payload: Array(nonce.utf8), retain: false)
                        outcome.withLock { $0.published = sent.rc == MOSQ_ERR_SUCCESS.rawValue ? sent.mid : -1 }
                    }
                    let published = outcome.withLock { $0.published }
                    let echoed = state.messages.contains { $0.topic == topics.echo && $0.payload == Array(nonce.utf8) }
                    outcome.withLock { $0.echoed = echoed }
                    let pubackIn = published.map { state.pubacks[$0] != nil } ?? false
                    let subackIn = subscribed.map { state.subacks[$0] != nil } ?? true
                    let refused = published.flatMap { state.pubacks[$0] }.map { $0 >= 0x80 } ?? false
                    if pubackIn && subackIn && (echoed || refused) { break }
                }
            }
            connection.disconnect()
            for _ in 0..<3 { _ = connection.loop(timeoutMs: 20) }
        }
        if !thread.join(within: 3 * timeout + 1) {
            outcome.withLock { $0.finished = false }
        }
        return steps(outcome.withLock { $0 }, recorder.state.withLock { $0 }, settings: settings, broker: broker,
                     topics: topics, timeout: timeout)
    }

    private static func steps(_ o: Outcome, _ r: ProbeRecorder.State, settings: LinkSettings, broker: LinkSettings.Broker,
                              topics: Topics, timeout: Double) -> [ProbeStep] {
        var steps: [ProbeStep] = []
        let libraryLog = r.log.joined(separator: "; ")
        if let setup = o.setupError {
            return [ProbeStep(.failed, "MQTT client set up", detail: setup,
                              fix: "check the TLS files in the config (mqtt.tls: ca, cert, key): they must be PEM files the agent can read")]
        }
        let reachedBroker = o.connack >= 0
        if broker.tls {
            if reachedBroker {
                steps.append(ProbeStep(.ok, "TLS handshake, broker certificate verified",
                                       detail: "against \(settings.tls?.ca ?? "the system's CAs (/etc/ssl/certs)"), host name \(broker.host)"))
            } else {
                let tlsFailure = o.networkError == MOSQ_ERR_TLS.rawValue || libraryLog.contains("SSL") || libraryLog.contains("certificate")
                if tlsFailure || o.networkError != nil {
                    return steps + [ProbeStep(.failed, "TLS handshake and broker certificate",
                                              detail: libraryLog.isEmpty ? o.networkError.map { MosquittoConnection.describe($0) } : libraryLog,
                                              fix: "the broker's certificate must be signed by the CA in mqtt.tls.ca "
                                                + "(\(settings.tls?.ca ?? "none: the system's CAs")) and name \(broker.host) "
                                                + "(subjectAltName); use the CA that signed it, or give the broker a certificate for this name. "
                                                + "With mutual TLS, the broker must trust the device's certificate too")]
                }
            }
        }
        guard reachedBroker else {
            if let error = o.networkError {
                return steps + [ProbeStep(.failed, "MQTT connection", detail: MosquittoConnection.describe(error)
                                              + (libraryLog.isEmpty ? "" : " (\(libraryLog))"),
                                          fix: "is it an MQTT listener (mosquitto)? check the port and mqtt:// vs mqtts:// in the config")]
            }
            return steps + [ProbeStep(.failed, "MQTT connection", detail: "no CONNACK within \(seconds(timeout))",
                                      fix: "the address accepts TCP but no MQTT answers: check the port (1883 plain, 8883 TLS) "
                                        + "and mqtt:// vs mqtts://, or a firewall/proxy in between")]
        }
        let user = settings.username.map { "as \($0)" } ?? "anonymously"
        switch o.connack {
        case 0:
            steps.append(ProbeStep(.ok, "authenticated \(user)"))
        case 134, 4, 135, 5:
            // mosquitto 2.0 answers a wrong password with 135 (not authorized), not 134.
            return steps + [ProbeStep(.failed, "authentication \(user)", detail: "broker: \(describeConnack(o.connack))",
                                      fix: settings.username == nil
                                        ? "the broker wants a login: set mqtt.credentials to a file with username= and password= (mode 600)"
                                        : "check username= and password= in the credentials file (mqtt.credentials) against the "
                                            + "broker's password file (mosquitto_passwd -b FILE USER PASSWORD, then reload mosquitto)")]
        default:
            return steps + [ProbeStep(.failed, "MQTT connection accepted", detail: "broker refused: \(describeConnack(o.connack))",
                                      fix: "the broker must speak MQTT 5 or 3.1.1 (mosquitto 2.x does)")]
        }
        guard let mid = o.published, mid >= 0 else {
            return steps + [ProbeStep(.failed, "publish in its own tree", detail: "the echo subscription was not acknowledged in \(seconds(timeout))",
                                      fix: "the broker is slow or overloaded; run doctor again, check the broker's log")]
        }
        switch r.pubacks[mid] {
        case nil:
            steps.append(ProbeStep(.failed, "publish QoS 1 to \(topics.echo)", detail: "no PUBACK within \(seconds(timeout))",
                                   fix: "the broker took the message but did not acknowledge it; check the broker's log"))
        case let reason? where reason >= 0x80:
            steps.append(ProbeStep(.failed, "publish QoS 1 to \(topics.echo)", detail: "PUBACK: \(describeReason(reason)) (0x\(String(reason, radix: 16)))",
                                   fix: "the broker's ACL must let this device write its own tree: "
                                     + "pattern write \(prefix(topics.echo))/# style rules for %u (deploy/mosquitto/acl.conf)"))
        default:
            steps.append(ProbeStep(.ok, "publish QoS 1 to \(topics.echo): PUBACK"))
        }
        if r.pubacks[mid].map({ $0 < 0x80 }) == true {
            steps.append(o.echoed
                ? ProbeStep(.ok, "the message came back through a subscription to \(topics.echo)")
                : ProbeStep(.warning, "the message did not come back through a subscription to \(topics.echo)",
                            detail: "the broker acknowledged it but did not deliver it back within \(seconds(timeout))",
                            fix: "the ACL may not let the device read \(topics.echo): add `pattern read` for it (deploy/mosquitto/acl.conf)"))
        }
        switch o.subscribed.flatMap({ r.subacks[$0] })?.first {
        case nil:
            steps.append(ProbeStep(.failed, "subscribe to its commands \(topics.commands)", detail: "no SUBACK within \(seconds(timeout))",
                                   fix: "check the broker's log"))
        case let granted? where granted >= 0x80:
            steps.append(ProbeStep(.failed, "subscribe to its commands \(topics.commands)", detail: "SUBACK refused it (0x\(String(granted, radix: 16)))",
                                   fix: "the broker's ACL must let this device read its commands: pattern read \(prefix(topics.echo))/cmd/# "
                                     + "for %u (deploy/mosquitto/acl.conf)"))
        case let granted?:
            steps.append(ProbeStep(.ok, "subscribe to its commands \(topics.commands): granted QoS \(granted)"))
        }
        return steps
    }

    private static func prefix(_ topic: String) -> String {
        topic.lastIndex(of: "/").map { String(topic[..<$0]) } ?? topic
    }

    private static func describeConnack(_ code: Int32) -> String {
        MosquittoConnection.describeReason(code) + " (\(code))"
    }

    private static func describeReason(_ code: Int32) -> String { MosquittoConnection.describeReason(code) }

    static func seconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
}
