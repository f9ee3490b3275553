import Foundation
import TestSupport
import Testing

/// The built binary, as installers and scripts run it.
@Suite struct CLITests {
    @Test func helpListsSubcommandsAndExitsZero() throws {
        let r = try runAgent(["--help"])
        #expect(r.code == 0)
        #expect(r.out.hasPrefix("OVERVIEW: ParkWise gate & sensor agent"))
        #expect(r.out.contains("USAGE: parkwise-agent <subcommand>"))
        for name in ["run", "check-config", "monitor", "version", "help"] { #expect(r.out.contains("\n  \(name) ")) }
        // Where to start on site, before anything else: doctor, then walk-test, then status, one line each.
        let lines = r.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let onSite = try #require(lines.firstIndex(of: "ON SITE (in this order):"), "\(r.out)")
        #expect(onSite < (lines.firstIndex { $0.hasPrefix("USAGE:") } ?? 0))
        #expect(lines[onSite + 1].hasPrefix("  1. doctor ") && lines[onSite + 1].contains("each failure with its fix"))
        #expect(lines[onSite + 2].hasPrefix("  2. walk-test ") && lines[onSite + 2].contains("each sensor on its line"))
        #expect(lines[onSite + 3].hasPrefix("  3. status ") && lines[onSite + 3].contains("running service sees"))
        #expect(try runAgent(["help"]).out == r.out)
        let sub = try runAgent(["help", "check-config"])
        #expect(sub.code == 0)
        #expect(sub.out.contains("USAGE: parkwise-agent check-config --config <file> [--spots <file>]"))
        #expect(sub.out.contains("\n  <file>                  The same as --config <file>.\n"))
    }

    @Test func usageErrorsExit64InArgumentParserLayout() throws {
        let none = try runAgent([])
        #expect(none.code == 64)
        #expect(none.err.hasPrefix("Error: Missing expected subcommand"))

        let missing = try runAgent(["check-config"])
        #expect(missing.code == 64)
        #expect(missing.err == """
            Error: Missing expected argument '--config <file>'
            Help: --config <file>         The config file to check (YAML).
            Usage: parkwise-agent check-config --config <file> [--spots <file>]
              See 'parkwise-agent help check-config' for more information.

            """)

        let unknown = try runAgent(["run", "--config", "x.yaml", "--fast"])
        #expect(unknown.code == 64)
        #expect(unknown.err.hasPrefix("Error: Unknown option '--fast'"))

        let typo = try runAgent(["chek-config", "x"])
        #expect(typo.code == 64)
        #expect(typo.err.contains("did you mean 'check-config'?"))

        let count = try runAgent(["monitor", "--broker", "mqtt://127.0.0.1:1", "--count", "abc"], timeout: 5)
        #expect(count.code == 64)
        #expect(count.err.hasPrefix("Error: --count must be a whole number of events, 1 or more\n"), "\(count.err)")
        #expect(count.err.contains("Usage: parkwise-agent monitor"))

        let noConfig = try runAgent(["run"])
        #expect(noConfig.code == 64)
        #expect(noConfig.err.hasPrefix("Error: Missing expected argument '--config <file>'"))
    }

    /// `version` and `--version` print the same line (the bridge's, but for its name: BridgeTests.CLIConventionTests).
    @Test func versionPrints() throws {
        let r = try runAgent(["version"])
        #expect(r.code == 0)
        #expect(r.out.hasPrefix("parkwise-agent "))
        #expect(r.out.hasSuffix(" (wire contract parkwise/v1)\n") && r.out.split(separator: "\n").count == 1, "\(r.out)")
        #expect(try runAgent(["--version"]).out == r.out)
    }

    @Test func checkConfigAcceptsTheShippedExamples() throws {
        for name in ["campus.yaml", "single-gate.yaml"] {
            let r = try runAgent(["check-config", packageRoot + "/hardware/examples/" + name])
            #expect(r.code == 0, "\(name): \(r.err)")
            #expect(r.out.contains(": ok: site uniandes"))
        }
    }

    @Test func checkConfigListsEveryProblemWithFileLineColumnAndExits78() throws {
        let dir = temporaryDirectory()
        let path = dir.appendingPathComponent("bad.yaml").path
        try """
        site: uniandes
        device: p2-east
        bord: simulated
        levels:
          - { id: P2, capacity: 1 }
        lanes:
          - { id: ramp, from: outside, to: P4, loops: { a: GPIO17, b: pin 11 } }
        spots:
          - { id: P2-A-01, input: GPIO22 }
          - { id: P2-A-02, input: GPIO23 }
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runAgent(["check-config", path])
        #expect(r.code == 78)
        let lines = r.err.split(separator: "\n").map(String.init)
        #expect(lines.contains("\(path):3:1: error: unknown key 'bord' in the config file"))
        #expect(lines.contains("    hint: did you mean 'board'?"))
        #expect(lines.contains { $0.hasPrefix("\(path):7:36: error: lane points at unknown level 'P4'") })
        #expect(lines.contains { $0.hasPrefix("\(path):7:63: error: lane ramp loop b uses line pin 11 which lane ramp loop a already uses") })
        #expect(lines.contains { $0.hasPrefix("\(path):9:27: error: level P2 has capacity 1 but 2 spots") })
        #expect(lines.last == "\(path): 4 problems found")
    }

    @Test func runWithABadConfigExits78WithoutTouchingTheNetwork() throws {
        let dir = temporaryDirectory()
        let path = dir.appendingPathComponent("bad.yaml").path
        try "site: x\n".write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runAgent(["run", "--config", path])
        #expect(r.code == 78)
        #expect(r.err.contains("\(path):1:1: error: missing required key 'device'"))
    }

    /// The summary counts in the garage's words, singular for one (issue 33: "1 level (1 spaces)").
    @Test func checkConfigSaysOneSpaceNotOneSpaces() throws {
        let path = temporaryDirectory().appendingPathComponent("one.yaml").path
        try writeOneSpotConfig(path)
        let r = try runAgent(["check-config", path])
        #expect(r.code == 0, "\(r.err)")
        #expect(r.out.contains("1 level (1 space), 0 lanes, 1 spot, 1 input"), "\(r.out)")
    }

    @Test func aCredentialsFileOthersCanReadIsRefused() throws {
        let dir = temporaryDirectory()
        let secrets = dir.appendingPathComponent("credentials").path
        try "username=p2-east\npassword=hunter2\n".write(toFile: secrets, atomically: true, encoding: .utf8)
        chmod(secrets, 0o644)
        let path = dir.appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: p2-east
        board: simulated
        mqtt: { brokers: ["mqtt://127.0.0.1:1"], credentials: \(secrets) }
        levels: [ { id: P2, capacity: 4 } ]
        spots: [ { id: P2-A-01, input: GPIO22 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try runAgent(["run", "--config", path])
        #expect(r.code == 78)
        #expect(r.err.contains("readable by group or others (mode 644)"))
        #expect(r.err.contains("chmod 600"))
        #expect(!r.err.contains("hunter2"))
    }

    /// An installer not in the config's group (the package's /etc/parkwise-agent is 0750 root:parkwise) is told to
    /// run as the service's user, not to check a path that is right. Here the group is `daemon` and the installer
    /// `nobody`, started by root through setpriv.
    @Test(.enabled(if: getuid() == 0, "needs root: to run the agent as another user"))
    func aConfigInADirectoryItMayNotEnterSaysPermissionDeniedAndWhomToRunAs() throws {
        let dir = temporaryDirectory()
        let etc = dir.appendingPathComponent("etc").path
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: false)
        let group = getgrnam("daemon")!.pointee.gr_gid
        #expect(chown(etc, 0, group) == 0 && chmod(etc, 0o750) == 0)
        let path = etc + "/agent.yaml"
        try "site: uniandes\ndevice: p2-east\n".write(toFile: path, atomically: true, encoding: .utf8)
        for command in [["check-config", path], ["lines", "--config", path]] {
            let r = try runAgentProgram("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", agentBinary] + command)
            #expect(r.code == 78, "\(command[0]): \(r.err)")
            #expect(r.err.contains("\(path):1:1: error: cannot read the config file: permission denied"), "\(r.err)")
            #expect(r.err.contains("hint: run it as the service's user (sudo -u daemon COMMAND), or as a member of group daemon "
                                   + "(\(etc) is mode 750, group daemon)"), "\(r.err)")
        }
    }
}

