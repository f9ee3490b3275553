import Foundation
import Testing
import TestSupport

/// PostgreSQL fails over under a running bridge: a primary and its streaming standby, the bridge on a multi-host URL
/// (the standby listed first, no target_session_attrs: the bridge's default for several hosts must pass the read-only
/// standby by), the primary killed (immediate shutdown, as a crash) and the standby promoted.
@Suite(.serialized) struct FailoverTests {
    /// Synchronous replication: a COMMIT the primary acknowledged is on the standby's disk. The reply to the bridge's
    /// last COMMIT before the crash is lost (done on both servers, never acknowledged to the bridge): the bridge applies
    /// that batch again on the promoted standby, where it is found done. Events sent before, during and after the
    /// failover each land once, and every spot is as its last event says.
    @Test func aPromotedSynchronousStandbyTakesOverWithNothingLostOrTwice() throws {
        let pair = try StandbyPair(synchronous: true)
        let (fixture, bridge, device0) = try pair.bridgeAndDevice()
        var device = device0
        device.occupy(spots(1...5))
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "5"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("database session server=127.0.0.1:\(pair.proxy.port) target_session_attrs=read-write"),
                "\(bridge.stderr)")
        #expect(!bridge.stderr.contains(asynchronous), "\(bridge.stderr)")

        pair.proxy.armCut()
        device.occupy(spots(6...6))
        #expect(eventually(10) { pair.proxy.cutCount == 1 }, "\(bridge.stderr)")
        let crashed = Date()
        pair.primary.crash()
        // Flushed there before the primary answered (synchronous_commit = on); replayed a moment later.
        #expect(pair.onStandby(fixture, "SELECT count(*) FROM sensor_events", "6", seconds: 5), "the lost reply's commit is on the standby")
        device.occupy(spots(7...12))
        try pair.standby.promote()
        let promoted = Date().timeIntervalSince(crashed)
        #expect(eventually(30) { Int(pair.standby(fixture, "SELECT count(*) FROM sensor_events")) ?? 0 > 6 }, "\(bridge.stderr)")
        let resumed = Date().timeIntervalSince(crashed)
        device.occupy(spots(13...20))

