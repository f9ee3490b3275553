import Foundation
import TestSupport
import Testing

/// `parkwise-agent walk-test` driven by replayed traces: each trace is what the lines would do while an
/// installer walks a small garage (a lane, two spots), wired right or with one of the usual mistakes.
@Suite struct WalkTestCommandTests {
    static let config = """
    site: testsite
    device: walk
    board: raspberry-pi-4
    levels:
      - { id: P1, capacity: 10 }
    lanes:
      - { id: ramp, from: outside, to: P1, loops: { a: GPIO17, b: GPIO27 } }
    spots:
      - { id: P1-A-01, input: GPIO22, delayed_on: 200ms, delayed_off: 200ms }
      - { id: P1-A-02, input: GPIO23, delayed_on: 200ms, delayed_off: 200ms }
    """

    /// The lane driven a then b, then each spot covered and uncovered, from `start` ms; `spotLines` in walk order.
    static func walkTrace(loops: (String, String) = ("GPIO17", "GPIO27"), spotLines: [String] = ["GPIO22", "GPIO23"],
                          restActive: String? = nil) -> String {
        var lines = ["{\"parkwise_trace\": 1}"]
        if let restActive { lines.append("{\"t_ms\": 0, \"input\": \"\(restActive)\", \"value\": 1}") }
        lines += [(100, loops.0, 1), (300, loops.1, 1), (600, loops.0, 0), (800, loops.1, 0)].map(line)
        var t = 2000
        for spot in spotLines {
            let covered = spot == restActive ? 0 : 1
            lines.append(line((t, spot, covered)))
            lines.append(line((t + 500, spot, 1 - covered)))
            t += 2000
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func line(_ c: (Int, String, Int)) -> String { "{\"t_ms\": \(c.0), \"input\": \"\(c.1)\", \"value\": \(c.2)}" }

    /// A config of site testsite on a Raspberry Pi 4 (`body`: its levels, lanes and spots) and a trace of `changes`,
    /// written in `dir`: their paths.
    func files(in dir: URL, device: String, _ body: String, trace changes: [(Int, String, Int)]) throws -> (config: String, trace: String) {
        let config = dir.appendingPathComponent("\(device).yaml").path
        try "site: testsite\ndevice: \(device)\nboard: raspberry-pi-4\n\(body)".write(toFile: config, atomically: true, encoding: .utf8)
        let trace = dir.appendingPathComponent("\(device).jsonl").path
        try ((["{\"parkwise_trace\": 1}"] + changes.map(Self.line)).joined(separator: "\n") + "\n")
            .write(toFile: trace, atomically: true, encoding: .utf8)
        return (config, trace)
    }

    /// Runs a walk over `trace` and returns the exit code, the JSON report on stdout and the prompts on stderr.
    func walk(_ trace: String, extra: [String] = [], dir: URL = temporaryDirectory()) throws -> (Int32, [String: Any], String) {
        let configPath = dir.appendingPathComponent("walk.yaml").path
        try Self.config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let tracePath = dir.appendingPathComponent("walk.jsonl").path
        try trace.write(toFile: tracePath, atomically: true, encoding: .utf8)
        let (code, out, err) = try runAgent(["walk-test", "--config", configPath, "--replay", tracePath, "--speed", "4",
                                             "--report", dir.appendingPathComponent("report.json").path, "--json"] + extra)
        let report = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] ?? [:]
        return (code, report, err)
    }

    func verdicts(_ report: [String: Any]) -> [String] {
        ((report["steps"] as? [[String: Any]]) ?? []).map { "\($0["id"] ?? "?") \($0["verdict"] ?? "?")" }
    }

    @Test func correctWiringIsConfirmedAndExitsZero() throws {
        let (code, report, err) = try walk(Self.walkTrace())
        #expect(verdicts(report) == ["ramp confirmed", "P1-A-01 confirmed", "P1-A-02 confirmed"], "\(err)")
        #expect(code == 0)
        #expect(err.contains("[2/3] Cover P1-A-01 now — sensor on GPIO22"))
    }

    /// One spot, one step: "1 step", not "1 steps".
    @Test func oneStepIsSaidInTheSingular() throws {
        let dir = temporaryDirectory()
        let (configPath, tracePath) = try files(in: dir, device: "walk", """
            levels: [ { id: P1, capacity: 10 } ]
            spots: [ { id: P1-A-01, input: GPIO22, delayed_on: 200ms, delayed_off: 200ms } ]
            """, trace: [(500, "GPIO22", 1), (1000, "GPIO22", 0)])
        let (_, _, err) = try runAgent(["walk-test", "--config", configPath, "--replay", tracePath, "--speed", "4",
                                        "--report", dir.appendingPathComponent("report.json").path, "--json"])
        #expect(err.contains("walk-test of testsite/walk: 1 step, 0 already judged"), "\(err)")
    }

    @Test func aSwappedPairIsNamedBothWays() throws {
        let (code, report, err) = try walk(Self.walkTrace(spotLines: ["GPIO23", "GPIO22"]))
        #expect(verdicts(report) == ["ramp confirmed", "P1-A-01 swapped", "P1-A-02 swapped"], "\(err)")
        let steps = report["steps"] as? [[String: Any]] ?? []
        #expect(steps.count == 3 && steps[1]["other"] as? String == "spot P1-A-02" && steps[2]["other"] as? String == "spot P1-A-01")
        #expect(code == 1)
    }

    @Test func anInputActiveAtRestIsAPolarityVerdict() throws {
        let (code, report, err) = try walk(Self.walkTrace(restActive: "GPIO22"))
        #expect(verdicts(report) == ["ramp confirmed", "P1-A-01 polarity", "P1-A-02 confirmed"], "\(err)")
        #expect(err.contains("spot P1-A-01 (GPIO22) reads active at rest"))
        let steps = report["steps"] as? [[String: Any]] ?? []
        #expect((steps.dropFirst().first?["detail"] as? String)?.contains("active_low: true") == true)
        #expect(code == 1)
    }

    @Test func loopsTriggeredBThenAAreSwapped() throws {
        let (code, report, err) = try walk(Self.walkTrace(loops: ("GPIO27", "GPIO17")))
        #expect(verdicts(report) == ["ramp loops_swapped", "P1-A-01 confirmed", "P1-A-02 confirmed"], "\(err)")
        #expect(code == 1)
    }

    @Test func bounceFarBeyondTheFilterIsBouncy() throws {
        var trace = Self.walkTrace(spotLines: ["GPIO23"]).split(separator: "\n").map(String.init)
        trace.removeLast(2)  // P1-A-01 bounces instead: 12 edges within its 200 ms window
        for n in 0..<12 { trace.append(Self.line((2000 + n * 10, "GPIO22", n % 2 == 0 ? 1 : 0))) }
        trace.append(Self.line((2200, "GPIO22", 1)))
        trace.append(Self.line((4000, "GPIO23", 1)))
        let (code, report, err) = try walk(trace.joined(separator: "\n") + "\n")
        #expect(verdicts(report) == ["ramp confirmed", "P1-A-01 bouncy", "P1-A-02 confirmed"], "\(err)")
        #expect(code == 1)
    }

    @Test func aWalkCutShortResumesFromItsReport() throws {
        let dir = temporaryDirectory()
        // Only the lane is driven: the spots stay untested.
        let lane = Self.walkTrace(spotLines: [])
        let (first, report, err) = try walk(lane, dir: dir)
        #expect(verdicts(report) == ["ramp confirmed", "P1-A-01 untested", "P1-A-02 untested"], "\(err)")
        #expect(first == 1)
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("report.txt").path))
        // The second run starts at P1-A-01 and keeps the lane's verdict.
        let spots = "{\"t_ms\": 500, \"input\": \"GPIO22\", \"value\": 1}\n{\"t_ms\": 2500, \"input\": \"GPIO23\", \"value\": 1}\n"
        let (second, resumed, err2) = try walk(spots, dir: dir)
        #expect(verdicts(resumed) == ["ramp confirmed", "P1-A-01 confirmed", "P1-A-02 confirmed"], "\(err2)")
        #expect(err2.contains("[2/3] Cover P1-A-01"))
        #expect(second == 0)
    }

    /// A report it cannot write stops the walk before the first step, not after a whole walk saved nowhere.
    @Test func aReportPathItCannotWriteStopsItBeforeTheFirstStep() throws {
        let dir = temporaryDirectory()
        let configPath = dir.appendingPathComponent("walk.yaml").path
        try Self.config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let tracePath = dir.appendingPathComponent("walk.jsonl").path
        try Self.walkTrace().write(toFile: tracePath, atomically: true, encoding: .utf8)
        let report = dir.path + "/missing/walk-P1.json"
        let (code, out, err) = try runAgent(["walk-test", "--config", configPath, "--replay", tracePath, "--speed", "4",
                                             "--report", report])
        #expect(code == 1)
        #expect(err.contains("error: cannot write the report \(report) as "), "\(err)")
        #expect(err.contains(": open \(report).tmp: No such file or directory"), "\(err)")
        #expect(err.contains("hint: give --report a path that user may write, e.g. /var/lib/parkwise-agent/walk-walk.json"), "\(err)")
        #expect(!out.contains("[1/3]"), "no step is asked for: \(out)")
    }

    /// The config and a trace in which nothing happens for 30 s: only the keys move the walk on.
    func quietWalk() throws -> (URL, String, String) {
        let dir = temporaryDirectory()
        let configPath = dir.appendingPathComponent("walk.yaml").path
        try Self.config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let tracePath = dir.appendingPathComponent("walk.jsonl").path
        try "{\"t_ms\": 30000, \"input\": \"GPIO22\", \"value\": 1}\n".write(toFile: tracePath, atomically: true, encoding: .utf8)
        return (dir, configPath, tracePath)
    }

    @Test func skipAndQuitThroughAPipe() throws {
        let (dir, configPath, tracePath) = try quietWalk()
        let child = try Child(agentBinary, ["walk-test", "--config", configPath, "--replay", tracePath,
                                            "--report", dir.appendingPathComponent("report.json").path], input: true)
        #expect(eventually(10) { child.stdout.contains("[1/3] Drive over lane ramp") }, "\(child.stdout)\(child.stderr)")
        child.send("skip\n")
        #expect(eventually(10) { child.stdout.contains("[2/3] Cover P1-A-01") }, "\(child.stdout)")
        child.send("quit\n")
        #expect(child.wait(10) == 1)
        #expect(child.stdout.contains("! ramp skipped"))
        #expect(child.stdout.contains("1 skipped, 2 untested"), "\(child.stdout)")
    }

    /// On a terminal (a pty from script(1)) one key press is enough: the terminal is in non-canonical mode.
    @Test func singleKeysOnATerminal() throws {
        let (dir, configPath, tracePath) = try quietWalk()
        let command = "\(agentBinary) walk-test --config \(configPath) --replay \(tracePath) --report \(dir.path)/report.json"
        let child = try Child("/usr/bin/script", ["-qfec", command, "/dev/null"], input: true)
        #expect(eventually(10) { child.stdout.contains("(s skip, r retry, q quit)") }, "\(child.stdout)\(child.stderr)")
        child.send("s")   // no newline: a canonical-mode terminal would hold it back
        #expect(eventually(10) { child.stdout.contains("[2/3] Cover P1-A-01") }, "\(child.stdout)")
        child.send("q")
        #expect(child.wait(10) == 1, "\(child.stdout)")
        #expect(child.stdout.contains("1 skipped, 2 untested"))
    }

    @Test func aRunningServiceIsNamedInsteadOfFightingForTheLines() throws {
        let dir = temporaryDirectory()
        let outbox = dir.appendingPathComponent("outbox").path
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let configPath = dir.appendingPathComponent("walk.yaml").path
        try (Self.config + "\noutbox: { path: \(outbox) }\n").write(toFile: configPath, atomically: true, encoding: .utf8)
        // This test process holds the lock the way a running service does (flock on agent.lock).
        let fd = open(outbox + "/agent.lock", O_RDWR | O_CREAT, 0o640)
        #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
        defer { close(fd) }
        _ = "pid 4242".withCString { write(fd, $0, 8) }
        let (code, _, err) = try runAgent(["walk-test", "--config", configPath])
        #expect(code == 1)
        #expect(err.contains("the parkwise-agent service is running"), "\(err)")
        #expect(err.contains("systemctl stop parkwise-agent") && err.contains("pid 4242"))
    }

    /// Issue 33: `walk-test --learn --replay` refused to run without GPIO chips (it opened the board whatever
    /// `--replay` said), so an installer could not rehearse the learning at a desk. From a trace, it watches the lines
    /// the trace moves: each covered spot's line is written into the config, a line the lane has is refused, and a
    /// line high at rest (its value at 0 ms) is learned active-low; check-config then passes the file.
    @Test func theWiringIsLearnedFromATraceWithoutGPIO() throws {
        let dir = temporaryDirectory()
        let (configPath, tracePath) = try files(in: dir, device: "learn", """
            levels:
              - { id: P1, capacity: 10 }
            lanes:
              - { id: ramp, from: outside, to: P1, loops: { a: GPIO17, b: GPIO27 } }
            spots:
              - { id: "P1-A-01", input: UNSET, delayed_on: 200ms }   # A01 EV
              - { id: "P1-A-02", input: UNSET, delayed_on: 200ms }
              - { id: "P1-A-03", input: UNSET, delayed_on: 200ms }

            """, trace: [(0, "GPIO26", 1), (1000, "GPIO22", 1), (1600, "GPIO22", 0), (3000, "GPIO17", 1), (3600, "GPIO17", 0),
                         (5000, "GPIO23", 1), (5600, "GPIO23", 0), (7000, "GPIO26", 0), (7600, "GPIO26", 1)])
        let report = dir.appendingPathComponent("learn.txt").path
        let (code, out, err) = try runAgent(["walk-test", "--learn", "--config", configPath, "--replay", tracePath, "--speed", "4",
                                             "--report", report])
        #expect(code == 0, "\(out)\n\(err)")
        #expect(out.contains("watching 3 free lines (1 the config has already)"), "\(out)")
        #expect(out.contains("P1-A-02: the line that moved, GPIO17, is lane ramp loop a's already"), "\(out)")
        let learned = try String(contentsOfFile: configPath, encoding: .utf8)
        #expect(learned.contains(#"{ id: "P1-A-01", input: GPIO22, delayed_on: 200ms }   # A01 EV"#), "\(learned)")
        #expect(learned.contains(#"{ id: "P1-A-02", input: GPIO23, delayed_on: 200ms }"#), "\(learned)")
        #expect(learned.contains(#"{ id: "P1-A-03", input: GPIO26, active_low: true, delayed_on: 200ms }"#), "\(learned)")
        #expect(try runAgent(["check-config", configPath]).0 == 0)
        #expect(FileManager.default.fileExists(atPath: report))
    }
}
