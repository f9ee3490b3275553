import Foundation
import Testing
import TestSupport

/// Issue 25: configs written from the backend's own spot list, and the fleet at a glance — against the private
/// PostgreSQL (the test schema's 156 spots), a private mosquitto and real agents.
@Suite(.serialized) struct FleetTests {
    /// `export-config` with a whole config (site and device) and the backend's spot list, written into `fixture.dir`.
    private func export(_ fixture: BridgeFixture, level: String, zone: String?, device: String) throws -> (config: String, list: String) {
        let config = fixture.dir.appendingPathComponent("\(device).yaml").path
        let list = fixture.dir.appendingPathComponent("spots-\(device).txt").path
        let result = try runBridge(["export-config", "--database", fixture.url, "--level", level, "--site", "garage",
                                    "--device", device, "--output", config, "--spots", list] + (zone.map { ["--zone", $0] } ?? []))
        #expect(result.code == 0, "\(result.err)")
        return (config, list)
    }

    /// Each `input: UNSET` replaced by an expander line of its own (1-0020:GPA0, …), as the installer would.
    private func fillInputs(_ path: String) throws {
        var text = try String(contentsOfFile: path, encoding: .utf8)
        var n = 0
        while let range = text.range(of: "input: UNSET") {
            let chip = 0x20 + n / 16, pin = n % 16
            text.replaceSubrange(range, with: "input: \"1-00\(String(chip, radix: 16)):GP\(pin < 8 ? "A" : "B")\(pin % 8)\"")
            n += 1
        }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    private func line(of needle: String, in path: String) throws -> Int {
        let lines = try String(contentsOfFile: path, encoding: .utf8).components(separatedBy: "\n")
        return (lines.firstIndex { $0.contains(needle) } ?? -2) + 1
    }

    /// The exported file carries every spot id of the zone from the database and no input: check-config refuses it at
    /// each spot ("input not set", with its line), passes it once the inputs are filled, and with the backend's list
    /// refuses a spot id the backend does not know (exit 78, its line, the id it resembles).
    @Test func anExportedConfigGoesLiveOnlyFilledAndWithTheBackendsSpotIDs() throws {
        let fixture = try BridgeFixture()
        let (config, list) = try export(fixture, level: "P2", zone: "A", device: "p2-a")
        let text = try String(contentsOfFile: config, encoding: .utf8)
        let ids = fixture.query("SELECT string_agg(id, ' ' ORDER BY id) FROM spots WHERE level_code = 'P2' AND zone = 'A'")
        #expect(ids.split(separator: " ").count == 24)
        for id in ids.split(separator: " ") { #expect(text.contains("{ id: \"\(id)\", input: UNSET }"), "\(id) in\n\(text)") }
        #expect(!text.contains("P2-B-"), "\(text)")
        #expect(text.contains("capacity: 48"), "the level's spots in the backend, all zones: \(text)")
        #expect(text.contains("site: \"garage\"") && text.contains("device: \"p2-a\""), "\(text)")
        #expect(text.contains("# A-01 accessible") && text.contains("# A-02 EV") && text.contains("# A-03 VIP"), "\(text)")
        let listed = try String(contentsOfFile: list, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(listed.count == 156 && listed.contains("P3-B-24"), "\(listed.count)")

        let unfilled = try runAgentCLI(["check-config", config, "--spots", list])
        #expect(unfilled.code == 78, "\(unfilled.err)")
        #expect(unfilled.err.components(separatedBy: ": input not set").count - 1 == 24, "\(unfilled.err)")
        let first = try line(of: "P2-A-01", in: config)
        #expect(unfilled.err.contains("\(config):\(first):"), "\(unfilled.err)")
        #expect(unfilled.err.contains("error: spot P2-A-01: input not set\n    hint: write the line its sensor is wired to"),
                "\(unfilled.err)")

        try fillInputs(config)
        let filled = try runAgentCLI(["check-config", config, "--spots", list])
        #expect(filled.code == 0, "\(filled.err)")
        #expect(filled.out.contains("ok: site garage, device p2-a, 1 level (48 spaces), 0 lanes, 24 spots"), "\(filled.out)")

        // A spot id typed by hand, one the backend does not have: valid YAML, refused only against the backend's list.
        try (try String(contentsOfFile: config, encoding: .utf8)).replacingOccurrences(of: "\"P2-A-07\"", with: "\"P2-A-70\"")
            .write(toFile: config, atomically: true, encoding: .utf8)
        #expect(try runAgentCLI(["check-config", config]).code == 0)
        let unknown = try runAgentCLI(["check-config", config, "--spots", list])
        #expect(unknown.code == 78, "\(unknown.err)")
        let typed = try line(of: "P2-A-70", in: config)
        #expect(unknown.err.contains("\(config):\(typed):"), "\(unknown.err)")
        #expect(unknown.err.contains("error: spot P2-A-70 is not in the backend's spot list \(list) (156 spots)"), "\(unknown.err)")
        #expect(unknown.err.contains("hint: did you mean 'P2-A-"), "\(unknown.err)")
        #expect(unknown.err.contains("1 problem found"), "\(unknown.err)")

        let noList = try runAgentCLI(["check-config", config, "--spots", fixture.dir.path + "/missing.txt"])
        #expect(noList.code == 78 && noList.err.contains("cannot read the spot list"), "\(noList.err)")
    }

    /// What the backend does not have is a usage error that lists what it has; an existing file is never overwritten;
    /// without site and device the sections go to stdout.
    @Test func exportRefusesWhatTheBackendLacksAndNeverOverwrites() throws {
        let fixture = try BridgeFixture()
        let noLevel = try runBridge(["export-config", "--database", fixture.url, "--level", "P9"])
        #expect(noLevel.code == 64 && noLevel.err.contains("the backend has no level 'P9' (it has: P1, P2, P3)"), "\(noLevel.err)")
        let noZone = try runBridge(["export-config", "--database", fixture.url, "--level", "P2", "--zone", "C"])
        #expect(noZone.code == 64 && noZone.err.contains("level P2 has no zone 'C' in the backend (it has: A, B)"), "\(noZone.err)")
        let half = try runBridge(["export-config", "--database", fixture.url, "--level", "P2", "--site", "garage"])
        #expect(half.code == 64, "\(half.err)")

        let sections = try runBridge(["export-config", "--database", fixture.url, "--level", "P1"])
        #expect(sections.code == 0, "\(sections.err)")
        #expect(!sections.out.contains("site:") && sections.out.contains("levels:\n  - { id: \"P1\", capacity: 60"), "\(sections.out)")
        #expect(sections.out.components(separatedBy: "input: UNSET").count - 1 == 60, "\(sections.out)")

        let existing = fixture.dir.appendingPathComponent("filled.yaml").path
        try "site: garage\n".write(toFile: existing, atomically: true, encoding: .utf8)
        let refused = try runBridge(["export-config", "--database", fixture.url, "--level", "P1", "--output", existing])
        #expect(refused.code == 1 && refused.err.contains("exists, nothing was written"), "\(refused.err)")
        #expect(try String(contentsOfFile: existing, encoding: .utf8) == "site: garage\n")
    }

    /// Neither view hangs or guesses: a broker that cannot be reached is exit 1 with the fix, a database the bridge has
    /// not migrated to its schema exit 78 with the fix.
    @Test func theFleetViewsSayWhatTheyCannotReach() throws {
        let fixture = try BridgeFixture()
        let port = freePort()
        let monitor = try runAgentCLI(["monitor", "--broker", "mqtt://127.0.0.1:\(port)", "--fleet", "garage"])
        #expect(monitor.code == 1 && monitor.err.contains("unreachable for 10s") && monitor.err.contains("hint: check --broker"),
                "\(monitor.err)")
        let wildcard = try runAgentCLI(["monitor", "--fleet", "garage/#"])
        #expect(wildcard.code == 64 && wildcard.err.contains("is not a site name"), "\(wildcard.err)")
        let empty = try runBridge(["fleet", "--database", fixture.url])
        #expect(empty.code == 0 && empty.out.contains("no boards in sensor_devices yet"), "\(empty.out) \(empty.err)")
        try fixture.backToSchemaVersion2()
        let behind = try runBridge(["fleet", "--database", fixture.url])
        #expect(behind.code == 78 && behind.err.contains("this bridge needs 9") && behind.err.contains("hint: run parkwise-bridge migrate"),
                "\(behind.err)")
    }