        #expect(pair.onStandby(fixture, "SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || count(DISTINCT seq) || ' ' || max(seq) FROM sensor_events",
                               "20 20 20 20"), "\(bridge.stderr)")
        #expect(pair.onStandby(fixture, "SELECT string_agg(id, ',' ORDER BY id) FROM spots WHERE source = 'sensor' AND status = 'occupied'",
                               spots(1...20).joined(separator: ",")), "\(bridge.stderr)")
        #expect(pair.standby(fixture, "SELECT last_seq || ' ' || (SELECT count(*) FROM sensor_gaps) FROM sensor_devices") == "20 0")
        #expect(bridge.stderr.contains("database session server=127.0.0.1:\(pair.standby.port)"), "\(bridge.stderr)")
        // The promoted standby has no standby of its own: said, once.
        #expect(bridge.stderr.components(separatedBy: asynchronous).count == 2, "\(bridge.stderr)")
        bridge.signal(SIGTERM)
        #expect(bridge.wait(15) == 0, "\(bridge.stderr)")
        // The batch whose reply was lost, applied again: found done (its event a duplicate), nothing written twice.
        #expect(bridge.stderr.contains("duplicates=1 "), "\(bridge.stderr)")
        print("failover (synchronous standby): promoted \(ms(promoted)) ms after the crash, first new batch committed on it "
              + "\(ms(resumed)) ms after the crash; 20 events sent, 20 applied once, 1 batch re-applied as a duplicate")
    }

    /// Asynchronous replication: the primary acknowledges a COMMIT before its standby has it. What it committed while the
    /// standby lagged (here: its WAL receiver stopped) is gone after the failover, though the bridge saw each commit
    /// succeed, so it never sends those messages again: their event rows are lost for good. The device's next event
    /// shows the hole as a seq jump (a gap, healed from the retained states by a rebirth; the events are not).
    @Test func anAsynchronousStandbyLosesWhatItHadNotReceived() throws {
        let pair = try StandbyPair(synchronous: false)
        let (fixture, bridge, device0) = try pair.bridgeAndDevice()
        var device = device0
        device.occupy(spots(1...3))
        #expect(pair.onStandby(fixture, "SELECT count(*) FROM sensor_events", "3"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains(asynchronous + " server=127.0.0.1:\(pair.proxy.port) synchronous_commit=on synchronous_standby_names=-"),
                "\(bridge.stderr)")

        try pair.standby.sql("ALTER SYSTEM SET primary_conninfo = ''")
        try pair.standby.sql("SELECT pg_reload_conf()")
        #expect(eventually(15) { (try? pair.primary.sql("SELECT count(*) FROM pg_stat_replication")) == "0" })
        device.occupy(spots(4...8))
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "8"), "committed on the primary: \(bridge.stderr)")
        pair.primary.crash()
        try pair.standby.promote()
        device.occupy(spots(9...10))

        #expect(pair.onStandby(fixture, "SELECT string_agg(seq::text, ',' ORDER BY seq) FROM sensor_events", "1,2,3,9,10"),
                "\(bridge.stderr)")
        #expect(pair.onStandby(fixture, "SELECT first_seq || '-' || last_seq FROM sensor_gaps", "4-8"), "\(bridge.stderr)")
        print("failover (asynchronous standby, its WAL receiver stopped): 10 events sent, 5 committed and acknowledged by "
              + "the primary after the standby stopped receiving were lost; the hole was recorded as gap 4-8")
    }

    /// Every command takes a multi-host URL: the first host down, the next one is used. When none answers, the error
    /// says each host's reason on its line, and no password, whether in the user part or a parameter.
    @Test func aMultiHostURLTakesTheHostThatAnswersAndSaysWhyEachOneFailed() throws {
        let fixture = try BridgeFixture(migrate: false)
        let dead = freePort(), other = freePort()
        let migrated = try runBridge(["migrate", "--database",
                                      "postgresql://postgres@127.0.0.1:\(dead),127.0.0.1:\(fixture.cluster.port)/\(fixture.database)"])
        #expect(migrated.code == 0, "\(migrated.err)")
        #expect(migrated.out.contains("now at bridge schema version"), "\(migrated.out)")

        let unreachable = try runBridge(["migrate", "--database",
                                         "postgresql://postgres:secret@127.0.0.1:\(dead),127.0.0.1:\(other)/x?password=secret2&sslmode=disable"])
        #expect(unreachable.code == 1)
        #expect(unreachable.err.contains("cannot connect to postgresql://postgres:***@127.0.0.1:\(dead),127.0.0.1:\(other)/x?password=***&sslmode=disable: "
                                         + "connection to server at \"127.0.0.1\", port \(dead) failed: Connection refused; "
                                         + "connection to server at \"127.0.0.1\", port \(other) failed: Connection refused"), "\(unreachable.err)")
        #expect(!unreachable.err.contains("secret"), "\(unreachable.err)")
    }
}

/// A primary, its streaming standby, and a proxy in front of the primary that can lose a COMMIT's reply.
private final class StandbyPair {
    let primary: PostgresCluster
    let standby: PostgresCluster
    let proxy: CommitCutProxy

    init(synchronous: Bool) throws {
        primary = try PostgresCluster()
        standby = try primary.streamingStandby(synchronous: synchronous)
        proxy = try CommitCutProxy(to: primary.port)
    }

    /// A fresh database on the primary (replicated), the bridge on the multi-host URL, a device online.
    func bridgeAndDevice() throws -> (BridgeFixture, Child, FakeDevice) {
        let fixture = try BridgeFixture(cluster: primary)
        let bridge = try fixture.startBridge(database: url(fixture.database))
        let device = FakeDevice(fixture.broker)
        device.online()
        return (fixture, bridge, device)
    }

    /// The bridge's URL: the standby first (read-only until promoted), then the primary (through the proxy).
    func url(_ database: String) -> String {
        "postgresql://postgres@127.0.0.1:\(standby.port),127.0.0.1:\(proxy.port)/\(database)?sslmode=disable&gssencmode=disable"
    }

    func standby(_ fixture: BridgeFixture, _ sql: String) -> String {
        (try? standby.sql(sql, database: fixture.database)) ?? "<query failed>"
    }

    /// Waits until `sql` on the standby (the new primary) returns `expected`.
    func onStandby(_ fixture: BridgeFixture, _ sql: String, _ expected: String, seconds: Double = 20) -> Bool {
        eventually(seconds) { standby(fixture, sql) == expected }
    }

    deinit { proxy.stop() }
}

/// The warning of a session whose commits do not wait for a standby.
private let asynchronous = "warn database commits do not wait for a standby: a failover may lose batches already committed"

/// Spots P1-A-01… of `numbers`.
private func spots(_ numbers: ClosedRange<Int>) -> [String] { numbers.map { "P1-A-" + String(format: "%02d", $0) } }

private func ms(_ seconds: TimeInterval) -> Int { Int((seconds * 1000).rounded()) }
