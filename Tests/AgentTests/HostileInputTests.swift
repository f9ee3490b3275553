import Foundation
import ParkWiseContract
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
        let added = outbox.append([OutboxEntry(event: last, atMonotonic: 0, arrivalMonotonic: nil, kernelBoot: "k")], sparing: [])
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
