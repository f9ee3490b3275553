import Foundation
import TestSupport
import Testing

/// A garage with one ramp into P2 and two spot sensors, fast filters so a test runs in seconds.
func writeGarage(_ dir: URL) throws -> String {
    let path = dir.appendingPathComponent("agent.yaml").path
    try """
    site: testsite
    device: p2-east
    board: simulated
    levels:
      - { id: P2, capacity: 48 }
    lanes:
      - { id: P2-ramp, from: outside, to: P2, loops: { a: GPIO17, b: GPIO27 } }
    spots:
      - { id: P2-A-01, input: GPIO22, delayed_on: 1s, delayed_off: 1s, checkin_after: 3s }
      - { id: P2-A-02, input: GPIO23, delayed_on: 1s, delayed_off: 1s }
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// A vehicle parks on P2-A-01 (with contact bounce), another drives down the ramp, the first leaves.
let garageTrace = """
{"parkwise_trace": 1}
{"t_ms": 100, "input": "GPIO22", "value": 1}
{"t_ms": 110, "input": "GPIO22", "value": 0}
{"t_ms": 120, "input": "GPIO22", "value": 1}
{"t_ms": 500, "input": "GPIO17", "value": 1}
{"t_ms": 900, "input": "GPIO27", "value": 1}
{"t_ms": 1800, "input": "GPIO17", "value": 0}
{"t_ms": 2300, "input": "GPIO27", "value": 0}
{"t_ms": 6000, "input": "GPIO22", "value": 0}
"""

func writeTrace(_ dir: URL, _ text: String = garageTrace) throws -> String {
    let path = dir.appendingPathComponent("trace.jsonl").path
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

func isoMilliseconds(_ text: Any?) -> Double? {
    guard let text = text as? String else { return nil }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.date(from: text).map { $0.timeIntervalSince1970 * 1000 }
}

@Suite(.serialized) struct ReplayTests {
    let prefix = "parkwise/v1/testsite/p2-east"

    /// The whole path: trace -> filters -> garage -> events -> real mosquitto -> independent subscriber.
    @Test func aReplayedTraceArrivesAsExactEventsAndRetainedStates() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let configPath = try writeGarage(dir)
        let agent = try Child(agentBinary, ["run", "--config", configPath, "--replay", try writeTrace(dir),
                                            "--speed", "4", "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 5 }, "events so far: \(subscriber.events().count); \(agent.stderr)")
        let events = subscriber.events()
        #expect(events.map { $0["type"] as? String } == ["spot.occupied", "lane.passage", "spot.checkin",
                                                          "spot.vacated", "spot.checkout"])
        #expect(events.map { $0["seq"] as? Int } == [1, 2, 3, 4, 5])
        #expect(Set(events.compactMap { $0["id"] as? String }).count == 5)
        #expect(events.allSatisfy { $0["boot"] as? Int == 1 && $0["clock"] as? String == "synced" })
        #expect(events[0]["spot"] as? String == "P2-A-01")
        #expect(events[1]["lane"] as? String == "P2-ramp")
        #expect(events[1]["from"] as? String == "outside")
        #expect(events[1]["to"] as? String == "P2")
        // `at` is when the vehicle did it (the edge), not when the filter confirmed it.
        let times = events.map { isoMilliseconds($0["at"]) ?? -1 }
        let offsets = times.map { $0 - times[0] }
        // Occupancy began at the last bounce (120 ms); the ramp passage ended at 2300 ms. Played at --speed 4, each time
        // is the real moment it was played: trace time / 4 (never ahead of the wall clock), and so is the stay.
        #expect(offsets == [0, 2180, 3000, 5880, 5880].map { $0 / 4 })
        #expect(isoMilliseconds(events[2]["arrival"]) == times[0])
        #expect(events[4]["stay_s"] as? Double == 1.47)

        // Retained truth a backend rebuilds from (a state that changed within a second of its last publish follows its
        // events within that second, see StatePace).
        #expect(eventually(5) {
            (try? retainedMessages(broker, prefix + "/state/spot/P2-A-01"))?.first?.json["state"] as? String == "free"
        })
        let retained = try retainedMessages(broker, prefix + "/#")
        let byTopic = Dictionary(retained.map { ($0.topic, $0.json) }, uniquingKeysWith: { $1 })
        #expect(byTopic[prefix + "/status"]?["state"] as? String == "online")
        // The birth names the config it runs by the FNV-1a 64 of the file's bytes.
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in try Data(contentsOf: URL(fileURLWithPath: configPath)) { fnv = (fnv ^ UInt64(byte)) &* 0x100_0000_01b3 }
        #expect(byTopic[prefix + "/status"]?["config_hash"] as? String == String(format: "%016llx", fnv))
        #expect(byTopic[prefix + "/state/spot/P2-A-01"]?["state"] as? String == "free")
        #expect(byTopic[prefix + "/state/spot/P2-A-02"]?["state"] as? String == "free")
        let level = try #require(byTopic[prefix + "/state/level/P2"])
        #expect(level["capacity"] as? Int == 48)
        #expect(level["occupied"] is NSNull, "unknown is null, never 0")
        #expect(level["lane_count"] is NSNull)
        #expect(level["spots_sensed"] as? Int == 2)

        // Commands: calibrate sets the lane count; a bad command changes nothing and says why.
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P2", "count": 7, "id": "c1"}"#)
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P9", "count": 1, "id": "c2"}"#)
        try publish(broker, prefix + "/cmd/explode", "{}")
        #expect(eventually(5) { subscriber.messages.filter { $0.topic == prefix + "/reply" }.count == 3 })
        let replies = subscriber.messages.filter { $0.topic == prefix + "/reply" }.map(\.json)
        #expect(replies.map { $0["ok"] as? Bool } == [true, false, false])
        #expect(replies[0]["id"] as? String == "c1")
        #expect((replies[2]["error"] as? String)?.contains("unknown command") == true)
        #expect(eventually(5) {
            (try? retainedMessages(broker, prefix + "/state/level/P2"))?.first?.json["lane_count"] as? Int == 7
        })

        // Graceful stop: offline status, exit 0.
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        let status = try retainedMessages(broker, prefix + "/status")
        #expect(status.first?.json["state"] as? String == "offline")
        #expect(agent.stderr.contains("info stopped"))
        // Nothing more came than those five events.
        try subscriber.drain()
        #expect(subscriber.events().count == 5, "\(subscriber.events().map { $0["type"] ?? "?" })")
        subscriber.stop()
    }

    /// Broker down at start: the agent keeps its events, says so once, and replays them in order.
    @Test func eventsWaitForABrokerThatIsDownAtStart() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir),
                                            "--speed", "4", "--broker", broker.url, "--outbox", dir.path + "/outbox",
                                            "--verbose"])
        #expect(eventually(10) { agent.stderr.contains("trace finished") })
        // Several reconnect attempts (the debug log counts them).
        #expect(eventually(20) { agent.stderr.contains("uplink retry in_s=") && agent.stderr.contains(" attempt=3") },
                "\(agent.stderr)")
        let warnings = agent.stderr.split(separator: "\n").filter { $0.contains("broker unreachable") }
        #expect(warnings.count == 1, "one clear line, not one per retry: \(agent.stderr)")
        try broker.start()
        try subscriber.listen()
        #expect(eventually(20) { subscriber.events().count >= 5 }, "\(agent.stderr)")
        let events = subscriber.events()
        #expect(events.map { $0["seq"] as? Int } == [1, 2, 3, 4, 5])
        #expect(events.allSatisfy { $0["replayed"] as? Bool == true })
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// The last will: an agent that dies without a goodbye is reported offline by the broker.
    @Test func aKilledAgentIsReportedOfflineByItsLastWill() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) {
            (try? retainedMessages(broker, prefix + "/status"))?.first?.json["state"] as? String == "online"
        })
        agent.signal(SIGKILL)
        _ = agent.wait(5)
        #expect(eventually(10) {
            (try? retainedMessages(broker, prefix + "/status"))?.first?.json["state"] as? String == "offline"
        })
        broker.stop()
    }

    /// A burst of edges (issue 37): every change is an event, but a spot's and its level's retained states go once when
    /// the burst begins and once more, as they are at the end, a second later, never once per edge; a change after a
    /// quiet second goes at once again. Live messages are counted at a subscriber; the retained ones are read back.
    @Test func aBurstSendsEveryEventButEachStateOncePerSecond() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let path = dir.appendingPathComponent("agent.yaml").path
        try """
        site: testsite
        device: p2-east
        board: simulated
        levels: [ { id: P2, capacity: 4 } ]
        spots:
          - { id: P2-A-01, input: GPIO22, delayed_on: 0, delayed_off: 0, chatter_limit: 10000 }
        """.write(toFile: path, atomically: true, encoding: .utf8)
        // 11 edges 40 ms apart from 3 s (long after the start's states: occupied at the end), then one more edge 3 s
        // after the burst (free).
        var trace = (0..<11).map { #"{"t_ms": \#(3000 + $0 * 40), "input": "GPIO22", "value": \#(($0 + 1) % 2)}"# }
        trace.append(#"{"t_ms": 6400, "input": "GPIO22", "value": 0}"#)
        let agent = try Child(agentBinary, ["run", "--config", path, "--replay", try writeTrace(dir, trace.joined(separator: "\n")),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10); broker.stop() }
        func live(_ topic: String) -> [[String: Any]] { subscriber.messages.filter { $0.topic == prefix + topic }.map(\.json) }
        func states(_ topic: String) -> [String?] { live(topic).map { $0["state"] as? String } }
        #expect(eventually(10) { subscriber.events().count == 11 }, "\(subscriber.events().count) events; \(agent.stderr)")
        // The start's states, the burst's first edge at once, then its end a second later at most.
        #expect(eventually(5) { live("/state/spot/P2-A-01").last?["seq"] as? Int == 11 }, "\(live("/state/spot/P2-A-01"))")
        #expect(eventually(5) { live("/state/level/P2").count == 3 }, "\(live("/state/level/P2"))")
        #expect(states("/state/spot/P2-A-01") == ["free", "occupied", "occupied"])
        #expect(live("/state/spot/P2-A-01").compactMap { $0["seq"] as? Int }.suffix(2) == [1, 11], "the first edge's, then the last")
        #expect(live("/state/level/P2").map { $0["spots_occupied"] as? Int } == [0, 1, 1])
        // The edge after a quiet spell: its event and its states at once, one each.
        #expect(eventually(10) { subscriber.events().count == 12 && live("/state/spot/P2-A-01").count == 4 && live("/state/level/P2").count == 4 },
                "\(subscriber.events().count) events, \(live("/state/spot/P2-A-01"))")
        try subscriber.drain()
        #expect(states("/state/spot/P2-A-01") == ["free", "occupied", "occupied", "free"])
        #expect(live("/state/level/P2").count == 4)
        #expect(live("/state/spot/P2-A-01").last?["seq"] as? Int == 12)
        #expect(subscriber.events().map { $0["seq"] as? Int } == Array(1...12))
        let retained = try retainedMessages(broker, prefix + "/state/#")
        #expect(retained.first { $0.topic.hasSuffix("/state/spot/P2-A-01") }?.json["state"] as? String == "free")
        subscriber.stop()
    }

    /// The simulated garage starts empty, so a level its lanes count starts at 0; a level no lane enters has no lane
    /// count at all (issue 33: a level with spots and no lane reported a lane count of 0).
    @Test func aSimulatedLevelWithoutLanesHasNoLaneCount() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        // The ramp's garage, and P3 with a spot and no lane.
        let path = try writeGarage(dir)
        let garage = try String(contentsOfFile: path, encoding: .utf8)
            .replacingOccurrences(of: "levels:\n", with: "levels:\n  - { id: P3, capacity: 10 }\n")
            .replacingOccurrences(of: "spots:\n", with: "spots:\n  - { id: P3-A-01, input: GPIO24 }\n")
        try garage.write(toFile: path, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", path, "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10); broker.stop() }
        func level(_ id: String) -> [String: Any]? { (try? retainedMessages(broker, prefix + "/state/level/" + id))?.first?.json }
        #expect(eventually(10) { level("P2") != nil && level("P3") != nil }, "\(agent.stderr)")
        #expect(level("P2")?["lane_count"] as? Int == 0, "\(level("P2") ?? [:])")
        #expect(level("P3")?["lane_count"] is NSNull, "\(level("P3") ?? [:])")
    }
}

@Suite(.serialized) struct RestartTests {
    let prefix = "parkwise/v1/testsite/p2-east"

    /// A restart continues the sequence, counts the start, and keeps the calibrated lane count.
    @Test func aRestartKeepsSequenceBootAndLaneCounts() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let arguments = ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir), "--speed", "4",
                         "--broker", broker.url, "--outbox", dir.path + "/outbox"]
        let first = try Child(agentBinary, arguments)
        #expect(eventually(15) { subscriber.events().count >= 5 })
        try publish(broker, prefix + "/cmd/calibrate", #"{"level": "P2", "count": 7}"#)
        #expect(eventually(5) { subscriber.messages.contains { $0.topic == prefix + "/reply" } })
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)

        let second = try Child(agentBinary, arguments)
        #expect(eventually(15) { subscriber.events().count >= 10 }, "\(second.stderr)")
        let events = subscriber.events()
        #expect(events.map { $0["seq"] as? Int } == Array(1...10))
        #expect(events.map { $0["boot"] as? Int } == Array(repeating: 1, count: 5) + Array(repeating: 2, count: 5))
        // 7 calibrated before the restart, plus the ramp passage replayed after it.
        #expect(eventually(5) {
            (try? retainedMessages(broker, prefix + "/state/level/P2"))?.first?.json["lane_count"] as? Int == 8
        })
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0)
        subscriber.stop()
    }
}