@Suite struct LinesCommandTests {
    /// At a desk without GPIO: the header drawing an installer wires from.
    @Test func drawsTheHeaderWithEachSensorOnItsPin() throws {
        let r = try runAgent(["lines", "--config", packageRoot + "/hardware/examples/single-gate.yaml"])
        #expect(r.code == 0, "\(r.err)")
        let lines = r.out.split(separator: "\n").map(String.init)
        #expect(lines.contains("lane lot-b-gate loop a, active low, pull-up GPIO17 (11|12) GPIO18 "))
        #expect(lines.contains("lane lot-b-gate loop b, active low, pull-up GPIO27 (13|14) GND    "))
        #expect(lines.contains { $0.hasSuffix("GPIO2 ( 3|4 ) 5V     ") })
        #expect(r.out.contains("2 sensors on it"))
    }

    /// Expanders on I2C bus 1 take GPIO2/3 (SDA/SCL): the drawing marks them, so nobody wires a sensor there; the
    /// count of sensors on the header stays the sensors'.
    @Test func marksGPIO2And3AsTheI2CBusOfTheExpanders() throws {
        let r = try runAgent(["lines", "--config", packageRoot + "/hardware/examples/campus.yaml"])
        #expect(r.code == 0, "\(r.err)")
        let lines = r.out.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasSuffix("I2C bus 1 SDA (8 expanders)  GPIO2 ( 3|4 ) 5V     ") }, "\(r.out)")
        #expect(lines.contains { $0.hasSuffix("I2C bus 1 SCL (8 expanders)  GPIO3 ( 5|6 ) GND    ") }, "\(r.out)")
        // Its second bus (3-00xx chips) takes GPIO4/5 (issue 33: left free for sensors).
        #expect(lines.contains { $0.contains("I2C bus 3 SDA (") && $0.contains("GPIO4 ( 7|8 )") }, "\(r.out)")
        #expect(lines.contains { $0.contains("I2C bus 3 SCL (") && $0.contains("GPIO5 (29|30)") }, "\(r.out)")
        #expect(r.out.contains("; 8 sensors on it"), "\(r.out)")
        // Without expanders (single-gate.yaml) the pins stay unmarked.
        let plain = try runAgent(["lines", "--config", packageRoot + "/hardware/examples/single-gate.yaml"])
        #expect(!plain.out.contains("I2C bus"), "\(plain.out)")
    }

    @Test func withoutChipsOrConfigItSaysSoAndFails() throws {
        guard !FileManager.default.fileExists(atPath: "/dev/gpiochip0") else { return }
        let r = try runAgent(["lines"])
        #expect(r.code == 1)
        #expect(r.out.contains("no GPIO chips on this machine"))
    }
}

