import Foundation
import TestSupport
import Testing

/// A throwaway CA, a broker certificate for 127.0.0.1 and a device client certificate (openssl).
struct TestPKI {
    let dir: URL
    var ca: String { dir.path + "/ca.crt" }
    var serverCert: String { dir.path + "/server.crt" }
    var serverKey: String { dir.path + "/server.key" }
    var deviceCert: String { dir.path + "/device.crt" }
    var deviceKey: String { dir.path + "/device.key" }

    /// `serverDays`, `deviceDays`, `caDays`: how long the broker's, the board's and the CA's certificates live (-1:
    /// expired yesterday).
    init(serverDays: Int = 2, deviceDays: Int = 2, caDays: Int = 2) throws {
        dir = temporaryDirectory()
        let d = dir.path
        if caDays > 0 {
            try run(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", String(caDays), "-subj", "/CN=ParkWise test CA",
                     "-keyout", d + "/ca.key", "-out", ca])
        } else {
            // `req -x509` takes no past; a self-signed `x509 -req` does.
            try run(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=ParkWise test CA", "-keyout", d + "/ca.key",
                     "-out", d + "/ca.csr"])
            try "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n".write(toFile: d + "/ca.ext", atomically: true, encoding: .utf8)
            try run(["x509", "-req", "-in", d + "/ca.csr", "-signkey", d + "/ca.key", "-days", String(caDays),
                     "-extfile", d + "/ca.ext", "-out", ca])
        }
        for (name, cn) in [("server", "127.0.0.1"), ("device", "busy")] {
            try run(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=\(cn)", "-keyout", "\(d)/\(name).key",
                     "-out", "\(d)/\(name).csr"])
            try "subjectAltName=IP:127.0.0.1\n".write(toFile: "\(d)/\(name).ext", atomically: true, encoding: .utf8)
            try run(["x509", "-req", "-in", "\(d)/\(name).csr", "-CA", ca, "-CAkey", d + "/ca.key", "-CAcreateserial",
                     "-days", String(name == "server" ? serverDays : deviceDays), "-extfile", "\(d)/\(name).ext", "-out", "\(d)/\(name).crt"])
        }
        chmod(deviceKey, 0o600)
        chmod(serverKey, 0o644)   // mosquitto runs as root in the tests, any mode works for it
    }

    /// mosquitto config lines: a TLS listener on 127.0.0.1 with the broker certificate of this PKI.
    func listener(_ port: Int, requireCertificate: Bool = false) -> String {
        "listener \(port) 127.0.0.1\ncafile \(ca)\ncertfile \(serverCert)\nkeyfile \(serverKey)\n"
            + (requireCertificate ? "require_certificate true\n" : "")
    }

    private func run(_ arguments: [String]) throws {
        let child = try Child("/usr/bin/openssl", arguments)
        guard child.wait(30) == 0 else { throw HarnessError("openssl \(arguments.first ?? ""): \(child.stderr)") }
    }
}

let threeChanges = """
{"t_ms": 0, "input": "GPIO2", "value": 1}
{"t_ms": 100, "input": "GPIO2", "value": 0}
{"t_ms": 200, "input": "GPIO2", "value": 1}
"""

/// The same, two seconds in: the device is online by then, so each change's state is published live.
let threeChangesWhenOnline = """
{"t_ms": 2000, "input": "GPIO2", "value": 1}
{"t_ms": 2100, "input": "GPIO2", "value": 0}
{"t_ms": 2200, "input": "GPIO2", "value": 1}
"""

