@testable import AgentKit
import Foundation
import TestSupport
import ParkWiseContract
import Testing

/// Validates JSON messages against deploy/backend/schemas with Python's jsonschema (Debian:
/// python3-jsonschema). Missing Python or jsonschema is an error, never a skipped check.
enum SchemaCheck {
    static let directory = packageRoot + "/deploy/backend/schemas"
    static let names = ["event", "status", "spot-state", "level-state", "reply", "cmd-rebirth", "cmd-calibrate", "cmd-diag",
                        "cmd-loglevel"]

    /// One message to check: the schema it claims to follow, where it came from, its raw text.
    struct Item: Codable {
        var schema: String
        var label: String
        var payload: String
    }

    /// Reads the schema directory and a JSON-lines file of items; checks each schema (and its
    /// examples), then prints one line per item: `[]` when valid, else the error messages.
    static let script = #"""
    import json, sys, os
    import jsonschema
    schema_dir, items_path = sys.argv[1], sys.argv[2]
    validators = {}
    for name in os.listdir(schema_dir):
        if not name.endswith(".schema.json"):
            continue
        with open(os.path.join(schema_dir, name)) as f:
            schema = json.load(f)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        v = cls(schema)
        for i, example in enumerate(schema.get("examples", [])):
            errors = [e.message for e in v.iter_errors(example)]
            if errors:
                sys.exit("schema %s: example %d is invalid: %s" % (name, i, errors))
        validators[name[: -len(".schema.json")]] = v
    with open(items_path) as f:
        for line in f:
            item = json.loads(line)
            v = validators.get(item["schema"])
            if v is None:
                print(json.dumps(["no schema named %r" % item["schema"]]))
                continue
            try:
                payload = json.loads(item["payload"])
            except ValueError as e:
                print(json.dumps(["not JSON: %s" % e]))
                continue
            print(json.dumps(["%s at %s" % (e.message, "/".join(map(str, e.absolute_path)))
                              for e in v.iter_errors(payload)]))
    """#

    /// A python3 that can import jsonschema: Debian's first, then the one on PATH.
    static func python() throws -> String {
        var candidates = ["/usr/bin/python3"]
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(dir)/python3")
        }
        for path in candidates where FileManager.default.isExecutableFile(atPath: path) {
            let probe = try Child(path, ["-c", "import jsonschema; jsonschema.Draft202012Validator"])
            if probe.wait(20) == 0 { return path }
        }
        throw HarnessError("""
            no python3 with the jsonschema module (tried \(candidates.joined(separator: ", "))): \
            the contract cannot be checked. Install it: apt-get install python3-jsonschema
            """)
    }

    /// The errors of each item, in order (empty: valid).
    static func validate(_ items: [Item]) throws -> [[String]] {
        let dir = temporaryDirectory()
        let path = dir.appendingPathComponent("messages.jsonl").path
        let encoder = JSONEncoder()
        let lines = try items.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let child = try Child(try python(), ["-c", script, directory, path])
        guard let code = child.wait(60) else { throw HarnessError("schema validation did not finish") }
        guard code == 0 else { throw HarnessError("schema validation failed to run (exit \(code)): \(child.stderr)") }
        let results = child.stdout.split(separator: "\n").map { line in
            (try? JSONDecoder().decode([String].self, from: Data(line.utf8))) ?? ["unreadable result: \(line)"]
        }
        guard results.count == items.count else {
            throw HarnessError("\(items.count) messages, \(results.count) results: \(child.stdout) \(child.stderr)")
        }
        return results
    }

    /// The schema a message on `topic` follows; nil for a topic outside the contract.
    static func schema(forTopic topic: String) -> String? {
        guard let rest = Topics.parse(topic)?.rest else { return nil }
        switch rest.count == 1 ? [rest[0]] : Array(rest.prefix(2)) {
        case ["status"]: return "status"
        case ["events"]: return "event"
        case ["reply"]: return "reply"
        case ["state", "spot"] where rest.count == 3: return "spot-state"
        case ["state", "level"] where rest.count == 3: return "level-state"
        case ["cmd", "rebirth"] where rest.count == 2: return "cmd-rebirth"
        case ["cmd", "calibrate"] where rest.count == 2: return "cmd-calibrate"
        case ["cmd", "diag"] where rest.count == 2: return "cmd-diag"
        case ["cmd", "loglevel"] where rest.count == 2: return "cmd-loglevel"
        default: return nil
        }
    }

    /// `message` with `change` applied to its JSON object, as text.
    static func mutated(_ message: Received, _ change: (inout [String: Any]) -> Void) -> String {
        var object = message.json
        change(&object)
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// Three spots (one checks in fast, one chatters, one gets stuck) and a ramp into P2, with short
/// limits so every kind of event happens within seconds.
func writeContractGarage(_ dir: URL, capacity: Int = 200) throws -> String {
    let path = dir.appendingPathComponent("agent.yaml").path
    try """
    site: testsite
    device: contract-dev
    board: simulated
    outbox: { capacity: \(capacity) }
    levels:
      - { id: P2, capacity: 48 }
    lanes:
      - { id: P2-ramp, from: outside, to: P2, loops: { a: GPIO17, b: GPIO27 } }
    spots:
      - { id: P2-A-01, input: GPIO22, delayed_on: 1s, delayed_off: 1s, checkin_after: 2s }
      - { id: P2-A-02, input: GPIO23, delayed_on: 1s, delayed_off: 1s, chatter_limit: 3, recover_after: 2s }
      - { id: P2-A-03, input: GPIO24, delayed_on: 500ms, delayed_off: 500ms, stuck_after: 3s }
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// Trace time (ms): P2-A-01 parks (with bounce) and leaves at 7 s; a car drives down the ramp,
/// another backs out of it, a third drives down at 9 s; P2-A-02 chatters (4 changes in 0.6 s) then
/// is quiet; P2-A-03 is held from 0.2 s to 11 s (stuck after 3 s).
let contractTrace = """
{"parkwise_trace": 1}
{"t_ms": 100, "input": "GPIO22", "value": 1}
{"t_ms": 110, "input": "GPIO22", "value": 0}
{"t_ms": 120, "input": "GPIO22", "value": 1}
{"t_ms": 200, "input": "GPIO24", "value": 1}
{"t_ms": 500, "input": "GPIO17", "value": 1}
{"t_ms": 900, "input": "GPIO27", "value": 1}
{"t_ms": 1000, "input": "GPIO23", "value": 1}
{"t_ms": 1200, "input": "GPIO23", "value": 0}
{"t_ms": 1400, "input": "GPIO23", "value": 1}
{"t_ms": 1600, "input": "GPIO23", "value": 0}
{"t_ms": 1800, "input": "GPIO17", "value": 0}
{"t_ms": 1850, "input": "GPIO23", "value": 1}
{"t_ms": 2000, "input": "GPIO23", "value": 0}
{"t_ms": 2300, "input": "GPIO27", "value": 0}
{"t_ms": 4000, "input": "GPIO17", "value": 1}
{"t_ms": 5000, "input": "GPIO17", "value": 0}
{"t_ms": 7000, "input": "GPIO22", "value": 0}
{"t_ms": 9000, "input": "GPIO17", "value": 1}
{"t_ms": 9400, "input": "GPIO27", "value": 1}
{"t_ms": 10300, "input": "GPIO17", "value": 0}
{"t_ms": 10800, "input": "GPIO27", "value": 0}
{"t_ms": 11000, "input": "GPIO24", "value": 0}
"""

@Suite(.serialized) struct ContractTests {
    let prefix = "parkwise/v1/testsite/contract-dev"

