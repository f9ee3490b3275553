@testable import AgentKit
import Foundation
import ParkWiseContract
import Testing
import TestSupport

/// `cmd/diag`, `cmd/loglevel` and the retained status, against a real broker and agent.
@Suite(.serialized) struct RemoteDiagnosticsTests {
    let prefix = "parkwise/v1/testsite/contract-dev"

    /// Publishes `payload` (through a file: it may be large) on cmd/<name>, returns the reply that follows.
    func command(_ broker: Broker, _ subscriber: Subscriber, _ name: String, _ payload: String,
                 dir: URL) throws -> Received? {
        let before = subscriber.messages.filter { $0.topic == prefix + "/reply" }.count
        let file = dir.appendingPathComponent("payload").path
        try payload.write(toFile: file, atomically: true, encoding: .utf8)
        let pub = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", prefix + "/cmd/" + name, "-f", file])
        #expect(pub.wait(10) == 0)
        guard eventually(10, { subscriber.messages.filter { $0.topic == prefix + "/reply" }.count > before }) else { return nil }
        return subscriber.messages.filter { $0.topic == prefix + "/reply" }[before]
    }

    @Test func diagRepliesWithTheStatusAndLoglevelChangesTheThreshold() throws {
        let rig = try ReplayRig(trace: contractTrace)
        let (dir, broker, subscriber, agent) = (rig.dir, rig.broker, rig.subscriber, rig.agent)
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.child.stderr)")

        let diag = try #require(try command(broker, subscriber, "diag", #"{"id": "d-1"}"#, dir: dir))
        #expect(diag.json["ok"] as? Bool == true && diag.json["id"] as? String == "d-1")
        let body = try #require(diag.json["diag"] as? [String: Any])
        let status = try JSONDecoder().decode(AgentStatus.self,
                                              from: JSONSerialization.data(withJSONObject: body["status"] as Any))
        #expect(status.device == "contract-dev" && status.inputs.count == 5 && status.link.isConnected)
        let checks = try #require(body["checks"] as? [String: Any])
        #expect(checks["outbox_writable"] as? Bool == true)
        #expect((checks["outbox_free_bytes"] as? Int ?? 0) > 0)
        #expect(checks["clock_synced"] is Bool)
        #expect(body["truncated"] == nil)

