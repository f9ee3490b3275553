import Foundation
import TestSupport
import Testing

/// mosquitto_sub with some login, collecting what it receives.
final class Listener {
    let child: Child

    init(_ login: [String], _ filters: [String]) throws {
        child = try Child("/usr/bin/mosquitto_sub", login + ["-V", "mqttv5", "-q", "1", "-F", Received.format]
                          + filters.flatMap { ["-t", $0] })
    }

    var messages: [Received] { Received.parse(child.stdout) }

    var payloads: [String] { messages.map(\.payload) }

    func stop() {
        child.signal(SIGTERM)
        _ = child.wait(5)
    }
}

@Suite(.serialized) struct BrokerACLTests {
    let a = "parkwise/v1/uniandes/p2-east"
    let b = "parkwise/v1/uniandes/p3-west"

    /// Publishes `marker` from `login` until `listener` has it: its subscription is in place.
    func ready(_ broker: SiteBroker, _ listener: Listener, _ login: [String], _ topic: String) throws {
        let marker = "ready-\(UUID().uuidString.prefix(8))"
        let seen = eventually(10) {
            _ = try? broker.publish(login, topic, marker)
            return eventually(0.3) { listener.payloads.contains(marker) }
        }
        if !seen { throw HarnessError("listener never saw \(topic): \(listener.child.stderr) \(broker.log)") }
    }

    /// The site broker takes no anonymous login, even on loopback: the monitor logs in as a user the ACL lets read
    /// the feed (the backend's here), and shows what the devices send.
    @Test func theMonitorLogsInWithACredentialsFile() throws {
        let broker = try SiteBroker()
        let secrets = temporaryDirectory().appendingPathComponent("monitor-login").path
        try "username=parkwise-backend\npassword=\(SiteBroker.passwords["parkwise-backend"]!)\n"
            .write(toFile: secrets, atomically: true, encoding: .utf8)
        chmod(secrets, 0o600)
        let monitor = try Child(agentBinary, ["monitor", "--broker", "mqtt://127.0.0.1:\(broker.plain)", "--credentials", secrets,
                                              "--site", "uniandes", "--count", "1"])
        #expect(eventually(10) { monitor.stdout.contains("monitor: connected") }, "\(monitor.stderr)")
        let event = #"{"at":"2026-12-01T10:00:00.000Z","boot":1,"clock":"synced","id":"\#(UUID().uuidString.lowercased())","#
            + #""level":"P2","seq":1,"spot":"P2-A-01","type":"spot.occupied"}"#
        #expect(try broker.publish(broker.login("p2-east"), a + "/events", event).accepted)
        #expect(monitor.wait(10) == 0, "\(monitor.stdout) \(monitor.stderr)")
        #expect(monitor.stdout.contains("spot.occupied   P2-A-01"), "\(monitor.stdout)")
        // A login file others may read is refused, as the agent refuses it.
        chmod(secrets, 0o644)
        let refused = try runAgent(["monitor", "--broker", "mqtt://127.0.0.1:\(broker.plain)", "--credentials", secrets], timeout: 10)
        #expect(refused.code == 78, "\(refused.err)")
    }