@Suite struct StateDirectoryTests {
    /// Two agents on one outbox would corrupt it: the second refuses to start and says why.
    @Test func aSecondAgentOnTheSameOutboxRefuses() throws {
        let dir = temporaryDirectory()
        let config = try writeGarage(dir)
        let args = ["run", "--config", config, "--replay", try writeTrace(dir, ""), "--broker", "mqtt://127.0.0.1:\(freePort())",
                    "--outbox", dir.path + "/outbox"]
        let first = try Child(agentBinary, args)
        #expect(eventually(10) { first.stderr.contains("agent running") })
        let second = try runAgent(args)
        #expect(second.code == 1)
        #expect(second.err.contains("another parkwise-agent (pid \(first.pid)) is using \(dir.path)/outbox"))
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)
    }
}

@Suite struct MonitorTests {
    /// The monitor shows what a backend sees: the level view and a line per event.
    @Test func showsLevelsAndEvents() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let monitor = try Child(agentBinary, ["monitor", "--broker", broker.url, "--site", "testsite", "--count", "5"])
        #expect(eventually(5) { monitor.stdout.contains("monitor: connected") })
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir),
                                            "--speed", "4", "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(monitor.wait(20) == 0, "monitor did not end after 5 events: \(monitor.stdout)")
        let out = monitor.stdout
        #expect(out.contains("p2-east: online"))
        #expect(out.contains("levels p2-east: P2 ?/48"))
        #expect(out.contains("#1  spot.occupied   P2-A-01"))
        #expect(out.contains("#2  lane.passage    P2-ramp outside -> P2"))
        #expect(out.contains("#5  spot.checkout   P2-A-01"))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }
}

