import Foundation
import Testing
import TestSupport

/// A garage with two spot sensors on P2; P2-A-01 checks in after 2 s.
func writeAgentGarage(_ dir: URL) throws -> String {
    let path = dir.appendingPathComponent("agent.yaml").path
    try """
    site: garage
    device: p2-east
    board: simulated
    levels:
      - { id: P2, capacity: 48 }
    spots:
      - { id: P2-A-01, input: GPIO22, delayed_on: 500ms, delayed_off: 500ms, checkin_after: 2s }
      - { id: P2-A-02, input: GPIO23, delayed_on: 500ms, delayed_off: 500ms }
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// A vehicle arrives on P2-A-01 at 0.5 s (with contact bounce) and leaves at 6 s.
let stayTrace = """
{"parkwise_trace": 1}
{"t_ms": 500, "input": "GPIO22", "value": 1}
{"t_ms": 510, "input": "GPIO22", "value": 0}
{"t_ms": 520, "input": "GPIO22", "value": 1}
{"t_ms": 6000, "input": "GPIO22", "value": 0}
"""

/// The real agent replays a trace into a real mosquitto; the bridge writes a real PostgreSQL.
@Suite(.serialized) struct AgentToDatabaseTests {
    @Test func arrivalCheckInAndDepartureReachSpotsAndReservations() throws {
        let fixture = try BridgeFixture()
        fixture.reserve("P2-A-01")
        let freeBefore = fixture.free("P2")
        try fixture.startBridge()
        let trace = fixture.dir.appendingPathComponent("trace.jsonl").path
        try stayTrace.write(toFile: trace, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", try writeAgentGarage(fixture.dir), "--replay", trace,
                                            "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])

        // Arrival: occupied by the sensor, dated by the vehicle's arrival; the reservation fulfilled at it.
        #expect(fixture.waitFor("SELECT status FROM reservations", "fulfilled"), "\(fixture.bridge?.stderr ?? "")\n\(agent.stderr)")
        #expect(fixture.spot("P2-A-01") == "occupied/sensor")
        let arrival = epochMs(fixture, "SELECT (payload->>'arrival')::timestamptz FROM sensor_events WHERE type = 'spot.checkin'")
        #expect(arrival == epochMs(fixture, "SELECT checked_in_at FROM reservations"))
        #expect(arrival == epochMs(fixture, "SELECT at FROM sensor_events WHERE type = 'spot.occupied'"))
        #expect(arrival == epochMs(fixture, "SELECT updated_at FROM spots WHERE id = 'P2-A-01'"))
        #expect(fixture.query("SELECT held_by IS NOT NULL FROM spots WHERE id = 'P2-A-01'") == "t")
        // The covered free spot P2-A-02 stays free, now from its sensor.
        #expect(fixture.spot("P2-A-02") == "free/sensor")

        // Departure: released at the departure time, the spot free again and no longer held.
        #expect(fixture.waitFor("SELECT status FROM reservations", "released"), "\(fixture.bridge?.stderr ?? "")")
        #expect(epochMs(fixture, "SELECT released_at FROM reservations")
                == epochMs(fixture, "SELECT (payload->>'departure')::timestamptz FROM sensor_events WHERE type = 'spot.checkout'"))
        #expect(fixture.waitFor("SELECT status || coalesce(held_by::text, '-') FROM spots WHERE id = 'P2-A-01'", "free-"))
        #expect(fixture.free("P2") == freeBefore + 1)   // the reserved spot is free again
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)

        // Spots without a sensor were never touched.
        #expect(fixture.query("SELECT count(*) FROM spots WHERE source IS NOT NULL") == "2")
        #expect(fixture.query("SELECT count(*) FROM spots WHERE source IS NULL AND status = 'free'") == "154")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "4")   // occupied, checkin, vacated, checkout
    }

    @Test func aSimulatedFeedIsRefusedUnlessTheBridgeIsTold() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(config: "reassert_every: 200ms\n")
        let trace = fixture.dir.appendingPathComponent("trace.jsonl").path
        try stayTrace.write(toFile: trace, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", try writeAgentGarage(fixture.dir), "--replay", trace, "--speed", "4",
                                            "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        #expect(eventually(20) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        #expect(eventually(10) { bridge.stderr.contains("refusing a simulated feed") }, "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT mode FROM sensor_devices", "replay"))
        #expect(fixture.query("SELECT count(*) FROM spots WHERE source IS NOT NULL") == "0")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "0")
        #expect(fixture.query("SELECT count(*) FROM sensor_spots") == "0")

        // Graceful stop; told to accept it, the same bridge session takes the retained states.
        bridge.signal(SIGTERM)
        #expect(bridge.wait(10) == 0, "\(bridge.stderr)")
        try fixture.startBridge()
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor'", "2"), "\(fixture.bridge?.stderr ?? "")")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }
}
