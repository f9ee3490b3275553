import Foundation
import Testing
import TestSupport

/// Outages on every side: the database restarts, the bridge is killed, and nothing is lost or applied twice.
@Suite(.serialized) struct ResilienceTests {
    /// Ten spots change 60 times; PostgreSQL is stopped for a third of them. Every event lands once
    /// and every spot ends as its last state says.
    @Test func postgresRestartedMidStreamLosesNothing() throws {
        let cluster = try PostgresCluster()   // its own: restarting the shared one would disturb other suites
        let fixture = try BridgeFixture(cluster: cluster)
        let bridge = try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        var last: [String: String] = [:]
        func change(_ i: Int) {
            let spot = "P2-B-" + (i % 10 + 1 < 10 ? "0" : "") + String(i % 10 + 1)
            let state = (i / 10) % 2 == 0 ? "occupied" : "free"
            device.event(state == "occupied" ? "spot.occupied" : "spot.vacated", #""spot":"\#(spot)","level":"P2""#)
            device.spot(spot, state, since: wireTime())
            last[spot] = state
        }
        for i in 0..<20 { change(i) }
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "20"), "\(bridge.stderr)")
        cluster.stop()
        for i in 20..<40 { change(i) }
        #expect(eventually(10) { bridge.stderr.contains("database unavailable, holding received messages") }, "\(bridge.stderr)")
        try cluster.start()
        for i in 40..<60 { change(i) }
        #expect(fixture.eventsLandedOnce(60, seconds: 30), "\(bridge.stderr)")
        let expected = last.keys.sorted().map { "\($0)=\(last[$0]!)" }.joined(separator: ",")
        #expect(fixture.waitFor("SELECT string_agg(id || '=' || status, ',' ORDER BY id) FROM spots WHERE source = 'sensor'", expected))
        #expect(bridge.stderr.contains("database available again"))
        #expect(fixture.query("SELECT count(*) FROM sensor_gaps") == "0")
    }

    /// The nodes of a clustered broker (deploy/nats/README.md): the first is down, the bridge takes the feed through the
    /// next one in the list.
    @Test func aBridgeGivenANodeListTakesTheFeedThroughTheNextNodeWhenOneIsDown() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(brokers: "mqtt://127.0.0.1:\(freePort()),\(fixture.broker.url)")
        var device = FakeDevice(fixture.broker)
        device.online()
        device.event("spot.occupied", #""spot":"P2-B-01","level":"P2""#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "1"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("uplink connected broker=\(fixture.broker.url)"), "\(bridge.stderr)")
    }

    /// Killed (no goodbye), the bridge's persistent session keeps what the devices send meanwhile:
    /// back, it applies all of it, once.
    @Test func aKilledBridgeGetsWhatWasSentWhileItWasDown() throws {
        let fixture = try BridgeFixture()
        var device = try fixture.deviceSeenByAKilledBridge(spot: "P3-A-01", level: "P3")
        for n in 2...9 { device.event("spot.occupied", #""spot":"P3-A-0\#(n)","level":"P3""#) }
        device.spot("P3-A-09", "occupied", since: wireTime())
        let bridge = try fixture.startBridge()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "9"), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor' AND status = 'occupied'", "9"))
        #expect(fixture.query("SELECT last_seq FROM sensor_devices") == "9")
        bridge.signal(SIGTERM)
        #expect(bridge.wait(10) == 0)
        #expect(bridge.stderr.contains("bridge stopped"))
    }

    /// The real agent simulates the whole campus (156 spots) at 300x while the bridge is killed at
    /// random moments, 15 times (PARKWISE_KILLS=50 for the long run). Afterwards every spot row says what the agent's retained state says:
    /// events applied twice, late or out of order would show as a wrong spot.
    @Test func killedAtRandomMomentsTheBridgeStillEndsWithTheAgentsTruth() throws {
        let fixture = try BridgeFixture()
        let agent = try Child(agentBinary, ["run", "--config", packageRoot + "/hardware/examples/campus.yaml", "--simulate",
                                            "--speed", "300", "--sim-start", "07:30", "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<kills {
            let bridge = try fixture.startBridge()
            usleep(UInt32.random(in: 50_000...700_000, using: &generator))   // a random moment, not a wait for a condition
            bridge.signal(SIGKILL)
            _ = bridge.wait(5)
        }
        #expect(Int(fixture.query("SELECT count(*) FROM sensor_events")) ?? 0 > 20, "the garage should have moved meanwhile")
        agent.signal(SIGTERM)
        #expect(agent.wait(15) == 0, "\(agent.stderr)")
        let expected = try campusTruth(fixture)
        let bridge = try fixture.startBridge()
        #expect(fixture.waitFor(sensedSpots, expected, seconds: 30), "\(bridge.stderr)")
        #expect(fixture.query("SELECT count(*) FROM (SELECT seq FROM sensor_events GROUP BY seq HAVING count(*) > 1) d") == "0")
    }

    /// A broker outage long enough to overflow the agent's outbox (capacity 50) at 300x: the agent
    /// declares the gap (outbox.dropped); the bridge records it, asks for a rebirth, and the tables
    /// end equal to the agent's retained truth.
    @Test func anOutageWithADeclaredGapEndsWithTheAgentsTruth() throws {
        let fixture = try BridgeFixture()
        let config = fixture.dir.appendingPathComponent("campus.yaml").path
        let campus = try String(contentsOfFile: packageRoot + "/hardware/examples/campus.yaml", encoding: .utf8)
        try campus.replacingOccurrences(of: "capacity: 200", with: "capacity: 50").write(toFile: config, atomically: true, encoding: .utf8)
        let bridge = try fixture.startBridge()
        let agent = try Child(agentBinary, ["run", "--config", config, "--simulate", "--speed", "300", "--sim-start", "07:30",
                                            "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        #expect(fixture.waitFor("SELECT count(*) > 20 FROM sensor_events", "t"), "\(agent.stderr)")
        fixture.broker.stop()
        #expect(eventually(30) { agent.stderr.contains("outbox full") || agent.stderr.contains("dropped") }, "\(agent.stderr)")
        try fixture.broker.start()
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM sensor_gaps WHERE declared", "t", seconds: 30),
                "\(bridge.stderr)\n\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(15) == 0, "\(agent.stderr)")
        let expected = try campusTruth(fixture)
        #expect(fixture.waitFor(sensedSpots, expected, seconds: 30), "\(bridge.stderr)")
    }

    /// Two bridges share the feed (`$share/…`); one of them is killed at random moments (10 times;
    /// PARKWISE_KILLS × 2/3) while the other keeps going. The tables end right: the writes commute.
    @Test func twoBridgesOnASharedSubscriptionWithKillsEndRight() throws {
        let fixture = try BridgeFixture()
        let shared = "accept_simulated: true\nreassert_every: 200ms\nshare_group: bridges\nclient_id: "
        let steady = try fixture.startBridge(config: shared + "bridge-a\n")
        var other = try fixture.startBridge(config: shared + "bridge-b\n")
        let agent = try Child(agentBinary, ["run", "--config", packageRoot + "/hardware/examples/campus.yaml", "--simulate",
                                            "--speed", "300", "--sim-start", "07:30", "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<max(kills * 2 / 3, 1) {
            usleep(UInt32.random(in: 50_000...600_000, using: &generator))   // a random moment, not a wait for a condition
            other.signal(SIGKILL)
            _ = other.wait(5)
            other = try fixture.startBridge(config: shared + "bridge-b\n")
        }
        #expect(Int(fixture.query("SELECT count(*) FROM sensor_events")) ?? 0 > 20, "the garage should have moved meanwhile")
        agent.signal(SIGTERM)
        #expect(agent.wait(15) == 0, "\(agent.stderr)")
        let expected = try campusTruth(fixture)
        #expect(fixture.waitFor(sensedSpots, expected, seconds: 30), "\(steady.stderr)")
        #expect(fixture.query("SELECT count(*) FROM (SELECT seq FROM sensor_events GROUP BY seq HAVING count(*) > 1) d") == "0")
    }
}

/// Two bridges split the devices (`partition: 1/2` and `2/2`), each subscribed to the whole feed as on a broker without
/// shared subscriptions (NATS): every device is taken by exactly one of them, and every event applied once.
@Suite struct PartitionTests {
    @Test func twoBridgesWithAPartitionEachTakeTheirOwnDevicesOnce() throws {
        let fixture = try BridgeFixture()
        let config = "accept_simulated: true\nreassert_every: 200ms\nclient_id: "
        let a = try fixture.startBridge(config: config + "bridge-a\npartition: 1/2\n")
        let b = try fixture.startBridge(config: config + "bridge-b\npartition: 2/2\n")
        let names = (1...8).map { "p1-gate-\($0)" }
        for (i, name) in names.enumerated() {
            var device = FakeDevice(fixture.broker, device: name)
            device.online()
            device.event("spot.occupied", #""spot":"P1-A-0\#(i + 1)","level":"P1""#)
        }
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "8"), "\(a.stderr)\n\(b.stderr)")
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor' AND status = 'occupied'", "8"))
        /// The devices a bridge took: those whose feed it logged.
        func taken(_ bridge: Child) -> Set<String> { Set(names.filter { bridge.stderr.contains("device=garage/\($0) feed=") }) }
        #expect(taken(a).isDisjoint(with: taken(b)), "\(a.stderr)\n\(b.stderr)")
        #expect(taken(a).union(taken(b)) == Set(names), "\(a.stderr)\n\(b.stderr)")
        #expect(!taken(a).isEmpty && !taken(b).isEmpty, "one hash for eight names: \(taken(a)) / \(taken(b))")
        #expect(a.stderr.contains("partition=1/2") && b.stderr.contains("partition=2/2"))
        #expect(!a.stderr.contains("device not in the config") && !b.stderr.contains("device not in the config"))
    }
}

/// Every sensed spot as `id=status`, in id order.
let sensedSpots = "SELECT string_agg(id || '=' || status, ',' ORDER BY id COLLATE \"C\") FROM spots WHERE source = 'sensor'"

/// What `sensedSpots` must say once the bridge has caught up: the campus agent's retained spot states
/// as the broker holds them (unknown shows as disabled).
func campusTruth(_ fixture: BridgeFixture) throws -> String {
    let truth = try retainedMessages(fixture.broker, "parkwise/v1/uniandes/campus-main/state/spot/#")
    #expect(truth.count == 156)
    return truth.map { message -> String in
        let spot = String(message.topic.split(separator: "/").last!)
        let state = message.json["state"] as? String ?? "?"
        return "\(spot)=" + (state == "unknown" ? "disabled" : state)
    }.sorted().joined(separator: ",")
}

/// How many times the kill tests kill a bridge.
let kills = Int(ProcessInfo.processInfo.environment["PARKWISE_KILLS"] ?? "") ?? 15
