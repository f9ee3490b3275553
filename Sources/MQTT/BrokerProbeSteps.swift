import CMosquitto

/// What a broker probe's MQTT session found, as the technician's steps, each failure with its fix.
extension BrokerProbe {
    static func steps(_ o: Outcome, _ r: ProbeRecorder.State, settings: LinkSettings, broker: LinkSettings.Broker,
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
            return steps + [ProbeStep(.failed, "authentication \(user)", detail: "broker: \(describeConnack(o.connack, version: settings.protocolVersion))",
                                      fix: settings.username == nil
                                        ? "the broker wants a login: set mqtt.credentials to a file with username= and password= (mode 600)"
                                        : "check username= and password= in the credentials file (mqtt.credentials) against the "
                                            + "broker's password file (mosquitto_passwd -b FILE USER PASSWORD, then reload mosquitto)")]
        case 1, 132:
            return steps + [ProbeStep(.failed, refusedVersion, detail: "broker: \(describeConnack(o.connack, version: settings.protocolVersion))",
                                      fix: "the broker must speak MQTT 3.1.1 or 5 (mosquitto 1.4 and later do)")]
        default:
            return steps + [ProbeStep(.failed, "MQTT connection accepted", detail: "broker refused: \(describeConnack(o.connack, version: settings.protocolVersion))",
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

    private static func describeConnack(_ code: Int32, version: Int32) -> String {
        (version == 5 ? MosquittoConnection.describeReason(code) : MosquittoConnection.describeConnack(code)) + " (\(code))"
    }

    private static func describeReason(_ code: Int32) -> String { MosquittoConnection.describeReason(code) }

    static func seconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
}