        // Threshold debug: the agent logs a line per event from now on, and says so in its status.
        #expect(!agent.child.stderr.contains("debug event"))
        let debug = try #require(try command(broker, subscriber, "loglevel", #"{"level": "debug", "id": "l-1"}"#, dir: dir))
        #expect(debug.json["ok"] as? Bool == true && debug.json["id"] as? String == "l-1")
        #expect(try agent.status().logLevel == "debug")
        #expect(eventually(15) { agent.child.stderr.contains("debug event type=") }, "\(agent.child.stderr)")
        let error = try #require(try command(broker, subscriber, "loglevel", #"{"level": "error"}"#, dir: dir))
        #expect(error.json["ok"] as? Bool == true)
        #expect(try agent.status().logLevel == "error")
        agent.stop()
        #expect(!agent.child.stderr.contains("info stopped"), "info lines are below the threshold now")
        subscriber.stop()
    }

    /// A command published with the retain flag runs once, live; at the next connection (an agent restarted) the
    /// broker's retained copy is refused with a reply that says so, and nothing is applied again.
    @Test func aRetainedCommandRunsOnceAndIsRefusedAtTheNextConnection() throws {
        let rig = try ReplayRig(trace: "")
        let (dir, broker, subscriber, agent) = (rig.dir, rig.broker, rig.subscriber, rig.agent)
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.child.stderr)")
        func replies() -> [Received] { subscriber.messages.filter { $0.topic == prefix + "/reply" } }
        try publish(broker, prefix + "/cmd/loglevel", #"{"level": "warn", "id": "kept"}"#, retain: true)
        #expect(eventually(10) { replies().count == 1 }, "\(agent.child.stderr)")
        #expect(replies().first?.json["ok"] as? Bool == true, "live, it is acted on: \(replies().first?.payload ?? "-")")
        #expect(try agent.status().logLevel == "warn")
        agent.stop()

        // The next start subscribes again: the broker hands it the retained copy.
        let again = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, "")],
                                     broker: broker)
        #expect(eventually(10) { replies().count == 2 }, "\(again.child.stderr)")
        let refused = try #require(replies().last)
        #expect(refused.json["ok"] as? Bool == false && refused.json["id"] as? String == "kept", "\(refused.payload)")
        #expect((refused.json["error"] as? String ?? "").contains("retained command is not acted on"), "\(refused.payload)")
        #expect(try again.status().logLevel == "info", "the stale command was applied again")
        #expect(!again.child.stderr.contains("log level changed"), "\(again.child.stderr)")
        again.stop()
        subscriber.stop()
    }

    /// Hostile payloads on cmd/diag and cmd/loglevel: an error each, short, never the payload echoed,
    /// nothing changed; the agent answers a good command after them. MQTT 3.1.1, where every payload reaches the agent
    /// (with MQTT 5, the default, the broker drops one over the agent's maximum packet size itself: CommandSizeTests).
    @Test func hostileDiagAndLoglevelPayloadsGetShortErrors() throws {
        let rig = try ReplayRig(trace: "", configTail: "mqtt: { protocol: \"3.1.1\" }")
        let (dir, broker, subscriber, agent) = (rig.dir, rig.broker, rig.subscriber, rig.agent)
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.child.stderr)")
        let long = String(repeating: "P", count: 200_000)
        let hostile: [(String, String)] = [
            ("loglevel", #"{"level": "verbose"}"#),
            ("loglevel", #"{"level": "\#(long)"}"#),
            ("loglevel", String(repeating: "[", count: 50_000)),
            ("loglevel", #"{"level": 3}"#),
            ("loglevel", ""),
            ("loglevel", #"{"level": "debug", "id": "\#(String(repeating: "x", count: 1000))"}"#),
            ("diag", "garbage"),
            ("diag", #"{"id": 5}"#),
            ("diag", #"{"id": "\#(long)"}"#),
            ("diag", String(repeating: "{\"a\":", count: 2000)),
        ]
        for (name, payload) in hostile {
            let reply = try #require(try command(broker, subscriber, name, payload, dir: dir), "\(name) \(payload.prefix(40))")
            #expect(reply.json["ok"] as? Bool == false, "\(name) \(payload.prefix(40)) -> \(reply.payload.prefix(200))")
            #expect(reply.payload.utf8.count < 300, "\(name) \(payload.prefix(40)) -> \(reply.payload.count) bytes")
            #expect(reply.json["diag"] == nil && reply.json["id"] == nil)
        }
        #expect(try agent.status().logLevel == "info", "no hostile loglevel changed anything")
        let good = try #require(try command(broker, subscriber, "diag", "", dir: dir))
        #expect(good.json["ok"] as? Bool == true && good.json["diag"] != nil)
        #expect(!agent.child.hasExited)
        agent.stop()
        subscriber.stop()
    }

    /// The retained status says what changed (faulted inputs, outbox depth), republished at most once
    /// per `status_every` (measured by the agent's own uptime) but for an outbox that emptied, and not at all once
    /// nothing changes.
    @Test func retainedStatusUpdatesAreBoundedAndOnlyOnChange() throws {
        let rig = try ReplayRig(trace: contractTrace, speed: "1", filter: prefix + "/status", configTail: "mqtt: { status_every: 3s }")
        let (subscriber, agent) = (rig.subscriber, rig.agent)
        func online() -> [[String: Any]] {
            subscriber.messages.filter { $0.json["state"] as? String == "online" }.map(\.json)
        }
        // The chatter and stuck faults show, then their recovery (the stuck input is released at 11 s).
        #expect(eventually(30) { online().contains { ($0["faulted_inputs"] as? Int ?? 0) >= 1 } }, "\(online())")
        #expect(eventually(30) {
            agent.child.stderr.contains("trace finished")
                && online().last.map { $0["faulted_inputs"] as? Int == 0 && $0["outbox_depth"] as? Int == 0 } == true
        }, "\(online())")
        let settled = online().count
        #expect(!eventually(8) { online().count > settled }, "nothing changes, nothing is published: \(online().suffix(3))")

        let updates = online()
        #expect(updates.count >= 3, "\(updates)")
        // Replayed at speed 1, the trace runs on the machine's own clock.
        #expect(updates.allSatisfy { $0["reconnects"] as? Int == 0 && ["synced", "unsynced"].contains($0["clock"] as? String) })
        #expect(Set(updates.compactMap { $0["since"] as? String }).count == 1, "since stays the session's start")
        // Each says when it was produced: after the session's start, in order, and no later than it arrived here.
        let ats = updates.compactMap { $0["at"] as? String }
        #expect(ats.count == updates.count, "every online status carries its time: \(updates)")
        #expect(ats == ats.sorted() && ats.allSatisfy { $0 >= updates[0]["since"] as? String ?? "" }, "\(ats)")
        #expect((ats.last ?? "") <= wireNow(), "\(ats)")
        let uptimes = updates.compactMap { $0["uptime_s"] as? Int }
        #expect(uptimes.count == updates.count)
        for i in updates.indices.dropFirst() {
            // The one exception to the interval: the outbox emptied after a status that showed a backlog goes at once
            // (issue 33), so at most one more per interval.
            let emptied = updates[i]["outbox_depth"] as? Int == 0 && (updates[i - 1]["outbox_depth"] as? Int ?? 0) > 0
            #expect(uptimes[i] - uptimes[i - 1] >= 2 || (emptied && (i < 2 || uptimes[i] - uptimes[i - 2] >= 2)),
                    "republished at most every 3 s (whole seconds), but for an emptied outbox: \(updates.map { ($0["uptime_s"] ?? "", $0["outbox_depth"] ?? "") })")
        }
        agent.stop()
        subscriber.stop()
    }

    /// A reconnect shows in the retained status: the count, and the birth of the new connection carries it.
    @Test func aReconnectIsCounted() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let agent = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, "")],
                                     broker: broker)
        #expect(eventually(10) { (try? agent.status())?.link.isConnected == true })
        broker.stop()
        #expect(eventually(10) { (try? agent.status())?.link.isConnected == false })
        try broker.start()
        #expect(eventually(20) { (try? agent.status())?.link.isConnected == true }, "\(agent.child.stderr)")
        let status = try agent.status()
        #expect(status.link.reconnects == 1 && status.link.lastLoss != nil)
        let retained = try retainedMessages(broker, prefix + "/status")
        #expect(retained.first?.json["reconnects"] as? Int == 1, "\(retained.map(\.payload))")
        agent.stop()
    }
}

