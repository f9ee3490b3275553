import Foundation
import ParkWiseContract
import Simulation
import Testing
import TestSupport
import Uplink

/// Inputs that used to kill the agent with a signal: each is now a clear error and an exit code.
@Suite struct HostileInputTests {
    @Test func aDurationOf106752DaysIsAnIssueNotSIGILL() throws {
        let dir = temporaryDirectory()
        let config = try String(contentsOfFile: try writeGarage(dir), encoding: .utf8)
            .replacingOccurrences(of: "checkin_after: 3s", with: "checkin_after: 106752d")
        let path = dir.appendingPathComponent("long.yaml").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runAgent(["check-config", path])
        #expect(r.code == 78)
        #expect(r.err.contains("long.yaml:9:"))
        #expect(r.err.contains("checkin_after: '106752d' is longer than 365d"))
    }

    @Test func yamlNested100000DeepIsAnIssueAtOnce() throws {
        let path = temporaryDirectory().appendingPathComponent("deep.yaml").path
        try ("site: " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runAgent(["check-config", path], timeout: 10)
        #expect(r.code == 78)
        #expect(r.err.contains("deep.yaml:1:38: error: YAML nested more than 32 levels deep"))
    }

    @Test(arguments: ["1e-300", "0.001", "0", "-1", "nan", "inf", "10001"])
    func aSpeedOutOfRangeIsAUsageErrorNotACrash(speed: String) throws {
        let dir = temporaryDirectory()
        let r = try runAgent(["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir), "--speed", speed,
                              "--broker", "mqtt://127.0.0.1:9", "--outbox", dir.path + "/outbox"])
        #expect(r.code == 64, "\(r.err)")
        #expect(r.err.contains("--speed must be a number between 0.01 and 10000"))
    }

    @Test func aTraceTimeBeyondAYearIsRefusedBeforeRunning() throws {
        let dir = temporaryDirectory()
        let trace = try writeTrace(dir, "{\"t_ms\": 100, \"input\": \"GPIO22\", \"value\": 1}\n"
                                       + "{\"t_ms\": 9300000000000, \"input\": \"GPIO22\", \"value\": 0}\n")
        let r = try runAgent(["run", "--config", try writeGarage(dir), "--replay", trace, "--broker", "mqtt://127.0.0.1:9",
                              "--outbox", dir.path + "/outbox"])
        #expect(r.code == 1)
        #expect(r.err.contains("trace.jsonl:2: error: t_ms 9300000000000 is more than a year"))
    }
}

/// Counts on disk that leave no room to count on: a clear error and exit 78 (systemd does not
/// restart into the same wall), never a crash loop.
@Suite struct ExhaustedCountTests {
    func start(_ dir: URL) throws -> (code: Int32, out: String, err: String) {
        try runAgent(["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir), "--broker", "mqtt://127.0.0.1:9",
                      "--outbox", dir.path + "/outbox"])
    }

    @Test(arguments: ["{\"boot\": 18446744073709551615, \"seq\": 4}", "{\"boot\": 3, \"seq\": 18446744073709551615}",
                      "{\"boot\": 9007199254740992, \"seq\": 4}"])
    func aStateFileAtTheEndOfItsCountsIsRefused(state: String) throws {
        let dir = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path + "/outbox", withIntermediateDirectories: true)
        try state.write(toFile: dir.path + "/outbox/device-state.json", atomically: true, encoding: .utf8)
        let r = try start(dir)
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("device-state.json holds "))
        #expect(r.err.contains("beyond 2^53: the file is damaged or forged"))
        #expect(try String(contentsOfFile: dir.path + "/outbox/device-state.json", encoding: .utf8) == state, "left as it was")
    }

    @Test func anOutboxEventAtTheEndOfTheCountIsRefused() throws {
        let dir = temporaryDirectory()
        let (outbox, _) = try DurableOutbox.open(directory: dir.path + "/outbox", capacity: 10)
        let last = EventPayload(id: "x", seq: .max, boot: 1, type: "spot.occupied", at: "2026-11-29T12:00:00.000Z", clock: "synced")
        let added = outbox.append([OutboxEntry(event: last, atMonotonic: 0, arrivalMonotonic: nil, kernelBoot: "k")], sparing: [])
        #expect(added.failure == nil)
        let r = try start(dir)
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("outbox.log holds seq 18446744073709551615, beyond 2^53"))
    }

    /// (The last seq a start takes is 2^53 - 2^32, so that no run goes past 2^53: see StartupValidationTests.)
    @Test func countsJustBelowTheLimitStillStart() throws {
        let dir = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path + "/outbox", withIntermediateDirectories: true)
        try "{\"boot\": 9007199254740990, \"seq\": 9007194959773690}"
            .write(toFile: dir.path + "/outbox/device-state.json", atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir),
                                            "--broker", "mqtt://127.0.0.1:9", "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { agent.stderr.contains("agent running") }, "\(agent.stderr)")
        #expect(agent.stderr.contains("boot=9007199254740991"))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }
}