    @Test func aDeviceWritesOnlyItsOwnTree() throws {
        let broker = try SiteBroker()
        let backend = try Listener(broker.login("parkwise-backend"), ["parkwise/#"])
        try ready(broker, backend, broker.login("p2-east"), a + "/status")

        // Device A in its own tree: every part of it.
        for topic in ["/status", "/events", "/state/spot/P2-A-01", "/state/level/P2", "/reply"] {
            #expect(try broker.publish(broker.login("p2-east"), a + topic, "a-own\(topic)", retain: topic != "/events").accepted)
        }
        // Device B: its own tree is fine (valid credentials) ...
        #expect(try broker.publish(broker.login("p3-west"), b + "/events", "b-own").accepted)
        // ... A's tree is not, nor is any command.
        for topic in ["/status", "/events", "/state/spot/P2-A-01", "/state/level/P2", "/reply", "/cmd/calibrate"] {
            let result = try broker.publish(broker.login("p3-west"), a + topic, "b-intrusion\(topic)", retain: true)
            #expect(!result.accepted, "p3-west wrote \(a + topic)")
            #expect(result.err.contains("Not authorized"), "\(result.err)")
        }
        // A device cannot command itself, write outside its tree, or pose as itself at another site.
        #expect(try broker.publish(broker.login("p2-east"), a + "/cmd/rebirth", "a-intrusion-cmd").accepted == false)
        #expect(try broker.publish(broker.login("p2-east"), "parkwise/v1/othersite/p2-east/events", "a-intrusion-site").accepted == false)
        #expect(try broker.publish(broker.login("p2-east"), "parkwise/v1/uniandes/events", "a-intrusion-short").accepted == false)
        #expect(try broker.publish(broker.login("p2-east"), "garage/anything", "a-intrusion-root").accepted == false)
        // The backend commands any device but cannot forge a device's data.
        #expect(try broker.publish(broker.login("parkwise-backend"), a + "/cmd/rebirth", "backend-cmd").accepted)
        #expect(try broker.publish(broker.login("parkwise-backend"), a + "/events", "backend-intrusion").accepted == false)

        #expect(eventually(5) { backend.payloads.contains("backend-cmd") && backend.payloads.contains("b-own") })
        try ready(broker, backend, broker.login("p2-east"), a + "/events")   // whatever the broker let through is here
        backend.stop()
        let seen = backend.payloads
        #expect(seen.filter { $0.hasPrefix("a-own/") }.count == 5, "\(seen)")
        #expect(seen.allSatisfy { !$0.contains("intrusion") }, "an intrusion arrived: \(seen)")
        #expect(broker.log.contains("Denied PUBLISH"), "mosquitto logs each refusal")
        // The retained topics hold A's own payloads, not B's attempts.
        let retained = try Listener(broker.login("parkwise-backend"), [a + "/#"])
        #expect(eventually(5) { retained.messages.count >= 4 })
        try ready(broker, retained, broker.login("p2-east"), a + "/events")   // after every retained message
        retained.stop()
        let retainedOnly = retained.messages.filter { $0.payload.hasPrefix("ready-") == false }
        #expect(retainedOnly.allSatisfy { $0.retained })
        #expect(Set(retainedOnly.map(\.payload)) == ["a-own/status", "a-own/state/spot/P2-A-01", "a-own/state/level/P2", "a-own/reply"])
    }

