import Foundation
import Testing
import TestSupport

/// The database fails without going away (read-only after a failover, a privilege revoked): the
/// bridge holds what it received instead of skipping it, says so, and applies it once when it can.
@Suite(.serialized) struct DatabaseFaultTests {
    /// The bridge's session turns read-only (as the old primary's after a failover) while events
    /// flow: none is applied or skipped; once writes are back every event lands exactly once.
    @Test func aReadOnlyDatabaseHoldsEventsUntilItCanWriteAgain() throws {
        let fixture = try BridgeFixture()
        let started = try fixture.bridgeWithAppliedEvents(3)
        let bridge = started.bridge
        var device = started.device
        try turnReadOnly(fixture)
        device.occupy((4...9).map { "P1-A-0\($0)" })
        #expect(eventually(15) { bridge.stderr.contains("database unavailable, holding received messages")
            && bridge.stderr.contains("SQLSTATE 25006") }, "\(bridge.stderr)")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "3")
        try fixture.cluster.sql("ALTER DATABASE \(fixture.database) RESET default_transaction_read_only")
        #expect(fixture.eventsLandedOnce(9, seconds: 40), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor' AND status = 'occupied'", "9"))
        #expect(eventually(5) { bridge.stderr.contains("database available again") }, "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("skipped"), "\(bridge.stderr)")
    }

    /// INSERT on sensor_events is revoked from the bridge's role: the connection stays, the events
    /// wait; granted again, each lands once. A stop during such a fault ends after `stop_grace`,
    /// exit 1, naming how many messages it could not commit.
    @Test func aRevokedPrivilegeHoldsEventsAndAStopStillEnds() throws {
        let fixture = try BridgeFixture()
        let (role, url) = try fixture.bridgeRole()
        let config = "accept_simulated: true\nreassert_every: 200ms\nstop_grace: 1s\n"
        var bridge = try fixture.startBridge(config: config, database: url)
        var device = FakeDevice(fixture.broker)
        device.online()
        device.occupy(["P1-B-01"])
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "1"), "\(bridge.stderr)")
        fixture.query("REVOKE INSERT ON sensor_events FROM \(role)")
        device.occupy((2...5).map { "P1-B-0\($0)" })
        #expect(eventually(15) { bridge.stderr.contains("SQLSTATE 42501") }, "\(bridge.stderr)")
        #expect(bridge.stderr.contains("database unavailable, holding received messages"))
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "1")
        fixture.query("GRANT INSERT ON sensor_events TO \(role)")
        #expect(fixture.eventsLandedOnce(5, seconds: 40), "\(bridge.stderr)")
        #expect(eventually(5) { bridge.stderr.contains("database available again") }, "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("skipped"), "\(bridge.stderr)")

        // A stop while the fault lasts.
        fixture.query("REVOKE INSERT ON sensor_events FROM \(role)")
        device.occupy(["P1-B-06"])
        #expect(eventually(15) { bridge.stderr.components(separatedBy: "SQLSTATE 42501").count > 2 }, "\(bridge.stderr)")
        bridge.signal(SIGTERM)
        #expect(bridge.wait(15) == 1, "\(bridge.stderr)")
        #expect(bridge.stderr.contains("stopping with messages not committed"), "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("bridge stopped"))
        // Started again with writes back: the broker's retained state rebuilds the spot the lost event set.
        fixture.query("GRANT INSERT ON sensor_events TO \(role)")
        device.spot("P1-B-06", "occupied", since: wireTime())
        bridge = try fixture.startBridge(config: config, database: url)
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-B-06'", "occupied"), "\(bridge.stderr)")
    }

    /// A fault outlasting `hold_at_most` held messages: newer events are dropped and said so, so the bridge does not
    /// grow; once the database is back the devices are asked for a rebirth, and the jump is a detected gap.
    /// A stop the failing database holds (a long `stop_grace`) is forced by a second SIGTERM: exit 1 at once, not at
    /// the grace's end.
    @Test func aSecondStopForcesTheExitTheGraceHolds() throws {
        let fixture = try BridgeFixture()
        let (role, url) = try fixture.bridgeRole()
        let bridge = try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nstop_grace: 120s\n", database: url)
        var device = FakeDevice(fixture.broker)
        device.online()
        fixture.query("REVOKE INSERT ON sensor_events FROM \(role)")
        device.occupy(["P1-B-01"])
        #expect(eventually(15) { bridge.stderr.contains("SQLSTATE 42501") }, "\(bridge.stderr)")
        bridge.signal(SIGTERM)
        #expect(eventually(5) { bridge.stderr.contains("stop requested") }, "\(bridge.stderr)")
        // Held by the grace (and a second signal within half a second would be the same request).
        #expect(!eventually(1) { bridge.hasExited }, "\(bridge.stderr)")
        let forced = Date()
        bridge.signal(SIGTERM)
        #expect(bridge.wait(5) == 1, "\(bridge.stderr)")
        #expect(Date().timeIntervalSince(forced) < 3)
        #expect(bridge.stderr.contains("second stop signal, forced exit"), "\(bridge.stderr)")
    }

    @Test func anOutageBeyondTheHoldDropsNewerEventsAndSaysSo() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nhold_at_most: 100\n")
        var device = FakeDevice(fixture.broker)
        device.online()
        device.occupy(["P1-C-01"])
        let commands = try listenForCommands(fixture, device)
        defer { commands.stop() }
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "1"), "\(bridge.stderr)")
        try turnReadOnly(fixture)
        #expect(eventually(15) { bridge.stderr.contains("database unavailable, holding received messages") }, "\(bridge.stderr)")
        device.occupy((0..<160).map { "P1-C-\(String(format: "%02d", 2 + $0 % 20))" })
        #expect(eventually(30) { bridge.stderr.contains("too many messages held, new events and states dropped") }, "\(bridge.stderr)")
        try fixture.cluster.sql("ALTER DATABASE \(fixture.database) RESET default_transaction_read_only")
        #expect(eventually(40) { bridge.stderr.contains("messages no longer dropped") }, "\(bridge.stderr)")
        // Every online device is asked for a rebirth: its retained states rebuild what was dropped.
        #expect(eventually(10) { commands.messages.contains { $0.topic == device.prefix + "/cmd/rebirth" } })
        // The device goes on: its next event shows the jump over what was dropped.
        device.occupy(["P1-C-01"])
        #expect(fixture.waitFor("SELECT max(seq) FROM sensor_events", "162", seconds: 20), "\(bridge.stderr)")
        let applied = Int(fixture.query("SELECT count(*) FROM sensor_events")) ?? 0
        #expect(applied < 162 && applied >= 102, "held at most 100 (besides the batch in hand): \(applied)")
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM sensor_gaps WHERE NOT declared", "t"), "the drop is a detected gap")
    }

    /// The other way round: a message whose data the database refuses (a time PostgreSQL cannot
    /// read: SQLSTATE 22008) is skipped, said so, and holds up neither the rest nor the bridge.
    @Test func aMessageWhoseDataTheDatabaseRefusesIsSkippedAlone() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        device.occupy(["P1-C-01"])
        let commands = try listenForCommands(fixture, device)
        defer { commands.stop() }
        device.event("spot.occupied", at: "2026-13-45T99:00:00Z", #""spot":"P1-C-02","level":"P1""#)
        device.occupy(["P1-C-03"])
        #expect(fixture.waitFor("SELECT string_agg(seq::text, ',' ORDER BY seq) FROM sensor_events", "1,3"), "\(bridge.stderr)")
        #expect(eventually(5) { bridge.stderr.contains("message cannot be applied, skipped") }, "\(bridge.stderr)")
        #expect(bridge.stderr.contains("SQLSTATE 22"))
        #expect(!bridge.stderr.contains("database unavailable"), "\(bridge.stderr)")
    }

    /// The bridge's session has the keepalives (its socket's keepalive timer runs on seconds, not on
    /// the system's 2 hours) and the idle-transaction timeout; what the URL sets wins.
    @Test func theSessionDetectsADeadLinkAndEndsOrphanedTransactions() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        #expect(eventually(5) { bridge.stderr.contains("database session") }, "\(bridge.stderr)")
        #expect(bridge.stderr.contains("keepalives_idle_s=10"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("tcp_user_timeout_ms=30000"))
        #expect(bridge.stderr.contains("idle_in_transaction_session_timeout=1min"))
        var seen = ""
        #expect(eventually(10) {
            seen = socketTimers(fixture)
            return keepaliveUnderAMinute(seen)
        }, "ss: \(seen)")
        bridge.signal(SIGTERM)
        #expect(bridge.wait(10) == 0)

        let explicit = fixture.url + "?keepalives_idle=20&options=-c%20idle_in_transaction_session_timeout%3D5min"
        let other = try fixture.startBridge(database: explicit)
        #expect(eventually(5) { other.stderr.contains("database session") }, "\(other.stderr)")
        #expect(other.stderr.contains("keepalives_idle_s=20"), "\(other.stderr)")
        #expect(other.stderr.contains("idle_in_transaction_session_timeout=5min"))
    }
}

