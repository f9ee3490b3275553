import Foundation
import Testing
import TestSupport

/// Failures of a batch that no message caused: a rule someone added to a table the bridge writes for the whole batch
/// (the device cursors, the commit, the snapshot), and a site `statement_timeout` shorter than a batch. Nothing is
/// skipped for them, and the log says what happened and what to do.
@Suite(.serialized) struct BatchFaultTests {
    /// A CHECK on sensor_devices refuses the batch's cursor write (SQLSTATE 23514): before, every message of the batch
    /// was then tried alone, refused alone, and skipped. Now the batch is held, named, and lands once the rule goes;
    /// a deferred constraint trigger refusing at commit is held the same way.
    @Test func aRuleOnTheBatchsOwnWriteHoldsTheBatchInsteadOfSkippingIt() throws {
        let fixture = try BridgeFixture()
        let started = try fixture.bridgeWithAppliedEvents(3)
        let bridge = started.bridge
        var device = started.device
        try fixture.cluster.sql("ALTER TABLE sensor_devices ADD CONSTRAINT last_seq_frozen CHECK (last_seq <= 3)", database: fixture.database)
        device.occupy((4...8).map { "P1-A-0\($0)" })
        #expect(eventually(15) { bridge.stderr.contains("a rule of the database refuses the bridge's own write, not a message") },
                "\(bridge.stderr)")
        #expect(bridge.stderr.contains("statement=cursor_write table=sensor_devices"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("SQLSTATE 23514"))
        #expect(bridge.stderr.contains("hint=\"a CHECK, trigger or rule on sensor_devices"))
        #expect(bridge.stderr.contains("database unavailable, holding received messages"))
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "3")
        try fixture.cluster.sql("ALTER TABLE sensor_devices DROP CONSTRAINT last_seq_frozen", database: fixture.database)
        #expect(fixture.eventsLandedOnce(8, seconds: 40), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor' AND status = 'occupied'", "8"))
        #expect(eventually(5) { bridge.stderr.contains("database available again") }, "\(bridge.stderr)")

        // A rule checked at commit: a deferred constraint trigger.
        try fixture.cluster.sql("""
            CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE check_violation USING MESSAGE = 'refused by a deferred rule'; END $$;
            CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON sensor_events
              DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
            """, database: fixture.database)
        device.occupy(["P1-A-09", "P1-A-10"])
        #expect(eventually(15) { bridge.stderr.contains("statement=commit") }, "\(bridge.stderr)")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "8")
        try fixture.cluster.sql("DROP TRIGGER refuse_at_commit ON sensor_events", database: fixture.database)
        #expect(fixture.waitFor("SELECT count(*) || ' ' || max(seq) FROM sensor_events", "10 10", seconds: 40), "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("skipped"), "\(bridge.stderr)")
    }

    /// A status whose boot does not fit the cursor's bigint would be refused by the cursor write, where no message is
    /// blamed (the feed held for ever): it is refused at the door instead, alone, and the feed goes on.
    @Test func aStatusWhoseBootDoesNotFitIsRefusedAlone() throws {
        let fixture = try BridgeFixture()
        let started = try fixture.bridgeWithAppliedEvents(1)
        let bridge = started.bridge
        var device = started.device
        device.send("status", #"{"boot":9223372036854775808,"since":"\#(wireTime())","state":"online","version":"0.1.0"}"#)
        device.occupy(["P1-A-02"])
        #expect(fixture.eventsLandedOnce(2, seconds: 15), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("message does not follow the contract, skipped topic=parkwise/v1/garage/p1-north/status"),
                "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("database unavailable"), "\(bridge.stderr)")
    }

    /// A CHECK on occupancy_snapshots refuses the sweep's snapshot: said once, naming it, while the feed goes on
    /// (nothing held, nothing skipped); the snapshot is written once the rule goes. Then a snapshot slower than the
    /// bridge role's statement_timeout: said the same way (before, each sweep started and ended an outage).
    @Test func aRefusedOrTimedOutSnapshotIsSaidOnceAndTheFeedGoesOn() throws {
        let fixture = try BridgeFixture()
        try fixture.cluster.sql("ALTER TABLE occupancy_snapshots ADD CONSTRAINT no_sensor_rows CHECK (source <> 'sensor')",
                                database: fixture.database)
        let (role, url) = try fixture.bridgeRole()
        try fixture.cluster.sql("ALTER ROLE \(role) IN DATABASE \(fixture.database) SET statement_timeout = '300ms'")
        let bridge = try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nsnapshot_every: 1s\n",
                                             database: url)
        var device = FakeDevice(fixture.broker)
        device.online()
        device.occupy(["P1-B-01"])
        #expect(eventually(15) { bridge.stderr.contains("a step of the sweep failed, tried again at the next sweep") }, "\(bridge.stderr)")
        #expect(bridge.stderr.contains("statement=snapshot table=occupancy_snapshots"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("SQLSTATE 23514"))
        device.occupy(["P1-B-02", "P1-B-03"])
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor' AND status = 'occupied'", "3"), "\(bridge.stderr)")
        try fixture.cluster.sql("ALTER TABLE occupancy_snapshots DROP CONSTRAINT no_sensor_rows", database: fixture.database)
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots WHERE source = 'sensor' AND occupied = 3", "t"),
                "\(bridge.stderr)")
        #expect(eventually(5) { bridge.stderr.contains("the sweep's step works again statement=snapshot") }, "\(bridge.stderr)")
        #expect(bridge.stderr.components(separatedBy: "a step of the sweep failed").count == 2, "once: \(bridge.stderr)")

        try fixture.cluster.sql("""
            CREATE FUNCTION slow_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END $$;
            CREATE TRIGGER slow_snapshot BEFORE INSERT ON occupancy_snapshots FOR EACH ROW EXECUTE FUNCTION slow_snapshot();
            """, database: fixture.database)
        #expect(eventually(15) { bridge.stderr.contains("SQLSTATE 57014") }, "\(bridge.stderr)")
        #expect(bridge.stderr.contains("hint=\"raise statement_timeout for the bridge's role"), "\(bridge.stderr)")
        device.occupy(["P1-B-04"])
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-B-04'", "occupied"), "\(bridge.stderr)")
        #expect(bridge.stderr.components(separatedBy: "a step of the sweep failed").count == 3, "once more: \(bridge.stderr)")
        #expect(!bridge.stderr.contains("database unavailable"), "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("skipped"), "\(bridge.stderr)")
    }

    /// The bridge's role has a statement_timeout (300 ms) that a trigger sleeping 10 ms per event makes a batch of
    /// 120 events exceed: batches are cut (said once, with the setting), every event lands, and batches grow back.
    /// One event alone slower than the timeout is held and said so, and lands once the database is fast again.
    @Test func aStatementTimeoutShorterThanABatchCutsTheBatches() throws {
        let fixture = try BridgeFixture()
        let (role, url) = try fixture.bridgeRole()
        try fixture.cluster.sql("ALTER ROLE \(role) IN DATABASE \(fixture.database) SET statement_timeout = '300ms'")
        var device = try fixture.deviceSeenByAKilledBridge(spot: "P1-C-01", level: "P1")
        try slowEvents(fixture, seconds: 0.01)
        device.occupy((0..<120).map { "P1-C-" + String(format: "%02d", 1 + $0 % 20) })
        let bridge = try fixture.startBridge(database: url)
        #expect(fixture.eventsLandedOnce(121, seconds: 60), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("batches cut: the database's statement_timeout cancels bigger ones"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("statement_timeout=300ms"))
        #expect(bridge.stderr.contains("SQLSTATE 57014"))
        #expect(bridge.stderr.components(separatedBy: "batches cut").count == 2, "said once: \(bridge.stderr)")
        // Small batches (the backlog is gone) let the limit grow back to batch_size.
        for i in 1...8 {
            device.occupy(["P1-A-" + String(format: "%02d", i)])
            #expect(fixture.waitFor("SELECT max(seq) FROM sensor_events", "\(121 + i)"), "\(bridge.stderr)")
        }
        #expect(eventually(5) { bridge.stderr.contains("batches back to full size batch_size=500") }, "\(bridge.stderr)")

        // One event alone slower than the timeout: held, said, and applied once the writes are fast again.
        try slowEvents(fixture, seconds: 0.5)
        device.occupy(["P1-A-09"])
        #expect(eventually(15) { bridge.stderr.contains("one message alone takes longer than the database's statement_timeout") },
                "\(bridge.stderr)")
        #expect(bridge.stderr.contains("database unavailable, holding received messages"))
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "129")
        try slowEvents(fixture, seconds: 0)
        #expect(fixture.waitFor("SELECT count(*) || ' ' || max(seq) FROM sensor_events", "130 130", seconds: 40), "\(bridge.stderr)")
        #expect(eventually(5) { bridge.stderr.contains("database available again") }, "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("skipped"), "\(bridge.stderr)")
    }
}

/// Each new row of sensor_events takes `seconds` longer to insert (a trigger; 0: none).
private func slowEvents(_ fixture: BridgeFixture, seconds: Double) throws {
    try fixture.cluster.sql("""
        CREATE OR REPLACE FUNCTION slow_event() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(\(seconds)); RETURN NEW; END $$;
        CREATE OR REPLACE TRIGGER slow_event BEFORE INSERT ON sensor_events FOR EACH ROW EXECUTE FUNCTION slow_event();
        """, database: fixture.database)
}

