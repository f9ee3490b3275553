import Foundation
import TestSupport
import Testing

@Suite(.serialized) struct SessionTests {
    func config(_ dir: URL, brokers: [String], protocolVersion: String = "3.1.1") throws -> String {
        let path = dir.appendingPathComponent("session.yaml").path
        try """
        site: testsite
        device: busy
        board: simulated
        mqtt: { brokers: [\(brokers.map { "\"\($0)\"" }.joined(separator: ", "))], protocol: "\(protocolVersion)" }
        levels: [ { id: P1, capacity: 20 } ]
        spots: [ { id: P1-A-01, input: GPIO2, delayed_on: 0, delayed_off: 0 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The first broker of the list is down: the agent moves on to the next one.
    @Test func failsOverToTheNextBroker() throws {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: ["mqtt://127.0.0.1:\(freePort())", broker.url]),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 }, "\(agent.stderr)")
        #expect(agent.stderr.contains("uplink connected broker=\(broker.url)"))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// MQTT 5 where the broker supports it: the same contract.
    @Test func speaksMQTT5WhenAsked() throws {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: [broker.url], protocolVersion: "5"),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 }, "\(agent.stderr)")
        #expect(subscriber.events().map { $0["seq"] as? Int } == [1, 2, 3])
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        #expect(try retainedMessages(broker, "parkwise/v1/testsite/busy/status").first?.json["state"] as? String == "offline")
        subscriber.stop()
    }

    /// `rebirth` republishes status and every state; a command that is not JSON changes nothing.
    @Test func rebirthAndMalformedCommands() throws {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let prefix = "parkwise/v1/testsite/busy"
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: [broker.url]),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 })
        let before = subscriber.messages.filter { $0.topic == prefix + "/state/spot/P1-A-01" }.count
        try publish(broker, prefix + "/cmd/calibrate", "not json")
        try publish(broker, prefix + "/cmd/rebirth", #"{"id": "r1"}"#)
        #expect(eventually(5) { subscriber.messages.filter { $0.topic == prefix + "/reply" }.count == 2 })
        let replies = subscriber.messages.filter { $0.topic == prefix + "/reply" }.map(\.json)
        #expect(replies[0]["ok"] as? Bool == false)
        #expect(replies[1]["ok"] as? Bool == true)
        #expect(replies[1]["id"] as? String == "r1")
        #expect(eventually(5) { subscriber.messages.filter { $0.topic == prefix + "/state/spot/P1-A-01" }.count > before })
        #expect(subscriber.messages.filter { $0.topic == prefix + "/status" }.count >= 2)
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }
}