/// Hostile commands over MQTT (fixed seeds): mutated, oversized, deeply nested, binary and
/// out-of-range payloads on known and unknown command topics. Oracle: the agent answers each with
/// a reply (an error for every bad one), never dies of a signal, and still obeys a good command after.
@Suite(.serialized) struct HostileCommandTests {
    static func hostile(_ random: inout SeededRandom) -> String {
        let valid = #"{"level": "P2", "count": 7, "id": "c"}"#
        switch Int.random(in: 0..<8, using: &random) {
        case 0:   // a valid command with bytes flipped
            var bytes = Array(valid.utf8)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 32...126, using: &random)
            }
            return String(decoding: bytes, as: UTF8.self)
        case 1: return #"{"level": "P2", "count": \#(["9223372036854775807", "-1", "1e308", "18446744073709551616", "null", "\"7\""].randomElement(using: &random)!)}"#
        case 2: return String(repeating: "[", count: Int.random(in: 1000...50_000, using: &random))
        case 3: return #"{"level": ""# + String(repeating: "P", count: 200_000) + #"", "count": 1}"#
        case 4: return String((0..<Int.random(in: 1...300, using: &random)).map { _ in Character(UnicodeScalar(UInt8.random(in: 1...255, using: &random))) })
        case 5: return #"{"id": \#(String(repeating: "{\"a\":", count: 2000))1\#(String(repeating: "}", count: 2000))}"#
        case 6: return ""
        default: return #"{"level": "P2", "count": 3, "id": ["not", "a", "string"]}"#
        }
    }

    /// What the agent must accept: rebirth whatever its payload, calibrate of P2 (capacity 48) to a count it can hold.
    static func isValid(_ name: String, _ payload: String) -> Bool {
        if name == "rebirth" { return true }
        guard name == "calibrate",
              let object = (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any],
              object["level"] as? String == "P2", let count = object["count"] as? Int, (0...48).contains(count),
              object["id"] == nil || object["id"] is String else { return false }
        return true
    }

    /// MQTT 3.1.1, where every payload reaches the agent (with MQTT 5, the default, the broker drops one over the agent's
    /// maximum packet size itself, unanswered: CommandSizeTests).
    @Test func hostileCommandsGetErrorsAndChangeNothing() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let config = try writeGarage(dir)
        try (try String(contentsOfFile: config, encoding: .utf8) + "\nmqtt: { protocol: \"3.1.1\" }\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        let prefix = "parkwise/v1/testsite/p2-east"
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.stderr)")
        var random = SeededRandom(seed: 20261201)
        let count = Int(ProcessInfo.processInfo.environment["PARKWISE_FUZZ_CASES"] ?? "") ?? 40
        var expected: [Bool] = []   // the reply each command on cmd/<name> must get (cmd/a/b is not the agent's)
        var sent: [String] = []
        for _ in 0..<count {
            let name = ["calibrate", "rebirth", "calibrate", "explode", "calibrate/x"].randomElement(using: &random)!
            let topic = prefix + "/cmd/" + name
            let payload = HostileCommandTests.hostile(&random)
            if name != "calibrate/x" {
                expected.append(HostileCommandTests.isValid(name, payload))
                sent.append("\(name) \(payload.prefix(60))")
            }
            // Large payloads go through a file: argv has its limits.
            let file = dir.appendingPathComponent("payload").path
            try payload.write(toFile: file, atomically: true, encoding: .utf8)
            let pub = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", topic, "-f", file])
            #expect(pub.wait(10) == 0)
        }
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P2", "count": 5, "id": "after-the-storm"}"#)
        #expect(eventually(20) { subscriber.messages.contains { $0.topic == prefix + "/reply" && $0.payload.contains("after-the-storm") } },
                "\(agent.stderr)")
        #expect(!agent.hasExited, "the agent survived: \(agent.stderr)")
        let replies = subscriber.messages.filter { $0.topic == prefix + "/reply" }.map(\.json)
        let got = replies.map { $0["ok"] as? Bool ?? false }
        let wrong = zip(sent, zip(expected, got)).filter { $1.0 != $1.1 }.map { "\($0) -> ok \($1.1)" }
        #expect(got == expected + [true], "one reply per command, an error for each bad one: \(wrong)")
        #expect(replies.allSatisfy { ($0["error"] as? String ?? "").count < 200 }, "errors do not echo hostile payloads back")
        let last = try #require(replies.last)
        #expect(last["ok"] as? Bool == true && last["id"] as? String == "after-the-storm")
        #expect(eventually(10) {
            (try? retainedMessages(broker, prefix + "/state/level/P2"))?.first?.json["lane_count"] as? Int == 5
        })
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0, "\(agent.stderr)")
        subscriber.stop()
    }
}