extension RemoteDiagnosticsTests {
    /// The diag reply of the example campus (156 spots on expanders, 4 lanes) once every input has changed, half of
    /// them twice (a garage in use: each input with its last change, each spot with its since): whole, and the size
    /// deploy/backend/CONTRACT.md says ("about N KB", within a tenth), so a broker's or a backend's limit can be set
    /// from the document.
    @Test func aCampusDiagReplyIsTheSizeTheContractSays() throws {
        let campus = packageRoot + "/hardware/examples/campus.yaml"
        let yaml = try String(contentsOfFile: campus, encoding: .utf8)
        let lanes = yaml.components(separatedBy: "\nlanes:")[1].components(separatedBy: "\nspots:")[0]
        let inputs = matches(#"input: "([^"]+)""#, in: yaml) + matches(#"(GPIO[0-9]+)"#, in: lanes)
        #expect(inputs.count == 164)
        var trace = ["{\"parkwise_trace\": 1}"]
        for (i, input) in inputs.enumerated() { trace.append("{\"t_ms\": \(100 + 5 * i), \"input\": \"\(input)\", \"value\": 1}") }
        for (i, input) in inputs.prefix(inputs.count / 2).enumerated() {
            trace.append("{\"t_ms\": \(20_000 + 5 * i), \"input\": \"\(input)\", \"value\": 0}")
        }
        let dir = temporaryDirectory()
        let broker = try Broker()
        let topic = "parkwise/v1/uniandes/campus-main"
        let subscriber = try Subscriber(broker, filter: topic + "/reply")
        try subscriber.listen()
        defer { subscriber.stop() }
        let agent = try RunningAgent(dir, ["--config", campus, "--replay", try writeTrace(dir, trace.joined(separator: "\n") + "\n"),
                                           "--speed", "100"], broker: broker)
        defer { agent.stop() }
        #expect(eventually(20) {
            ((try? agent.status())?.inputs.map(\.changes).reduce(0, +) ?? 0) == inputs.count + inputs.count / 2
        }, "\(agent.child.stderr)")
        let pub = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", topic + "/cmd/diag",
                                                      "-m", #"{"id": "size"}"#])
        #expect(pub.wait(10) == 0)
        #expect(eventually(10) { !subscriber.messages.isEmpty }, "\(agent.child.stderr)")
        let reply = try #require(subscriber.messages.first)
        let body = try #require(reply.json["diag"] as? [String: Any])
        #expect(body["truncated"] == nil)
        let contract = try String(contentsOfFile: packageRoot + "/deploy/backend/CONTRACT.md", encoding: .utf8)
        let said = try #require(matches(#"A campus of 156 spots fits whole \(about ([0-9]+) KB"#, in: contract).first.flatMap { Int($0) })
        let measured = Double(reply.payload.utf8.count) / 1024
        #expect(abs(measured - Double(said)) <= Double(said) / 10, "measured \(measured) KB, CONTRACT.md says about \(said) KB")
    }

    private func matches(_ pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }
}

/// Now as the wire writes times (ISO-8601 UTC with milliseconds): comparable as text with a wire time.
private func wireNow() -> String {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.string(from: Date())
}
