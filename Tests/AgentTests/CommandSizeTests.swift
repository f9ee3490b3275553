@testable import AgentKit
import Foundation
import ParkWiseContract
import Testing
import TestSupport

/// Commands over `CommandHandler.payloadLimit` (issue 22, item 5) against a real broker and agent: with MQTT 3.1.1
/// the agent drops one unread in libmosquitto's callback, refuses it with a reply, counts it and says so once per
/// streak; with MQTT 5 the broker never sends one (the CONNECT's maximum packet size). Either way the agent goes on
/// answering and publishing. (What bounds its memory, under the unit's 64 MiB: deploy/dev/command-size-check.sh.)
@Suite(.serialized) struct CommandSizeTests {
    let prefix = "parkwise/v1/testsite/contract-dev"
    static let said = "command over the size limit dropped unread"

    func replies(_ subscriber: Subscriber) -> [Received] { subscriber.messages.filter { $0.topic == prefix + "/reply" } }

    /// Publishes `bytes` bytes (or `text`) on cmd/<name> through a file, as a technician's mosquitto_pub would.
    func send(_ broker: Broker, _ name: String, bytes: Int? = nil, text: String = "", dir: URL) throws {
        let file = dir.appendingPathComponent("payload-\(name)").path
        let payload = bytes.map { Data(repeating: UInt8(ascii: "{"), count: $0) } ?? Data(text.utf8)
        try payload.write(to: URL(fileURLWithPath: file))
        let pub = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", prefix + "/cmd/" + name, "-f", file])
        #expect(pub.wait(20) == 0, "\(pub.stderr)")
    }

    @Test func anOversizedCommandIsDroppedUnreadRefusedAndSaidOncePerStreak() throws {
        let rig = try ReplayRig(trace: "", configTail: "mqtt: { protocol: \"3.1.1\" }")
        let (dir, broker, subscriber, agent) = (rig.dir, rig.broker, rig.subscriber, rig.agent)
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.child.stderr)")

        try send(broker, "diag", bytes: 1_000_000, dir: dir)
        try send(broker, "loglevel", bytes: CommandHandler.payloadLimit + 1, dir: dir)
        #expect(eventually(20) { replies(subscriber).count == 2 }, "\(agent.child.stderr)")
        for (reply, size) in zip(replies(subscriber), [1_000_000, CommandHandler.payloadLimit + 1]) {
            #expect(reply.json["ok"] as? Bool == false && reply.json["id"] == nil, "\(reply.payload)")
            #expect((reply.json["error"] as? String)?.contains("payload of \(size) bytes dropped unread") == true, "\(reply.payload)")
            #expect(reply.payload.utf8.count < 300)
        }
        #expect(agent.child.stderr.components(separatedBy: Self.said).count - 1 == 1, "one line for the streak: \(agent.child.stderr)")
        #expect(agent.child.stderr.contains("bytes=1000000 limit=\(CommandHandler.payloadLimit)"), "\(agent.child.stderr)")
        #expect(try agent.status().link.oversizedCommands == 2)
        #expect(StatusText.render(try agent.status()).contains("2 commands dropped unread"))

        // One at the limit is read as ever (and refused as malformed); a good one is answered; the streak ends.
        try send(broker, "loglevel", bytes: CommandHandler.payloadLimit, dir: dir)
        try send(broker, "diag", text: #"{"id": "after"}"#, dir: dir)
        #expect(eventually(20) { replies(subscriber).contains { $0.json["id"] as? String == "after" } }, "\(agent.child.stderr)")
        let atLimit = replies(subscriber)[2]
        #expect((atLimit.json["error"] as? String)?.contains("expected") == true, "\(atLimit.payload)")
        #expect(replies(subscriber).last?.json["ok"] as? Bool == true)
        #expect(agent.child.stderr.contains("commands within the size limit again"), "\(agent.child.stderr)")
        #expect(!agent.child.hasExited)
        rig.stop()
    }

    /// With MQTT 5 the broker drops the message itself (the agent told it its maximum packet size at CONNECT): the
    /// agent never sees it, so no reply, nothing counted; the next command is answered.
    @Test func withMQTT5TheBrokerNeverSendsAnOversizedCommand() throws {
        let rig = try ReplayRig(trace: "", configTail: "mqtt: { protocol: \"5\" }")
        let (dir, broker, subscriber, agent) = (rig.dir, rig.broker, rig.subscriber, rig.agent)
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.child.stderr)")

        try send(broker, "diag", bytes: 1_000_000, dir: dir)
        try send(broker, "diag", text: #"{"id": "after"}"#, dir: dir)
        #expect(eventually(20) { replies(subscriber).contains { $0.json["id"] as? String == "after" } }, "\(agent.child.stderr)")
        #expect(replies(subscriber).count == 1, "\(replies(subscriber).map(\.payload))")
        #expect(!agent.child.stderr.contains(Self.said), "\(agent.child.stderr)")
        #expect((try agent.status().link.oversizedCommands ?? 0) == 0)
        rig.stop()
    }
}