    func items(_ messages: [Received], _ label: String) -> [SchemaCheck.Item] {
        messages.compactMap { m in
            SchemaCheck.schema(forTopic: m.topic).map {
                SchemaCheck.Item(schema: $0, label: "\(label) \(m.retained ? "retained " : "")\(m.topic): \(m.payload)",
                                 payload: m.payload)
            }
        }
    }

    /// Every message a live agent publishes (each event type, status online/offline and the last
    /// will, spot and level states, replies) and every command it accepts follows the schemas; the
    /// schemas reject broken variants of the same messages.
    @Test func everyPublishedMessageFollowsTheSchemas() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let config = try writeContractGarage(dir)
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, contractTrace),
                                            "--speed", "2", "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { subscriber.messages.contains { $0.topic == prefix + "/status" } }, "\(agent.stderr)")
        // Calibrated to a full level, the ramp's next arrival overflows it: level.drift.
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P2", "count": 48, "id": "cal-1"}"#)

        let wanted: Set<String> = ["spot.occupied", "spot.vacated", "spot.checkin", "spot.checkout", "lane.passage",
                                   "lane.aborted", "sensor.fault", "sensor.recovered", "level.drift"]
        func types() -> Set<String> { Set(subscriber.events().compactMap { $0["type"] as? String }) }
        func faultReasons() -> Set<String> {
            Set(subscriber.events().filter { $0["type"] as? String == "sensor.fault" }.compactMap { $0["reason"] as? String })
        }
        #expect(eventually(30) { types().isSuperset(of: wanted) && faultReasons() == ["stuck", "chatter"] },
                "missing \(wanted.subtracting(types())), reasons \(faultReasons()); \(agent.stderr)")
        // Both sensor faults recover (the stuck input is released at 11 s).
        #expect(eventually(10) { subscriber.events().filter { $0["type"] as? String == "sensor.recovered" }.count >= 2 })

        try publish(broker, prefix + "/cmd/rebirth", #"{"id": "r-1"}"#)
        try publish(broker, prefix + "/cmd/rebirth", "{}")
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P2", "id": "bad-1"}"#)
        try publish(broker, prefix + "/cmd/explode", "{}")
        try publish(broker, prefix + "/cmd/diag", #"{"id": "d-1"}"#)
        try publish(broker, prefix + "/cmd/loglevel", #"{"level": "debug", "id": "l-1"}"#)
        func replies() -> [[String: Any]] { subscriber.messages.filter { $0.topic == prefix + "/reply" }.map(\.json) }
        #expect(eventually(10) { replies().count == 7 }, "\(replies())")
        #expect(replies().map { $0["id"] as? String } == ["cal-1", "r-1", nil, "bad-1", nil, "d-1", "l-1"])
        #expect(replies().map { $0["ok"] as? Bool } == [true, true, true, false, false, true, true])

        // Clean stop: offline published by the agent.
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        // A second boot killed without a goodbye: offline published by the broker (last will).
        let second = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(temporaryDirectory(), ""),
                                             "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) {
            subscriber.messages.contains { $0.topic == prefix + "/status" && $0.json["boot"] as? Int == 2 }
        })
        second.signal(SIGKILL)
        _ = second.wait(5)
        func statuses() -> [String] {
            subscriber.messages.filter { $0.topic == prefix + "/status" }
                .map { "\($0.json["state"] ?? "?")/\($0.json["boot"] ?? "?")/\($0.json["connection"] ?? "?")" }
        }
        // Each status, the last will too, names its connection (boot/connection): the first of each boot here.
        #expect(eventually(10) { statuses().last == "offline/2/1" }, "\(statuses())")
        #expect(statuses().contains("offline/1/1"))
        #expect(statuses().allSatisfy { $0.hasSuffix("/1") }, "\(statuses())")
        try subscriber.drain()
        subscriber.stop()
        let live = subscriber.messages
        let retained = try retainedMessages(broker, "parkwise/#")

        // Every topic is in the contract (the deliberately unknown command aside).
        let outside = live.filter { SchemaCheck.schema(forTopic: $0.topic) == nil && $0.topic != prefix + "/cmd/explode" }
        #expect(outside.isEmpty, "messages outside the contract: \(outside.map(\.topic))")

        var checks = items(live, "live") + items(retained, "retained")
        let valid = checks.filter { !$0.payload.contains("\"bad-1\"") || $0.schema != "cmd-calibrate" }
        #expect(Set(valid.map(\.schema)) == Set(SchemaCheck.names), "schemas exercised: \(Set(valid.map(\.schema)))")

        // Broken variants of real messages: each must be rejected (the check can fail).
        let events = live.filter { $0.topic.hasSuffix("/events") }
        let first = { (type: String) in events.first { $0.json["type"] as? String == type } }
        let level = live.first { $0.topic.hasSuffix("/state/level/P2") && $0.json["source"] as? String == "unknown" }
        let spot = live.first { $0.topic.contains("/state/spot/") }
        let online = live.first { $0.topic.hasSuffix("/status") && $0.json["state"] as? String == "online" }
        // A replayed trace is marked as such, so a backend bridge can refuse to take it for real sensors.
        #expect(online?.json["mode"] as? String == "replay", "\(online?.payload ?? "no online status")")
        let failedReply = live.first { $0.topic.hasSuffix("/reply") && $0.json["ok"] as? Bool == false }
        let diagReply = live.first { $0.topic.hasSuffix("/reply") && $0.json["command"] as? String == "diag" }
        let broken: [(String, Received?, (inout [String: Any]) -> Void)] = [
            ("event", first("spot.occupied"), { $0["seq"] = nil }),
            ("event", first("spot.occupied"), { $0["id"] = "not-a-uuid" }),
            ("event", first("spot.occupied"), { $0["at"] = "2026-11-29 14:03:07" }),
            ("event", first("spot.occupied"), { $0["clock"] = "approximate" }),
            ("event", first("spot.occupied"), { $0["lane"] = "P2-ramp" }),
            ("event", first("spot.checkout"), { $0["stay_s"] = nil }),
            ("event", first("lane.passage"), { $0["to"] = nil }),
            ("event", first("sensor.fault"), { $0["reason"] = "flaky" }),
            ("event", first("level.drift"), { $0["clamped_to"] = "48" }),
            ("event", first("lane.aborted"), { $0["type"] = "lane.vanished" }),
            ("level-state", level, { $0["occupied"] = 0 }),
            ("level-state", level, { $0["lane_count"] = nil }),
            ("level-state", level, { $0["unknown"] = nil }),
            ("level-state", level, { $0["unknown"] = -1 }),
            ("level-state", level, { $0["source"] = "lanes"; $0["occupied"] = 3; $0["free"] = 44; $0["unknown"] = 1 }),
            ("spot-state", spot, { $0["state"] = "maybe" }),
            ("status", online, { $0["version"] = nil }),
            ("status", online, { $0["mode"] = "live" }),
            ("reply", failedReply, { $0["error"] = nil }),
            ("reply", diagReply, { $0["ok"] = false; $0["error"] = "no" }),
            ("reply", diagReply, { var d = $0["diag"] as? [String: Any] ?? [:]; d["checks"] = nil; $0["diag"] = d }),
            ("status", online, { $0["clock"] = "maybe" }),
            ("status", online, { $0["outbox_depth"] = -1 }),
        ]
        for (i, (schema, message, change)) in broken.enumerated() {
            let message = try #require(message, "no real message to break for case \(i) (\(schema))")
            checks.append(.init(schema: schema, label: "broken #\(i)", payload: SchemaCheck.mutated(message, change)))
        }
        let results = try SchemaCheck.validate(checks)
        for (item, errors) in zip(checks, results) {
            let meantBroken = item.label.hasPrefix("broken") || (item.schema == "cmd-calibrate" && item.payload.contains("\"bad-1\""))
            if meantBroken {
                #expect(!errors.isEmpty, "accepted but broken: \(item.label) \(item.payload)")
            } else {
                #expect(errors.isEmpty, "\(item.label) -> \(errors)")
            }
        }

        // The QoS the contract names (a QoS 1 subscription gets the publisher's): the retained states at 0, being
        // snapshots republished on every connection; everything else (events, status, replies) at 1.
        #expect(live.contains { $0.topic.contains("/state/") })
        let wrongQoS = live.filter { $0.qos != ($0.topic.contains("/state/") ? 0 : 1) }
        #expect(wrongQoS.isEmpty, "\(wrongQoS.map { "\($0.topic) at QoS \($0.qos)" })")

        // What a schema cannot say: seq +1 per event across both boots, unique ids, free = capacity - occupied - unknown,
        // unknown as the source says.
        let seqs = events.compactMap { $0.json["seq"] as? Int }
        #expect(seqs == Array(1...max(seqs.count, 1)), "\(seqs)")
        #expect(Set(events.compactMap { $0.json["id"] as? String }).count == events.count)
        for state in live + retained where state.topic.contains("/state/level/") {
            let j = state.json
            let unknown = j["unknown"] as? Int
            if let capacity = j["capacity"] as? Int, let occupied = j["occupied"] as? Int {
                #expect(j["free"] as? Int == capacity - occupied - (unknown ?? -1), "\(state.payload)")
            } else {
                #expect(j["free"] is NSNull, "\(state.payload)")
            }
            switch j["source"] as? String {
            case "spots": #expect(unknown != nil && unknown == j["spots_unknown"] as? Int, "\(state.payload)")
            case "lanes": #expect(unknown == 0, "\(state.payload)")
            default: #expect(unknown != nil && unknown == j["capacity"] as? Int, "\(state.payload)")
            }
        }
        let spotStates = Set((live + retained).filter { $0.topic.contains("/state/spot/") }.compactMap { $0.json["state"] as? String })
        #expect(spotStates == ["occupied", "free", "unknown"])
        let sources = Set(live.filter { $0.topic.contains("/state/level/") }.compactMap { $0.json["source"] as? String })
        #expect(sources == ["unknown", "lanes"])
    }

    /// Events sent from the outbox after the broker comes back carry `replayed: true`, and a full
    /// outbox declares its gap with `outbox.dropped`, whose numbers match the seqs that never came.
    @Test func replayedEventsAndADeclaredGapFollowTheSchemas() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let agent = try Child(agentBinary, ["run", "--config", try writeContractGarage(dir, capacity: 3),
                                            "--replay", try writeTrace(dir, contractTrace), "--speed", "4",
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        // More events than the outbox holds: the oldest are dropped and must be declared.
        #expect(eventually(15) { agent.stderr.contains("outbox full, events dropped") }, "\(agent.stderr)")
        try broker.start()
        try subscriber.listen()
        func events() -> [[String: Any]] { subscriber.events() }
        #expect(eventually(20) { events().contains { $0["type"] as? String == "outbox.dropped" } },
                "\(events().map { "\($0["seq"] ?? "?") \($0["type"] ?? "?")" }) \(agent.stderr)")
        // Events dropped after the first announcement went out (timers firing while the outbox is still full) are
        // declared by the next one, once the first is acknowledged: stop only when the streak has ended and all of
        // it is declared, or the stop would leave the rest for the next start to declare.
        func declaredSoFar() -> Int {
            events().filter { $0["type"] as? String == "outbox.dropped" }.compactMap { $0["dropped"] as? Int }.reduce(0, +)
        }
        // The log says each overflow once when it starts and once when it ends, with its count. The outbox (capacity 3)
        // may fill again after the broker is back (timers' events while the replay is in flight): a second streak.
        func streaks() -> (starts: Int, ended: [Int]) {
            let log = agent.stderr.split(separator: "\n")
            let ended = log.filter { $0.hasPrefix("info outbox no longer full") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("streak=") }.flatMap { Int($0.dropFirst(7)) }
            }
            return (log.filter { $0.hasPrefix("warn outbox full, events dropped") }.count, ended)
        }
        #expect(eventually(20) {
            let s = streaks()
            return s.starts == s.ended.count && !s.ended.isEmpty && s.ended.reduce(0, +) == declaredSoFar()
        }, "streaks \(streaks()), declared \(declaredSoFar()): \(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)   // a graceful stop: everything sent was acknowledged
        try subscriber.drain()
        subscriber.stop()

        let all = subscriber.events()
        let replayed = all.filter { $0["replayed"] as? Bool == true }
        #expect(replayed.count >= 3, "the outbox's events came as replayed: \(all)")
        let results = try SchemaCheck.validate(items(subscriber.messages, "live"))
        for (message, errors) in zip(subscriber.messages.filter { SchemaCheck.schema(forTopic: $0.topic) != nil }, results) {
            #expect(errors.isEmpty, "\(message.topic): \(message.payload) -> \(errors)")
        }

        // Never a silent gap: every seq that never arrived lies in a declared range, and the
        // declared counts cover them (a declared event may still arrive if it was in flight).
        let drops = all.filter { $0["type"] as? String == "outbox.dropped" }
        let ranges = drops.compactMap { d -> ClosedRange<Int>? in
            guard let a = d["first_seq"] as? Int, let b = d["last_seq"] as? Int, a <= b else { return nil }
            return a...b
        }
        #expect(ranges.count == drops.count, "first_seq <= last_seq: \(drops)")
        let declared = drops.compactMap { $0["dropped"] as? Int }.reduce(0, +)
        let seen = Set(all.compactMap { $0["seq"] as? Int })
        let missing = (1...(seen.max() ?? 1)).filter { !seen.contains($0) }
        #expect(!missing.isEmpty, "capacity 3 and more events than that: some were dropped")
        #expect(missing.allSatisfy { s in ranges.contains { $0.contains(s) } }, "missing \(missing), declared \(ranges)")
        #expect(declared >= missing.count, "missing \(missing), declared \(declared)")
        for d in drops {
            if let n = d["dropped"] as? Int, let a = d["first_seq"] as? Int, let b = d["last_seq"] as? Int {
                #expect(n <= b - a + 1, "\(d)")
            }
        }

        // An overflow is a streak in the log, not a line per event: each starts once and ends once, and together they
        // count as many events as were declared.
        let logged = streaks()
        #expect(logged.starts == logged.ended.count && (declared <= 1 || logged.starts < declared), "one line per streak, not per event: \(logged)")
        #expect(logged.ended.reduce(0, +) == declared, "\(logged), declared \(declared)")
    }

    /// A level every space of which has a sensor is reported from its spots, also with one of them faulted and a lane
    /// count that says otherwise (here a calibration to 3 with one car parked; in the field one left from an earlier
    /// run): 1 occupied, 1 free, 1 unknown, never the lane count's 3. The retained state follows the schema, and the
    /// monitor, `status` and the `--watch` frame show the unknown space.
    @Test func aFullySensedLevelWithAFaultedSpotIsReportedFromItsSpotsWithTheUnknownOne() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let monitor = try Child(agentBinary, ["monitor", "--broker", broker.url])
        let config = dir.appendingPathComponent("agent.yaml").path
        try """
        site: testsite
        device: levels-dev
        board: simulated
        levels:
          - { id: P1, capacity: 3 }
        lanes:
          - { id: P1-gate, from: outside, to: P1, loops: { a: GPIO17, b: GPIO27 } }
        spots:
          - { id: P1-A-01, input: GPIO22, delayed_on: 300ms, delayed_off: 300ms }
          - { id: P1-A-02, input: GPIO23, delayed_on: 300ms, delayed_off: 300ms, chatter_limit: 3, recover_after: 1h }
          - { id: P1-A-03, input: GPIO24, delayed_on: 300ms, delayed_off: 300ms }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        // P1-A-01 parks; P1-A-02 chatters (5 changes in under a second) and stays faulted.
        let trace = """
        {"parkwise_trace": 1}
        {"t_ms": 100, "input": "GPIO22", "value": 1}
        {"t_ms": 200, "input": "GPIO23", "value": 1}
        {"t_ms": 300, "input": "GPIO23", "value": 0}
        {"t_ms": 400, "input": "GPIO23", "value": 1}
        {"t_ms": 500, "input": "GPIO23", "value": 0}
        {"t_ms": 600, "input": "GPIO23", "value": 1}
        """
        let agent = try RunningAgent(dir, ["--config", config, "--replay", try writeTrace(dir, trace)], broker: broker)
        let levelPrefix = "parkwise/v1/testsite/levels-dev"
        #expect(eventually(10) {
            let types = subscriber.events().compactMap { $0["type"] as? String }
            return types.contains("spot.occupied") && types.contains("sensor.fault")
        }, "\(agent.child.stderr)")
        try publish(broker, levelPrefix + "/cmd/calibrate", #"{"level": "P1", "count": 3, "id": "stale"}"#)
        func level() -> Received? { try? retainedMessages(broker, levelPrefix + "/state/level/P1").first }
        #expect(eventually(10) { level()?.json["lane_count"] as? Int == 3 }, "\(level()?.payload ?? "no level state")")

        let state = try #require(level())
        #expect(state.json["source"] as? String == "spots", "\(state.payload)")
        #expect(state.json["occupied"] as? Int == 1 && state.json["free"] as? Int == 1, "\(state.payload)")
        #expect(state.json["unknown"] as? Int == 1 && state.json["spots_unknown"] as? Int == 1, "\(state.payload)")
        let checks = [SchemaCheck.Item(schema: "level-state", label: "retained", payload: state.payload),
                      SchemaCheck.Item(schema: "level-state", label: "broken: no unknown",
                                       payload: SchemaCheck.mutated(state) { $0["unknown"] = nil })]
        let results = try SchemaCheck.validate(checks)
        #expect(results.first == [], "\(results)")
        #expect(results.last?.isEmpty == false, "\(results)")

        #expect(eventually(10) { monitor.stdout.contains("levels levels-dev: P1 1/3 (1 unknown)") }, "\(monitor.stdout)")
        let status = try agent.status()
        let p1 = try #require(status.levels.first)
        #expect(p1.source == "spots" && p1.occupied == 1 && p1.free == 1 && p1.unknown == 1, "\(p1)")
        let text = try runAgent(["status", "--socket", agent.socket])
        #expect(text.out.contains("  P1       3         1         1     1        spots    3"), "\(text.out)")
        let frame = WatchFrame.render(status, width: 80, height: 24, colour: false)
        #expect(frame.contains { $0.hasPrefix("P1   free 1  occupied 1  unknown 1  of 3  (spots, lanes count 3)") }, "\(frame)")
        agent.stop()
        monitor.signal(SIGTERM)
        #expect(monitor.wait(10) == 0)
        subscriber.stop()
    }
}