extension MonitorTests {
    /// Two devices of one site may report the same level: each keeps its own line. An offline
    /// device's levels are marked as last known, and a device that says it is online but sends
    /// nothing (a retained `online` outliving it) is marked stale.
    @Test func keepsDevicesApartAndMarksOfflineAndStaleOnes() throws {
        let broker = try Broker()
        let monitor = try Child(agentBinary, ["monitor", "--broker", broker.url, "--stale", "2s"])
        #expect(eventually(5) { monitor.stdout.contains("monitor: connected") })
        let level = { (n: Int) in "{\"capacity\": 20, \"occupied\": \(n), \"free\": \(20 - n), \"source\": \"lanes\", "
            + "\"spots_sensed\": 0, \"spots_occupied\": 0, \"spots_unknown\": 0, \"lane_count\": \(n)}" }
        try publish(broker, "parkwise/v1/s/gate-1/status", "{\"state\": \"online\", \"boot\": 1}")
        try publish(broker, "parkwise/v1/s/gate-2/status", "{\"state\": \"online\", \"boot\": 4}")
        try publish(broker, "parkwise/v1/s/gate-1/state/level/P1", level(3))
        try publish(broker, "parkwise/v1/s/gate-2/state/level/P1", level(7))
        #expect(eventually(5) { monitor.stdout.contains("levels gate-1: P1 3/20") && monitor.stdout.contains("levels gate-2: P1 7/20") },
                "\(monitor.stdout)")
        try publish(broker, "parkwise/v1/s/gate-1/status", "{\"state\": \"offline\", \"boot\": 1}")
        #expect(eventually(5) { monitor.stdout.contains("gate-1: offline (boot 1), its levels are as last known") }, "\(monitor.stdout)")
        #expect(eventually(5) { monitor.stdout.contains("levels gate-1 (offline, last known): P1 3/20") }, "\(monitor.stdout)")
        // gate-2 says online and then nothing: stale after 2 s; the offline gate-1 is not.
        #expect(eventually(10) { monitor.stdout.contains("gate-2: stale, nothing heard for") }, "\(monitor.stdout)")
        #expect(!monitor.stdout.contains("gate-1: stale"), "\(monitor.stdout)")
        try publish(broker, "parkwise/v1/s/gate-2/state/level/P1", level(8))
        #expect(eventually(5) { monitor.stdout.contains("gate-2: heard again") && monitor.stdout.contains("levels gate-2: P1 8/20") },
                "\(monitor.stdout)")
        monitor.signal(SIGTERM)
        #expect(monitor.wait(10) == 0)
    }

    /// The monitor has no outbox: with no broker it says it retries, not an agent's log line.
    @Test func anUnreachableBrokerIsNotReportedAsAnAgentWould() throws {
        let monitor = try Child(agentBinary, ["monitor", "--broker", "mqtt://127.0.0.1:\(freePort())"])
        #expect(eventually(10) { monitor.stderr.contains("broker unreachable, retrying") }, "\(monitor.stderr)")
        #expect(!monitor.stderr.contains("outbox"), "\(monitor.stderr)")
        monitor.signal(SIGTERM)
        #expect(monitor.wait(10) == 0)
    }

    /// Values from the network are not trusted: an absurd stay is shown as unknown, not a crash.
    @Test func anAbsurdStayFromTheNetworkIsShownAsUnknown() throws {
        let broker = try Broker()
        let monitor = try Child(agentBinary, ["monitor", "--broker", broker.url, "--count", "3"])
        #expect(eventually(5) { monitor.stdout.contains("monitor: connected") })
        for (seq, stay) in [(1, "1e300"), (2, "-5"), (3, "2520")] {
            try publish(broker, "parkwise/v1/s/d/events", "{\"id\": \"x\", \"seq\": \(seq), \"boot\": 1, \"type\": \"spot.checkout\", "
                        + "\"at\": \"2026-01-01T00:00:00.000Z\", \"clock\": \"synced\", \"spot\": \"P1-A-01\", \"stay_s\": \(stay)}")
        }
        #expect(monitor.wait(10) == 0, "\(monitor.stdout)\(monitor.stderr)")
        #expect(monitor.stdout.contains("#1  spot.checkout   P1-A-01 stayed ?"))
        #expect(monitor.stdout.contains("#2  spot.checkout   P1-A-01 stayed ?"))
        #expect(monitor.stdout.contains("#3  spot.checkout   P1-A-01 stayed 42m"))
    }
}