extension HostileCommandTests {
    /// A flood of commands (a runaway backend script) queues neither the commands nor their replies without bound:
    /// beyond the bound a command is dropped unread, and every dropped one is counted in a streak line. So each
    /// command is answered or counted, never silently lost, and the agent still answers once the flood is over.
    @Test func aFloodOfCommandsIsCutAndEveryOneAnsweredOrCounted() throws {
        let dir = temporaryDirectory()
        // The broker keeps and forwards everything at once: the agent is the only one that may cut the flood.
        let broker = try Broker(extraConfig: "max_inflight_messages 0\nmax_queued_messages 0")
        let prefix = "parkwise/v1/testsite/p2-east"
        let replies = try Subscriber(broker, filter: prefix + "/reply")
        try replies.listen()
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        func answered(_ id: String) -> Bool { replies.messages.contains { $0.json["id"] as? String == id } }
        // Online on the broker: its subscription to commands came before that on the same connection.
        #expect(eventually(10) {
            (try? retainedMessages(broker, prefix + "/status"))?.first?.json["state"] as? String == "online"
        }, "\(agent.stderr)")
        try publish(broker, prefix + "/cmd/diag", #"{"id": "before"}"#)
        #expect(eventually(10) { answered("before") }, "\(agent.stderr)")

        // Held up (stopped) while the flood is published, the agent gets it all at once when it goes on.
        let flood = 5000
        let file = dir.appendingPathComponent("flood.txt")
        try (0..<flood).map { #"{"id": "f\#($0)"}"# }.joined(separator: "\n").appending("\n")
            .write(to: file, atomically: true, encoding: .utf8)
        agent.signal(SIGSTOP)
        let pub = try Child("/bin/sh", ["-c", "exec /usr/bin/mosquitto_pub -p \(broker.port) -q 1 -t \(prefix)/cmd/diag -l < \(file.path)"])
        #expect(pub.wait(60) == 0, "\(pub.stderr)")
        agent.signal(SIGCONT)

        func dropped() -> Int {
            agent.stderr.split(separator: "\n").filter { $0.contains("commands answered again") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("streak=") }.flatMap { Int($0.dropFirst(7)) }
            }.reduce(0, +)
        }
        func floodAnswered() -> Int { replies.messages.filter { ($0.json["id"] as? String)?.hasPrefix("f") == true }.count }
        #expect(eventually(60) { floodAnswered() + dropped() == flood },
                "answered \(floodAnswered()) + dropped \(dropped()) of \(flood)")
        #expect(dropped() > 0, "the flood went past the bound")
        #expect(agent.stderr.contains("warn commands come faster than they are answered, dropped count="))
        try publish(broker, prefix + "/cmd/diag", #"{"id": "after"}"#)
        #expect(eventually(10) { answered("after") })
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0, "\(agent.stderr.suffix(2000))")
    }
}