/// The bridge's database turns read-only (as an old primary after a failover), its session cut so that the next one
/// sees it.
private func turnReadOnly(_ fixture: BridgeFixture) throws {
    try fixture.cluster.sql("ALTER DATABASE \(fixture.database) SET default_transaction_read_only = on")
    fixture.query("""
        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'parkwise-bridge'
        """)
}

/// What the bridge commands the device (rebirths), from now on.
private func listenForCommands(_ fixture: BridgeFixture, _ device: FakeDevice) throws -> Subscriber {
    let commands = try Subscriber(fixture.broker, filter: device.prefix + "/cmd/#")
    try commands.listen()
    return commands
}


/// `ss -o` of the bridge's database socket: its timers (`timer:(keepalive,9.8sec,0)`).
private func socketTimers(_ fixture: BridgeFixture) -> String {
    let port = fixture.query("""
        SELECT client_port FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'parkwise-bridge' LIMIT 1
        """)
    guard Int(port) != nil, let ss = try? Child("/usr/bin/ss", ["-tnoH", "state", "established", "( sport = :\(port) )"]),
          ss.wait(5) == 0 else { return "no socket for port '\(port)'" }
    return ss.stdout
}

/// Whether the socket's keepalive timer runs on seconds: under a minute left (`9.8sec`, `836ms`,
/// nothing when due now), where the system's default shows as `119min`.
private func keepaliveUnderAMinute(_ ss: String) -> Bool {
    guard let range = ss.range(of: "timer:(keepalive,") else { return false }
    return !ss[range.upperBound...].prefix { $0 != "," }.contains("min")
}