@Suite struct DiagnoseTests {
    /// A technician's view: raw changes and events live, a summary on Ctrl-C, and a recording that
    /// is the same trace again (so it replays the same at a desk).
    @Test func showsChangesAndEventsAndRecordsTheTrace() throws {
        let dir = temporaryDirectory()
        let recording = dir.appendingPathComponent("recorded.jsonl").path
        let child = try Child(agentBinary, ["diagnose", "--config", try writeGarage(dir), "--replay", try writeTrace(dir),
                                            "--speed", "4", "--record", recording])
        #expect(eventually(15) { child.stdout.contains("spot.checkout") }, "\(child.stdout)\(child.stderr)")
        child.signal(SIGINT)
        #expect(child.wait(10) == 0)
        let out = child.stdout
        #expect(out.contains("diagnosing 4 inputs of testsite/p2-east"))
        #expect(out.contains("GPIO22         1  spot P2-A-01"))
        #expect(out.contains("event lane.passage P2-ramp outside -> P2"))
        #expect(out.contains("summary after"))
        #expect(out.contains("GPIO17         2        0     0         ok  lane P2-ramp loop a"))
        let recorded = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(recorded.first?.hasPrefix("{\"parkwise_trace\": 1") == true)
        let original = garageTrace.split(separator: "\n").dropFirst().map(String.init)
        #expect(Array(recorded.dropFirst()) == original)
    }
}

@Suite struct JournalTests {
    /// Under systemd (stderr is the stream JOURNAL_STREAM names) every line starts with its syslog
    /// priority, so `journalctl -p warning` finds the warnings; anywhere else lines stay plain.
    @Test(arguments: [true, false])
    func linesCarryTheirPriorityOnlyWhenStderrIsTheJournal(journal: Bool) throws {
        let dir = temporaryDirectory()
        // The stream's device and inode, as systemd would set them (or a stream that is not stderr).
        let stream = journal ? "$(stat -L -c %d:%i /proc/self/fd/2)" : "1:1"
        let agent = try Child("/bin/sh", ["-c", "JOURNAL_STREAM=\(stream) exec \"$0\" \"$@\"", agentBinary,
                                          "run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, ""),
                                          "--broker", "mqtt://127.0.0.1:\(freePort())", "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { agent.stderr.contains("broker unreachable") }, "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        let lines = agent.stderr.split(separator: "\n")
        let info = lines.first { $0.contains("info agent running") }
        let warn = lines.first { $0.contains("warn broker unreachable") }
        #expect(info?.hasPrefix(journal ? "<6>info " : "info ") == true, "\(agent.stderr)")
        #expect(warn?.hasPrefix(journal ? "<4>warn " : "warn ") == true, "\(agent.stderr)")
    }
}