    @Test func aDeviceReadsOnlyItsOwnCommands() throws {
        let broker = try SiteBroker()
        // A listens to its commands the way the agent does (cmd/+); B tries A's commands and everything.
        let deviceA = try Listener(broker.login("p2-east"), [a + "/cmd/+", "parkwise/#"])
        let deviceB = try Listener(broker.login("p3-west"), [a + "/cmd/#", "parkwise/#", "#", b + "/cmd/+"])
        try ready(broker, deviceA, broker.login("parkwise-backend"), a + "/cmd/ping")
        try ready(broker, deviceB, broker.login("parkwise-backend"), b + "/cmd/ping")

        try broker.publish(broker.login("parkwise-backend"), a + "/cmd/calibrate", #"{"level":"P2","count":3,"id":"for-a"}"#)
        try broker.publish(broker.login("p2-east"), a + "/events", "a-event")
        try broker.publish(broker.login("p2-east"), a + "/state/level/P2", "a-state")
        #expect(eventually(5) { deviceA.payloads.contains { $0.contains("for-a") } })
        // Whatever the broker let through to either device is there once a later message is.
        try ready(broker, deviceA, broker.login("parkwise-backend"), a + "/cmd/ping")
        try ready(broker, deviceB, broker.login("parkwise-backend"), b + "/cmd/ping")
        deviceA.stop()
        deviceB.stop()
        #expect(deviceB.messages.allSatisfy { $0.topic.hasPrefix(b + "/") }, "B read: \(deviceB.messages.map(\.topic))")
        #expect(!deviceB.payloads.contains { $0.contains("for-a") || $0.hasPrefix("a-") })
        // A does not even read its own data back: it may read only its cmd/.
        #expect(deviceA.messages.allSatisfy { $0.topic.hasPrefix(a + "/cmd/") })
    }

    @Test func anonymousAndUnknownClientsAreRefused() throws {
        let broker = try SiteBroker()
        let anonymous = try broker.publish(broker.login(nil), a + "/events", "anonymous")
        #expect(anonymous.code != 0)
        #expect(anonymous.err.lowercased().contains("not authori"), "\(anonymous.err)")
        let wrong = try broker.publish(["-h", "127.0.0.1", "-p", "\(broker.plain)", "-u", "p2-east", "-P", "guess"],
                                       a + "/events", "wrong password")
        #expect(wrong.code != 0)
        let stranger = try broker.publish(broker.login("stranger"), a + "/events", "unknown user")
        #expect(stranger.code != 0)
        let anonymousTLS = try broker.publish(["-h", "localhost", "-p", "\(broker.tls)", "--cafile", broker.certs + "/ca.crt"],
                                              a + "/events", "anonymous over TLS")
        #expect(anonymousTLS.code != 0)
        let anonymousSub = try Listener(broker.login(nil), ["#"])
        #expect(anonymousSub.child.wait(5) != 0)
        #expect(anonymousSub.child.stderr.lowercased().contains("not authori"), "\(anonymousSub.child.stderr)")
    }

    @Test func theTLSListenersCheckServerAndClient() throws {
        let broker = try SiteBroker()
        let backend = try Listener(broker.loginTLS("parkwise-backend"), ["parkwise/#"])
        try ready(broker, backend, broker.loginTLS("p2-east"), a + "/status")

        #expect(try broker.publish(broker.loginTLS("p2-east"), a + "/events", "tls-a-own").accepted)
        #expect(try broker.publish(broker.loginTLS("p3-west"), a + "/events", "tls-b-intrusion").accepted == false)
        // Mutual TLS: the certificate's CN is the username, so the same ACL holds.
        #expect(try broker.publish(broker.loginCertificate("p2-east"), a + "/events", "mtls-a-own").accepted)
        #expect(try broker.publish(broker.loginCertificate("p3-west"), a + "/events", "mtls-b-intrusion").accepted == false)
        #expect(try broker.publish(broker.loginCertificate("p3-west"), b + "/events", "mtls-b-own").accepted)
        // No client certificate on the mutual listener; a server the client's CA did not sign; plain
        // MQTT on a TLS port: all refused.
        #expect(try broker.publish(broker.loginCertificate(nil) + ["-u", "p2-east", "-P", SiteBroker.passwords["p2-east"]!],
                                   a + "/events", "mtls-no-cert").code != 0)
        let other = temporaryDirectory().path + "/other-ca"
        let makeOther = try Child("/bin/bash", [SiteBroker.deploy + "/make-certs.sh", other])
        #expect(makeOther.wait(60) == 0)
        #expect(try broker.publish(broker.loginTLS("p2-east", ca: other + "/ca.crt"), a + "/events", "wrong-ca").code != 0)
        #expect(try broker.publish(["-h", "127.0.0.1", "-p", "\(broker.tls)", "-u", "p2-east", "-P",
                                    SiteBroker.passwords["p2-east"]!], a + "/events", "plain-on-tls").code != 0)

        #expect(eventually(5) { Set(backend.payloads).isSuperset(of: ["tls-a-own", "mtls-a-own", "mtls-b-own"]) })
        try ready(broker, backend, broker.loginTLS("p2-east"), a + "/events")   // whatever the broker let through is here
        backend.stop()
        #expect(backend.payloads.allSatisfy { !$0.contains("intrusion") && !["mtls-no-cert", "wrong-ca", "plain-on-tls"].contains($0) },
                "\(backend.payloads)")
    }

    /// The real agent, logged in as its device, works within the ACL: birth, states, events, the
    /// last will, command subscription and replies.
    @Test func theAgentWorksWithinItsACL() throws {
        let broker = try SiteBroker()
        let dir = temporaryDirectory()
        let credentials = dir.path + "/credentials"
        let secret = Data("username=p2-east\npassword=\(SiteBroker.passwords["p2-east"]!)\n".utf8)
        #expect(FileManager.default.createFile(atPath: credentials, contents: secret, attributes: [.posixPermissions: 0o600]))
        let garage = try String(contentsOfFile: try writeGarage(dir), encoding: .utf8)
            .replacingOccurrences(of: "site: testsite", with: "site: uniandes")
            .replacingOccurrences(of: "board: simulated", with: "board: simulated\nmqtt:\n  credentials: \(credentials)")
        let config = dir.path + "/site.yaml"
        try garage.write(toFile: config, atomically: true, encoding: .utf8)

        let backend = try Listener(broker.login("parkwise-backend"), ["parkwise/#"])
        try ready(broker, backend, broker.login("parkwise-backend"), "parkwise/v1/uniandes/probe/cmd/ping")
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir), "--speed", "4",
                                            "--broker", "mqtt://127.0.0.1:\(broker.plain)", "--outbox", dir.path + "/outbox"])
        func events() -> [Received] { backend.messages.filter { $0.topic == a + "/events" } }
        #expect(eventually(15) { events().count >= 5 }, "\(agent.stderr)\n\(broker.log)")
        #expect(backend.messages.contains { $0.topic == a + "/state/level/P2" })
        #expect(backend.messages.contains { $0.topic == a + "/status" && $0.json["state"] as? String == "online" })
        try broker.publish(broker.login("parkwise-backend"), a + "/cmd/calibrate", #"{"level": "P2", "count": 5, "id": "acl-1"}"#)
        #expect(eventually(5) { backend.messages.contains { $0.topic == a + "/reply" && $0.json["id"] as? String == "acl-1" } })
        agent.signal(SIGKILL)
        _ = agent.wait(5)
        #expect(eventually(10) { backend.messages.contains { $0.topic == a + "/status" && $0.json["state"] as? String == "offline" } },
                "the last will passes the ACL")
        backend.stop()
        #expect(!broker.log.contains("Denied PUBLISH from parkwise-uniandes-p2-east"), "\(broker.log)")
    }
}
