import Foundation
import ParkWiseContract
import Testing
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
        var (outbox, _) = try DurableOutbox.open(directory: dir.path + "/outbox", capacity: 10)
        let last = EventPayload(id: "x", seq: .max, boot: 1, type: "spot.occupied", at: "2026-11-29T12:00:00.000Z", clock: "synced")
        let added = outbox.append(OutboxEntry(event: last, atMonotonic: 0, arrivalMonotonic: nil, kernelBoot: "k"), sparing: [])
        #expect(added.failure == nil)
        let r = try start(dir)
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("outbox.log holds seq 18446744073709551615, beyond 2^53"))
    }

    @Test func countsJustBelowTheLimitStillStart() throws {
        let dir = temporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.path + "/outbox", withIntermediateDirectories: true)
        try "{\"boot\": 9007199254740990, \"seq\": 9007199254740990}"
            .write(toFile: dir.path + "/outbox/device-state.json", atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir),
                                            "--broker", "mqtt://127.0.0.1:9", "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { agent.stderr.contains("agent running") }, "\(agent.stderr)")
        #expect(agent.stderr.contains("boot=9007199254740991"))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }
}

/// Commands over MQTT come from outside: malformed, absurd or deep payloads get an error reply and
/// change nothing; the agent keeps running and still obeys a good command.
@Suite struct HostileCommandTests {
    @Test func hostileCommandPayloadsAreRefusedAndTheAgentRunsOn() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        let prefix = "parkwise/v1/testsite/p2-east"
        #expect(eventually(10) { agent.stderr.contains("uplink connected") }, "\(agent.stderr)")
        let hostile = [
            #"{"level": "P2", "count": 9223372036854775807, "id": "h1"}"#,
            #"{"level": "P2", "count": -1, "id": "h2"}"#,
            #"{"level": "P2", "count": 1e300, "id": "h3"}"#,
            #"{"level": "P2", "count": 99999999999999999999999, "id": "h4"}"#,
            #"{"level": "P9", "count": 3, "id": "h5"}"#,
            "{\"level\": \"P2\", \"count\": " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + ", \"id\": \"h6\"}",
            String(repeating: "{\"a\": ", count: 50_000),
            "",
            "\u{FFFD}\u{0}not json",
        ]
        for payload in hostile {
            let file = dir.appendingPathComponent("payload").path
            try payload.write(toFile: file, atomically: true, encoding: .utf8)
            let pub = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", prefix + "/cmd/calibrate", "-f", file])
            #expect(pub.wait(5) == 0)
        }
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P2", "count": 7, "id": "good"}"#)
        let replies = { subscriber.messages.filter { $0.topic == prefix + "/reply" }.map(\.json) }
        #expect(eventually(10) { replies().count == hostile.count + 1 }, "\(replies()); \(agent.stderr.suffix(800))")
        #expect(replies().dropLast().allSatisfy { $0["ok"] as? Bool == false })
        #expect(replies().last?["ok"] as? Bool == true && replies().last?["id"] as? String == "good")
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/state/level/P2" && $0.payload.contains("\"lane_count\":7") } })
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }
}

/// A config cut short anywhere (a full disk, a copy interrupted): check-config exits 0 or 78, every
/// line it prints is a located error, its hint, or the count; never a signal.
@Suite struct TruncatedConfigTests {
    @Test func aConfigCutAnywhereIsCheckedCleanly() throws {
        let campus = try Data(contentsOf: URL(fileURLWithPath: packageRoot + "/hardware/examples/campus.yaml"))
        let path = temporaryDirectory().appendingPathComponent("cut.yaml").path
        var outcomes: [Int32: Int] = [:]
        for cut in stride(from: 0, to: campus.count, by: max(1, campus.count / 40)) {
            try campus.prefix(cut).write(to: URL(fileURLWithPath: path))
            let r = try runAgent(["check-config", path])
            outcomes[r.code, default: 0] += 1
            #expect(r.code == 0 || r.code == 78, "cut at \(cut): exit \(r.code)")
            for line in r.err.split(separator: "\n") {
                #expect(line.hasPrefix("\(path):") || line.hasPrefix("    hint: "), "cut at \(cut): \(line)")
            }
        }
        #expect(outcomes[78, default: 0] > 30, "\(outcomes)")
    }
}

/// A config whose simulated traffic stalls (one sensed spot on a 48-space level, no lanes: its
/// vehicle never leaves, nobody else can park) used to spin the simulator forever; now it says so.
@Suite struct StalledSimulationTests {
    @Test func aStalledSimulationIsReportedAndTheAgentStopsCleanly() throws {
        let dir = temporaryDirectory()
        let path = dir.appendingPathComponent("stall.yaml").path
        try """
        site: testsite
        device: stall
        board: simulated
        levels: [ { id: P2, capacity: 48 } ]
        spots: [ { id: P2-A-01, input: GPIO22, delayed_on: 1s, delayed_off: 1s } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", path, "--speed", "10000", "--broker", "mqtt://127.0.0.1:9",
                                            "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { agent.stderr.contains("traffic simulator stalled") }, "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }
}