@Suite(.serialized) struct TLSTests {
    func config(_ dir: URL, port: Int, pki: TestPKI, ca: String? = nil, protocolVersion: String = "3.1.1") throws -> String {
        let path = dir.appendingPathComponent("tls.yaml").path
        try """
        site: testsite
        device: busy
        board: simulated
        mqtt:
          brokers: ["mqtts://127.0.0.1:\(port)"]
          tls: { ca: \(ca ?? pki.ca), cert: \(pki.deviceCert), key: \(pki.deviceKey) }
          protocol: "\(protocolVersion)"
        levels: [ { id: P1, capacity: 20 } ]
        spots: [ { id: P1-A-01, input: GPIO2, delayed_on: 0, delayed_off: 0 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The broker knows a board by its certificate's CN (`use_identity_as_username`): a config whose device is another
    /// name would have every event refused. check-config says which name is wrong, at the line that names the certificate
    /// (issue 32: a board whose device id does not match its certificate lost every event while its status said
    /// "connected, 0 pending"); doctor fails the same step.
    @Test func aCertificateIssuedToAnotherDeviceIsNamedByCheckConfigAndDoctor() throws {
        let pki = try TestPKI()
        let dir = temporaryDirectory()
        let path = try config(dir, port: freePort(), pki: pki)
        #expect(try runAgent(["check-config", path]).code == 0, "CN=busy for device busy")
        try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "device: busy", with: "device: p2-east")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runAgent(["check-config", path])
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("\(path):6:"), "at the tls line: \(r.err)")
        #expect(r.err.contains("TLS certificate \(pki.deviceCert) is issued to CN=busy but the config's device is 'p2-east'"),
                "\(r.err)")
        #expect(r.err.contains("hint: use the certificate provisioned for p2-east"), "\(r.err)")
        let doctor = try runAgent(["doctor", "--config", path], timeout: 60)
        #expect(doctor.out.contains("is issued to CN=busy but the config's device is 'p2-east'"), "\(doctor.out)")
        #expect(doctor.code == 1, "a failed check, not a config error: \(doctor.out)")
    }

    /// Mutual TLS: the broker verifies the device's certificate, the device the broker's. With MQTT 5 the CONNECT
    /// carries the agent's maximum packet size, which libmosquitto 2.0 sends only from its blocking connect.
    @Test(arguments: ["3.1.1", "5"]) func eventsFlowOverMutualTLS(protocolVersion: String) throws {
        let pki = try TestPKI()
        let tlsPort = freePort()
        let broker = try Broker(extraConfig: pki.listener(tlsPort, requireCertificate: true))
        let subscriber = try Subscriber(broker)   // on the plain loopback listener
        try subscriber.listen()
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, port: tlsPort, pki: pki, protocolVersion: protocolVersion),
                                            "--replay", try writeTrace(dir, threeChangesWhenOnline),
                                            "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 }, "\(agent.stderr)")
        // Over TLS a publish is only queued and the link's round writes it: the spot's state after each change is
        // published once the one before is written (it never waits for a PUBACK that QoS 0 does not get).
        func liveStates() -> [Int] {
            subscriber.messages.filter { $0.topic.hasSuffix("/state/spot/P1-A-01") }.compactMap { $0.json["seq"] as? Int }
        }
        #expect(eventually(10) { liveStates().last == 3 }, "\(liveStates()); \(agent.stderr)")
        #expect(liveStates().contains(1), "the first change's state, published live: \(liveStates())")
        let retained = try retainedMessages(broker, "parkwise/v1/testsite/busy/state/spot/P1-A-01").first?.json
        #expect(retained?["seq"] as? Int == 3 && retained?["state"] as? String == "occupied", "\(retained ?? [:])")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// A handshake that fails on a certificate's dates says which and why in the log, not only libmosquitto's "A TLS
    /// error occurred." (issue 33: a board whose clock was behind, or whose CA expired, could not tell).
    @Test func aHandshakeThatFailsOnACertificatesDatesSaysWhichInTheLog() throws {
        let pki = try TestPKI(caDays: -1)
        let tlsPort = freePort()
        let broker = try Broker(extraConfig: pki.listener(tlsPort))
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, port: tlsPort, pki: pki),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        #expect(eventually(10) { agent.stderr.contains("broker unreachable") }, "\(agent.stderr)")
        #expect(agent.stderr.contains("the CA \(pki.ca) expired on "), "\(agent.stderr)")
        _ = broker
    }

    /// A broker whose certificate the configured CA did not sign is never trusted.
    @Test func anUntrustedBrokerIsRefused() throws {
        let pki = try TestPKI()
        let other = try TestPKI()
        let tlsPort = freePort()
        let broker = try Broker(extraConfig: pki.listener(tlsPort))
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, port: tlsPort, pki: pki, ca: other.ca),
                                            "--replay", try writeTrace(dir, threeChanges),
                                            "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { agent.stderr.contains("broker unreachable") })
        try subscriber.drain()
        #expect(subscriber.events().isEmpty)
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
        _ = broker
    }

    @Test func aKeyFileOthersCanReadIsRefused() throws {
        let pki = try TestPKI()
        chmod(pki.deviceKey, 0o640)
        let dir = temporaryDirectory()
        let r = try runAgent(["run", "--config", try config(dir, port: 1, pki: pki), "--outbox", dir.path + "/outbox"])
        #expect(r.code == 78)
        #expect(r.err.contains("TLS key file \(pki.deviceKey) is readable by group or others (mode 640)"))
    }
}