    /// Issue 33: a broker outage read as every board gone quiet, with no line saying the bridge had lost its broker.
    /// Now the bridge writes its link's state, and `fleet` says first when no bridge is connected, and since when; a
    /// stopped bridge likewise. Connected again, the line goes.
    @Test func aBrokerOutageIsSaidAboveTheBoards() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        let device = FakeDevice(fixture.broker, device: "p1-a")
        device.online()
        #expect(fixture.waitFor("SELECT broker_state FROM sensor_bridges", "connected"), "\(bridge.stderr)")
        func fleet() throws -> String { try runBridge(["fleet", "--database", fixture.url]).out }
        #expect(try !fleet().contains("BROKER LOST"))
        fixture.broker.stop()
        // (How long ago depends on how fast this machine runs the view: any age.)
        #expect(eventually(20) { (try? fleet())?.hasPrefix("BROKER LOST: bridge parkwise-bridge lost \(fixture.broker.url) ") == true },
                "\((try? fleet()) ?? "")\n\(bridge.stderr)")
        let table = try fleet()
        #expect(table.split(separator: "\n").allSatisfy { $0.count <= 80 }
                && table.split(separator: "\n").prefix(3).map { $0.trimmingPrefix("  ") }.joined(separator: " ")
                    .contains("the boards below are as of then: an OFFLINE may be the stopping broker's will, a STALE its outage"), "\(table)")
        try fixture.broker.start()
        #expect(eventually(30) { (try? fleet()).map { !$0.contains("BROKER LOST") && $0.contains("p1-a") } == true },
                "\((try? fleet()) ?? "")\n\(bridge.stderr)")
        bridge.signal(SIGTERM)
        #expect(bridge.wait(15) == 0, "\(bridge.stderr)")
        let stopped = try fleet()
        #expect(stopped.hasPrefix("NO BRIDGE RUNNING: parkwise-bridge stopped"), "\(stopped)")
    }

    /// Three agents from exported configs (P1 zones A, B, C, each its own device id), one stopped: `monitor --fleet` (the
    /// retained statuses) and `parkwise-bridge fleet` (the bridge's table) show two online with version, boot, outbox
    /// and clock, and the stopped one OFFLINE. A board whose status says online but is an hour old is STALE.
    @Test func theFleetViewShowsOnlineAndStoppedBoards() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        var agents: [Child] = []
        defer { for agent in agents { agent.signal(SIGKILL); _ = agent.wait(5) } }
        for zone in ["A", "B", "C"] {
            let device = "p1-\(zone.lowercased())"
            let (config, list) = try export(fixture, level: "P1", zone: zone, device: device)
            try fillInputs(config)
            let checked = try runAgentCLI(["check-config", config, "--spots", list])
            #expect(checked.code == 0, "\(checked.err)")
            agents.append(try Child(agentBinary, ["run", "--config", config, "--simulate", "--speed", "60", "--sim-start", "08:00",
                                                  "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox-" + device]))
        }
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_devices WHERE online AND status IS NOT NULL", "3", seconds: 30),
                "\(bridge.stderr)\n\(agents.map(\.stderr))")
        agents[1].signal(SIGTERM)
        #expect(agents[1].wait(15) == 0, "\(agents[1].stderr)")
        #expect(fixture.waitFor("SELECT string_agg(device || '=' || online, ' ' ORDER BY device) FROM sensor_devices",
                                "p1-a=true p1-b=false p1-c=true"),
                "\(fixture.query("SELECT string_agg(device || '=' || online, ' ' ORDER BY device) FROM sensor_devices"))")

        func row(_ output: String, _ device: String) -> [Substring] {
            output.split(separator: "\n").first { $0.hasPrefix(device + " ") }?.split(separator: " ", omittingEmptySubsequences: true) ?? []
        }
        // DEVICE STATE FOR VERSION BOOT OUTBOX OLDEST FAULTED CLOCK (the notes on the lines under it)
        let monitor = try runAgentCLI(["monitor", "--broker", fixture.broker.url, "--fleet", "garage"])
        #expect(monitor.code == 0, "\(monitor.err)")
        for device in ["p1-a", "p1-c"] {
            let cells = row(monitor.out, device)
            #expect(cells.count >= 9 && cells[1] == "online" && cells[4] == "1" && cells[8] == "simulated", "\(monitor.out)")
        }
        #expect(row(monitor.out, "p1-b").dropFirst().first == "OFFLINE", "\(monitor.out)")
        #expect(monitor.out.contains("3 boards: 2 online, 1 offline, 0 stale"), "\(monitor.out)")

        let table = try runBridge(["fleet", "--database", fixture.url, "--site", "garage"])
        #expect(table.code == 0, "\(table.err)")
        for device in ["p1-a", "p1-c"] {
            let cells = row(table.out, device)
            #expect(cells.count >= 9 && cells[1] == "online" && cells[4] == "1" && cells[8] == "simulated", "\(table.out)")
        }
        let stopped = row(table.out, "p1-b")
        #expect(stopped.count >= 9 && stopped[1] == "OFFLINE" && stopped[4] == "1" && table.out.contains("last known"), "\(table.out)")
        #expect(table.out.contains("3 boards: 2 online, 1 offline, 0 stale"), "\(table.out)")

        // A board that says it is online but has not been heard for an hour (its broker lost its will, say).
        let ghost = FakeDevice(fixture.broker, device: "p1-ghost")
        ghost.send("status", #"{"at":"\#(wireTime(-3600))","boot":4,"clock":"synced","outbox_depth":7,"since":"\#(wireTime(-7200))","state":"online","version":"0.1.0"}"#,
                   retain: true)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_devices WHERE device = 'p1-ghost' AND online", "1"), "\(bridge.stderr)")
        let withGhost = try runAgentCLI(["monitor", "--broker", fixture.broker.url, "--fleet", "garage", "--stale", "10m"])
        let ghostRow = row(withGhost.out, "p1-ghost")
        #expect(ghostRow.count >= 9 && ghostRow[1] == "STALE" && ghostRow[5] == "7", "\(withGhost.out)")
        #expect(withGhost.out.contains("nothing heard for 1h00m") && withGhost.out.contains("4 boards: 2 online, 1 offline, 1 stale"),
                "\(withGhost.out)")
        fixture.query("UPDATE sensor_devices SET heard_at = now() - interval '1 hour' WHERE device = 'p1-ghost'")
        let bridgeGhost = try runBridge(["fleet", "--database", fixture.url, "--stale", "10m"])
        #expect(row(bridgeGhost.out, "p1-ghost").dropFirst().first == "STALE", "\(bridgeGhost.out)")

        // Issue 33: a board whose clock NTP has not set was never STALE in monitor --fleet (its `at` tells nothing)
        // while the bridge, by its own clock, called it STALE. The agent publishes its status with an MQTT 5 message
        // expiry, and the broker hands the retained copy on with what is left of it: its age by the broker's clock.
        let published = try Child("/usr/bin/mosquitto_sub", ["-p", "\(fixture.broker.port)", "-V", "mqttv5", "-C", "1", "-W", "5",
                                                             "-t", "parkwise/v1/garage/p1-a/status", "-F", "%j"])
        #expect(published.wait(10) == 0 && published.stdout.contains("\"message-expiry-interval\":42949672"), "\(published.stdout)")
        let drift = FakeDevice(fixture.broker, device: "p1-drift")
        drift.send("status", #"{"at":"\#(wireTime())","boot":2,"clock":"unsynced","since":"\#(wireTime(-7200))","state":"online","version":"0.1.0"}"#,
                   retain: true, options: ["-V", "mqttv5", "-D", "publish", "message-expiry-interval", "\(UInt32.max - 3600)"])
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_devices WHERE device = 'p1-drift' AND online", "1"), "\(bridge.stderr)")
        fixture.query("UPDATE sensor_devices SET heard_at = now() - interval '1 hour' WHERE device = 'p1-drift'")
        let monitorDrift = try runAgentCLI(["monitor", "--broker", fixture.broker.url, "--fleet", "garage", "--stale", "10m"])
        let bridgeDrift = try runBridge(["fleet", "--database", fixture.url, "--stale", "10m"])
        for view in [monitorDrift.out, bridgeDrift.out] {
            #expect(row(view, "p1-drift").dropFirst().first == "STALE" && row(view, "p1-drift").last == "unsynced", "\(view)")
            #expect(view.contains("nothing heard for 1h00m"), "\(view)")
        }
    }
}

/// Runs the agent binary to completion (check-config, monitor --fleet).
private func runAgentCLI(_ arguments: [String]) throws -> (code: Int32, out: String, err: String) {
    try runToCompletion(agentBinary, arguments)
}
