import Foundation
import Testing
import TestSupport

/// The contract's hard cases, sent with mosquitto_pub as a device would send them, through a real
/// broker into the real bridge and PostgreSQL.
@Suite(.serialized) struct FeedTests {
    @Test func aFaultTakesTheSpotOutOfTheFreeCountAndRecoveryBringsItBack() throws {
        let fixture = try BridgeFixture()
        fixture.query("UPDATE spots SET status = 'disabled' WHERE id = 'P1-A-05'")   // an administrator's
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P1-A-04", "free", since: nil)
        device.spot("P1-A-05", "free", since: nil)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spots", "2"))
        #expect(fixture.spot("P1-A-04") == "free/sensor")
        let free = fixture.free("P1")

        device.event("sensor.fault", #""subject":"spot P1-A-04","input":"GPIO5","reason":"stuck""#)
        device.spot("P1-A-04", "unknown", since: nil)
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-04'", "disabled/sensor"))
        #expect(fixture.free("P1") == free - 1)
        #expect(fixture.query("SELECT reason || ' ' || (recovered_at IS NULL) FROM sensor_faults") == "stuck true")

        device.event("sensor.recovered", #""subject":"spot P1-A-04","input":"GPIO5""#)
        device.spot("P1-A-04", "free", since: nil)
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-04'", "free/sensor"))
        #expect(fixture.free("P1") == free)
        #expect(fixture.query("SELECT recovered_at IS NOT NULL FROM sensor_faults") == "t")
        // The device's chatter is the bridge's own record, never the product's analytics (telemetry_events).
        #expect(fixture.query("SELECT count(*) FROM telemetry_events") == "0")
        // The administrator's disabled spot stays theirs.
        #expect(fixture.spot("P1-A-05") == "disabled/-")
    }

    @Test func aDeviceOfflinePastTheTimeoutLeavesTheFreeCountAndComesBack() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge(config: "stale_after: 1s\nreassert_every: 200ms\n")
        let device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P1-B-01", "occupied", since: wireTime(-60))
        device.spot("P1-B-02", "free", since: wireTime(-30))
        #expect(fixture.waitFor("SELECT string_agg(status, ',' ORDER BY id) FROM spots WHERE id IN ('P1-B-01', 'P1-B-02')",
                                "occupied,free"))
        let free = fixture.free("P1")
        let commands = try Subscriber(fixture.broker, filter: device.prefix + "/cmd/#")
        try commands.listen()
        device.offline()
        #expect(fixture.waitFor("SELECT stale FROM sensor_devices", "t"))
        // An offline may be a last will another bridge of a shared group saw overtaken by the reconnect's online: a
        // rebirth has a device that is up say so again.
        #expect(eventually(10) { commands.messages.contains { $0.topic == device.prefix + "/cmd/rebirth" } })
        commands.stop()
        #expect(fixture.waitFor("SELECT string_agg(status || '/' || source, ',' ORDER BY id) FROM spots WHERE id IN ('P1-B-01', 'P1-B-02')",
                                "disabled/sensor,disabled/sensor"))
        #expect(fixture.free("P1") == free - 1)
        device.online()
        #expect(fixture.waitFor("SELECT string_agg(status, ',' ORDER BY id) FROM spots WHERE id IN ('P1-B-01', 'P1-B-02')",
                                "occupied,free"))
        #expect(fixture.free("P1") == free)
    }

    /// Two bridges of a shared group can apply a connection's statuses in either order: its online after its offline
    /// (the clean stop, or the last will), or an earlier connection's last will after the next one's online. The
    /// statuses name their connection, and the older news changes nothing (issue 25: boards left online after a stop).
    @Test func aStatusOlderThanTheOneAppliedChangesNothing() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(extra: ["--verbose"])
        let device = FakeDevice(fixture.broker)
        var marker = FakeDevice(fixture.broker, device: "p1-south")
        var markers = 0
        // Everything sent before the marker's next status is applied once that status is (one subscription, in order).
        func applied() -> Bool {
            markers += 1
            marker.boot = UInt64(markers)
            marker.online()
            return fixture.waitFor("SELECT (status->>'boot') FROM sensor_devices WHERE device = 'p1-south'", "\(markers)")
        }
        func online() -> String { fixture.query("SELECT online FROM sensor_devices WHERE device = 'p1-north'") }
        let commands = try Subscriber(fixture.broker, filter: device.prefix + "/cmd/#")
        try commands.listen()

        device.online(connection: 3)
        device.offline(connection: 3)   // the clean stop
        device.online(connection: 3)    // its connection's online, late
        device.online(connection: 2)    // an earlier connection's
        #expect(applied())
        #expect(online() == "f")
        #expect(fixture.query("SELECT count(*) FROM sensor_device_outages WHERE device = 'p1-north' AND ended IS NULL") == "1")

        device.online(connection: 4)    // the next connection: news
        #expect(applied())
        #expect(online() == "t")
        device.offline(connection: 3)   // connection 3's last will, late
        #expect(applied())
        #expect(online() == "t")
        #expect(fixture.query("SELECT count(*) FROM sensor_device_outages WHERE device = 'p1-north' AND ended IS NULL") == "0")
        #expect(bridge.stderr.contains("an offline older than the device's online, ignored device=garage/p1-north boot=1 connection=3"),
                "\(bridge.stderr)")
        #expect(bridge.stderr.contains("an online status older than the device's last, ignored device=garage/p1-north boot=1"),
                "\(bridge.stderr)")
        // Numbered, the offline needs no rebirth to be set right.
        commands.stop()
        #expect(!commands.messages.contains { $0.topic == device.prefix + "/cmd/rebirth" }, "\(commands.messages.map(\.topic))")

        // An agent that does not number its connections: applied in arrival order, as before.
        device.offline()
        #expect(applied())
        #expect(online() == "f")
        device.online()
        #expect(applied())
        #expect(online() == "t")
    }

    /// A spot another device sensed before (a board replaced under a new device id, a sensor rewired to another board)
    /// is the new device's once the old one is offline, although the new one's seqs are far below the old one's; while
    /// both are online it stays the first one's. (Found by the system test: a simulator's leftovers kept a commissioned
    /// board's spot for ever.)
    @Test func aSpotGoesToAnotherDeviceOnceItsFormerOneIsOffline() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        let old = FakeDevice(fixture.broker)
        var new = FakeDevice(fixture.broker, device: "p1-south")
        old.online()
        old.spot("P1-A-07", "occupied", since: wireTime(-600), asOf: 5_000)
        #expect(fixture.waitFor("SELECT device || '/' || state FROM sensor_spots WHERE spot_id = 'P1-A-07'", "p1-north/occupied"))
        new.online()
        new.spot("P1-A-07", "free", since: wireTime(-5))
        new.event("spot.occupied", #""spot":"P1-B-03""#)   // a marker: the batch with the claim is applied
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spots WHERE spot_id = 'P1-B-03'", "1"))
        #expect(fixture.query("SELECT device || '/' || state FROM sensor_spots WHERE spot_id = 'P1-A-07'") == "p1-north/occupied")

        old.offline()
        new.spot("P1-A-07", "free", since: wireTime(-5), asOf: 1)
        #expect(fixture.waitFor("SELECT device || '/' || state FROM sensor_spots WHERE spot_id = 'P1-A-07'", "p1-south/free"))
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-07'", "free/sensor"))
        new.event("spot.occupied", #""spot":"P1-A-07""#)
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-07'", "occupied/sensor"))
    }

    /// A device the bridge has only seen offline (a simulator stopped before the bridge first ran: its retained status
    /// is the offline form, without the mode) is no live feed at the bridge's next start: its retained states wait for
    /// an online status to say what it is. (Found by the system test: the campus simulator's states went into
    /// sensor_spots as real after a bridge restart.)
    @Test func aDeviceSeenOnlyOfflineIsNoLiveFeedAtTheNextStart() throws {
        let fixture = try BridgeFixture()
        let simulator = FakeDevice(fixture.broker, device: "campus-sim")
        simulator.offline()
        simulator.spot("P1-A-09", "occupied", since: wireTime(-60), asOf: 900)
        let first = try fixture.startBridge(config: "reassert_every: 200ms\n")   // the simulator's retained messages come first
        var marker = FakeDevice(fixture.broker)
        marker.online()
        marker.event("spot.occupied", #""spot":"P1-B-05""#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spots WHERE spot_id = 'P1-B-05'", "1"))
        #expect(fixture.waitFor("SELECT online::text FROM sensor_devices WHERE device = 'campus-sim'", "false"))
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)
        _ = try fixture.startBridge(config: "reassert_every: 200ms\n")
        marker.event("spot.occupied", #""spot":"P1-B-06""#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spots WHERE spot_id = 'P1-B-06'", "1"))
        #expect(fixture.query("SELECT count(*) FROM sensor_spots WHERE device = 'campus-sim'") == "0")
        // Once it says it is simulated, it stays out; the real spot too.
        simulator.online(mode: "simulated")
        marker.event("spot.occupied", #""spot":"P1-B-07""#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spots WHERE spot_id = 'P1-B-07'", "1"))
        #expect(fixture.query("SELECT count(*) FROM sensor_spots WHERE device = 'campus-sim'") == "0")
        #expect(fixture.query("SELECT source IS DISTINCT FROM 'sensor' FROM spots WHERE id = 'P1-A-09'") == "t")
    }

    /// A device whose disk refuses its writes says so in its status: the bridge keeps it on the device's row, and
    /// clears it once a status no longer says it.
    @Test func aDevicesStorageFaultIsKeptWhileItsStatusSaysIt() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        let device = FakeDevice(fixture.broker)
        device.online()
        #expect(fixture.waitFor("SELECT online::text || '/' || coalesce(storage_fault, 'none') FROM sensor_devices", "true/none"))
        let fault = "cannot write outbox file /var/lib/parkwise/outbox.log: Read-only file system (errno 30)"
        device.online(storageFault: fault)
        #expect(fixture.waitFor("SELECT storage_fault FROM sensor_devices", fault))
        #expect(eventually(10) { bridge.stderr.contains("device reports a storage fault") }, "\(bridge.stderr)")
        // A bridge restarted meanwhile (or another one of a shared group) still says when the fault ends: it compares
        // with what the database held.
        bridge.signal(SIGTERM)
        #expect(bridge.wait(10) == 0)
        let next = try fixture.startBridge()
        device.online()
        #expect(fixture.waitFor("SELECT coalesce(storage_fault, 'none') FROM sensor_devices", "none"))
        #expect(eventually(10) { next.stderr.contains("device storage works again") }, "\(next.stderr)")
        #expect(!next.stderr.contains("device reports a storage fault"), "\(next.stderr)")
    }

    @Test func duplicatedAndReplayedDeliveryIsAppliedOnce() throws {
        let fixture = try BridgeFixture()
        fixture.reserve("P1-C-07")
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        let arrival = wireTime(-20), departure = wireTime(-5)
        let occupied = device.event("spot.occupied", at: arrival, #""spot":"P1-C-07","level":"P1""#)
        let checkin = device.event("spot.checkin", at: wireTime(-18), #""spot":"P1-C-07","level":"P1","arrival":"\#(arrival)""#)
        device.spot("P1-C-07", "occupied", since: arrival, checkedIn: true)
        #expect(fixture.waitFor("SELECT status FROM reservations", "fulfilled"))
        // The same events again (a lost PUBACK), one marked replayed: nothing changes, nothing is counted twice.
        device.send("events", occupied)
        device.send("events", checkin.replacingOccurrences(of: "\"type\"", with: "\"replayed\":true,\"type\""))
        let vacated = device.event("spot.vacated", at: departure, #""spot":"P1-C-07","level":"P1""#)
        let checkout = device.event("spot.checkout", at: departure,
                                    #""spot":"P1-C-07","level":"P1","arrival":"\#(arrival)","departure":"\#(departure)","stay_s":15"#)
        device.spot("P1-C-07", "free", since: departure)
        #expect(fixture.waitFor("SELECT status FROM reservations", "released"))
        device.send("events", checkout)
        device.send("events", vacated)
        device.send("events", checkin)
        // (A new id under a seq already used is no redelivery: the device's counters went back, CounterResetTests.)
        // A marker: the bridge applies in order, so once it shows, everything before it was applied.
        device.spot("P1-C-08", "free", since: nil)
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-C-08'", "free"), "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "4")
        #expect(fixture.spot("P1-C-07") == "free/sensor")
        #expect(fixture.query("SELECT count(*) FROM reservations") == "1")
        #expect(epochMs(fixture, "SELECT checked_in_at FROM reservations") == epochMs(fixture, "'\(arrival)'::timestamptz"))
        #expect(epochMs(fixture, "SELECT released_at FROM reservations") == epochMs(fixture, "'\(departure)'::timestamptz"))
        // A check-in applied twice would have found no active reservation the second time: one arrival, the reservation's.
        #expect(fixture.query("SELECT string_agg(kind, ',') FROM sensor_arrivals") == "checked_in")
        #expect(fixture.query("SELECT string_agg(name, ',' ORDER BY id) FROM telemetry_events") == "sensor_check_in,sensor_check_out")
        #expect(fixture.query("SELECT last_seq FROM sensor_devices") == "4")
    }

    @Test func aSeqGapIsRecordedAndHealedFromTheRetainedStates() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        let commands = try Subscriber(fixture.broker, filter: device.prefix + "/cmd/#")
        try commands.listen()
        device.online()
        device.event("spot.occupied", #""spot":"P1-A-10","level":"P1""#)
        device.spot("P1-A-10", "occupied", since: wireTime(-1))
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-A-10'", "occupied"))
        // Seqs 2-3 never arrive: P1-A-10 was vacated and P1-A-11 taken meanwhile.
        device.skip(2)
        device.event("lane.passage", #""lane":"P1-ramp","from":"outside","to":"P1""#)
        #expect(fixture.waitFor("SELECT first_seq || '-' || last_seq || ' ' || declared FROM sensor_gaps", "2-3 false"))
        func rebirths() -> Int { commands.messages.filter { $0.topic == device.prefix + "/cmd/rebirth" }.count }
        let before = rebirths()
        // Checked a moment later (another bridge might have had seqs 2-3): still missing, so a rebirth.
        #expect(fixture.waitFor("SELECT checked FROM sensor_gaps", "t"))
        #expect(eventually(10) { rebirths() > before }, "\(commands.messages.map(\.topic))")
        // The device answers the rebirth with its retained states: the bridge reconciles every spot.
        device.spot("P1-A-10", "free", since: wireTime(-3))
        device.spot("P1-A-11", "occupied", since: wireTime(-2))
        #expect(fixture.waitFor("SELECT string_agg(status, ',' ORDER BY id) FROM spots WHERE id IN ('P1-A-10', 'P1-A-11')",
                                "free,occupied"))
        // A declared gap is recorded as such, and asks for a rebirth.
        let beforeDeclared = rebirths()
        let declared = device.event("outbox.dropped", #""dropped":2,"first_seq":2,"last_seq":3"#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_gaps WHERE declared", "1"))
        #expect(eventually(10) { rebirths() > beforeDeclared })
        // The same declaration again (a device sends it on every connection until acknowledged; or the first one's
        // commit reply was lost and the rebirth with it): recorded once, and a rebirth asked again.
        let beforeAgain = rebirths()
        device.send("events", declared)
        #expect(eventually(10) { rebirths() > beforeAgain }, "\(commands.messages.map(\.topic))")
        #expect(fixture.query("SELECT count(*) FROM sensor_gaps WHERE declared") == "1")
        commands.stop()
    }

    /// A rule of the backend's own refuses what the sensors say about one spot: that spot is left as the backend has
    /// it and the refusal is said, but the batch keeps its events and the other spots (each message was skipped).
    @Test func aSpotTheBackendsRulesRefuseCostsTheBatchNothing() throws {
        let fixture = try BridgeFixture()
        fixture.query("ALTER TABLE spots ADD CONSTRAINT p1_c_09_never_sensed CHECK (id <> 'P1-C-09' OR source IS DISTINCT FROM 'sensor')")
        // Both events sent while the bridge is down: one batch when it is back.
        var device = try fixture.deviceSeenByAKilledBridge(spot: "P1-C-08", level: "P1")
        device.event("spot.occupied", #""spot":"P1-C-09","level":"P1""#)
        device.event("spot.occupied", #""spot":"P1-C-10","level":"P1""#)
        let next = try fixture.startBridge()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "3"), "\(next.stderr)")
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-C-10'", "occupied"), "\(next.stderr)")
        #expect(fixture.query("SELECT coalesce(source, 'none') FROM spots WHERE id = 'P1-C-09'") != "sensor")
        #expect(eventually(10) { next.stderr.contains("spots not updated: the backend's database refused") }, "\(next.stderr)")
        #expect(!next.stderr.contains("skipped"), "\(next.stderr)")
    }

    @Test func anUnknownSpotIsRecordedNotApplied() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P9-Z-99", "occupied", since: wireTime(-1))
        device.event("spot.occupied", #""spot":"P9-Z-99","level":"P9""#)
        device.spot("P1-A-12", "occupied", since: wireTime(-1))
        #expect(fixture.waitFor("SELECT reports FROM sensor_unknown_spots WHERE spot_id = 'P9-Z-99'", "2"))
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-A-12'", "occupied"))
        #expect(fixture.query("SELECT count(*) FROM spots WHERE source IS NOT NULL") == "1")
        #expect(fixture.query("SELECT count(*) FROM spots") == "156")
    }
}

/// occupancy_snapshots like the simulator's: one row per level per slot, source 'sensor'.
/// A device that lost its state directory and restarted until `boot` was back at the stored one sends seqs it used
/// before, with new events: detected (the same boot and seq under another id), accepted, rebuilt.
@Suite struct CounterResetTests {
    @Test func aSeqUsedAgainForAnotherEventRestartsTheDevicesOrder() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.boot = 2
        let commands = try Subscriber(fixture.broker, filter: device.prefix + "/cmd/#")
        try commands.listen()
        device.online()
        device.event("spot.occupied", #""spot":"P3-A-05","level":"P3""#)
        device.event("spot.vacated", #""spot":"P3-A-05","level":"P3""#)
        device.event("spot.occupied", #""spot":"P3-A-06","level":"P3""#)
        #expect(fixture.waitFor("SELECT last_seq FROM sensor_devices", "3"))
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P3-A-05'", "free"))
        var reborn = FakeDevice(fixture.broker)   // same id, counters lost: boot 2 again, seqs from 1
        reborn.boot = 2
        reborn.event("spot.occupied", #""spot":"P3-A-05","level":"P3""#)
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P3-A-05'", "occupied"), "\(bridge.stderr)")
        #expect(bridge.stderr.contains("device used a seq again for another event"), "\(bridge.stderr)")
        #expect(eventually(10) { commands.messages.contains { $0.topic == device.prefix + "/cmd/rebirth" } })
        #expect(fixture.query("SELECT last_seq FROM sensor_devices") == "1")
    }
}

@Suite struct SnapshotTests {
    @Test func eachLevelGetsOneSnapshotPerSlotAndAnUnknownCountNone() throws {
        let fixture = try BridgeFixture()
        var device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P3-A-01", "occupied", since: wireTime(-60))
        device.spot("P3-A-02", "unknown", since: nil)
        device.send("state/level/P1", #"{"capacity":60,"free":30,"lane_count":30,"occupied":30,"source":"lanes","spots_occupied":0,"spots_sensed":0,"spots_unknown":0}"#, retain: true)
        device.send("state/level/P2", #"{"capacity":48,"free":null,"lane_count":null,"occupied":null,"source":"unknown","spots_occupied":0,"spots_sensed":0,"spots_unknown":0}"#, retain: true)
        _ = device.event("lane.passage", #""lane":"P1-gate","from":"outside","to":"P1""#)
        fixture.reserve("P1-B-09")
        // Two-second slots, so a test sees several; the backend's are 15 minutes.
        try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nsnapshot_every: 2s\n")
        #expect(fixture.waitFor("SELECT count(DISTINCT taken_at) >= 2 FROM occupancy_snapshots", "t"), "\(fixture.bridge?.stderr ?? "")")
        let latest = "SELECT level_code || ' ' || total || ' ' || free || ' ' || reserved || ' ' || occupied || ' ' || source FROM occupancy_snapshots WHERE taken_at = (SELECT max(taken_at) FROM occupancy_snapshots) ORDER BY level_code"
        // P1 from the lane count (30 of 60, one reserved); P3 has a spot whose sensor cannot see and P2's count is
        // unknown: no row for either rather than a false number (issue 36: a level's row only while every sensed spot
        // of it is known).
        #expect(fixture.query(latest) == "P1 60 29 1 30 sensor", "\(fixture.query(latest))")
        #expect(fixture.query("SELECT count(*) FROM occupancy_snapshots WHERE level_code IN ('P2', 'P3')") == "0")
        // The sensor sees again: P3 from its spots.
        device.spot("P3-A-02", "free", since: wireTime())
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots WHERE level_code = 'P3' AND total = 48 AND free = 47 AND occupied = 1", "t"),
                "\(fixture.query("SELECT string_agg(total || '/' || free, ' ') FROM occupancy_snapshots WHERE level_code = 'P3'"))")
        #expect(fixture.query("SELECT count(*) FROM occupancy_snapshots WHERE extract(epoch FROM taken_at)::bigint % 2 <> 0") == "0")
        #expect(fixture.query("SELECT count(*) FROM (SELECT level_code, taken_at FROM occupancy_snapshots GROUP BY 1, 2 HAVING count(*) > 1) d") == "0")
    }
}

/// The bridge never waits for the API's row locks (SKIP LOCKED, like the simulator).
@Suite struct LockTests {
    @Test func aCheckInHeldUpByTheApiIsNotWaitedForAndCompletedOnceTheRowIsFree() throws {
        let fixture = try BridgeFixture()
        fixture.reserve("P1-C-12")
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P1-C-13", "free", since: nil)
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-C-13'", "free"))
        // An API transaction holds the reservation (and its spot) for 4 s.
        let api = try Child("/usr/bin/psql", ["-X", "-q", "-d", fixture.url, "-c",
                                              "BEGIN; SELECT 1 FROM reservations FOR UPDATE; SELECT 1 FROM spots WHERE id = 'P1-C-12' FOR UPDATE; SELECT pg_sleep(4); COMMIT;"])
        #expect(fixture.waitFor("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4)%' AND state = 'active' AND pid <> pg_backend_pid()", "1"))
        let arrival = wireTime(-3)
        device.event("spot.occupied", at: arrival, #""spot":"P1-C-12","level":"P1""#)
        device.event("spot.checkin", #""spot":"P1-C-12","level":"P1","arrival":"\#(arrival)""#)
        device.spot("P1-C-12", "occupied", since: arrival, checkedIn: true)
        device.spot("P1-C-13", "occupied", since: wireTime(-1))
        // Meanwhile the bridge goes on with everything else.
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-C-13'", "occupied", seconds: 3), "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.query("SELECT status FROM reservations") == "active")
        #expect(!api.hasExited, "the API transaction should still hold its rows")
        // Once the API commits, the check-in is completed with the arrival time.
        #expect(api.wait(10) == 0)
        #expect(fixture.waitFor("SELECT status FROM reservations", "fulfilled"))
        #expect(epochMs(fixture, "SELECT checked_in_at FROM reservations") == epochMs(fixture, "'\(arrival)'::timestamptz"))
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-C-12'", "occupied/sensor"))
        #expect(fixture.waitFor("SELECT string_agg(kind, ',') FROM sensor_arrivals", "checked_in"))
    }
}

/// An event stamped before NTP set the board's clock comes again `corrected`: the corrected times stay.
@Suite struct ClockTests {
    @Test func aCorrectedRedeliveryRedatesTheCheckIn() throws {
        let fixture = try BridgeFixture()
        fixture.reserve("P2-A-20", minutesAgo: 5)
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        let wrong = wireTime(-200), right = wireTime(-100)   // the unsynced clock was 100 s behind
        let unsynced = device.stamp("spot.checkin", at: wireTime(-150), clock: "unsynced",
                                    #""spot":"P2-A-20","level":"P2","arrival":"\#(wrong)""#)
        device.send("events", unsynced)
        #expect(fixture.waitFor("SELECT status FROM reservations", "fulfilled"), "\(fixture.bridge?.stderr ?? "")")
        #expect(epochMs(fixture, "SELECT checked_in_at FROM reservations") == epochMs(fixture, "'\(wrong)'::timestamptz"))
        let corrected = unsynced.replacingOccurrences(of: #""clock":"unsynced""#, with: #""clock":"corrected""#)
            .replacingOccurrences(of: wrong, with: right)
        device.send("events", corrected)
        #expect(fixture.waitFor("SELECT (extract(epoch FROM checked_in_at) * 1000)::bigint::text FROM reservations",
                                epochMs(fixture, "'\(right)'::timestamptz")), "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.query("SELECT payload->>'clock' FROM sensor_events") == "corrected")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "1")
    }

    /// Both copies in one batch (sent while the bridge was down, kept by its persistent session): the spot's times
    /// are the corrected ones.
    @Test func anUnsyncedEventAndItsCorrectionInOneBatchLeaveTheCorrectedTime() throws {
        let fixture = try BridgeFixture()
        var device = try fixture.deviceSeenByAKilledBridge(spot: "P2-A-21", level: "P2")
        let wrong = wireTime(-200), right = wireTime(-100)
        let unsynced = device.stamp("spot.vacated", at: wrong, clock: "unsynced", #""spot":"P2-A-21","level":"P2""#)
        device.send("events", unsynced)
        device.send("events", unsynced.replacingOccurrences(of: #""clock":"unsynced""#, with: #""clock":"corrected""#)
            .replacingOccurrences(of: wrong, with: right))
        let bridge = try fixture.startBridge()
        #expect(fixture.waitFor("SELECT payload->>'clock' FROM sensor_events WHERE seq = 2", "corrected"), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT (extract(epoch FROM since) * 1000)::bigint::text FROM sensor_spots WHERE spot_id = 'P2-A-21'",
                                epochMs(fixture, "'\(right)'::timestamptz")), "\(bridge.stderr)")
    }
}

/// With a shared subscription a bridge may see seq 5 while seq 4 is in another bridge's batch: a
/// jump whose seqs arrive meanwhile is no gap.
@Suite struct SharedOrderTests {
    @Test func aJumpFilledByAnotherDeliveryIsNoGap() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        device.event("spot.occupied", #""spot":"P3-B-01","level":"P3""#)
        let second = device.stamp("spot.occupied", #""spot":"P3-B-02","level":"P3""#)
        device.event("spot.occupied", #""spot":"P3-B-03","level":"P3""#)   // seq 3 before seq 2
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_gaps", "1"))
        device.send("events", second)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "3"))
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_gaps", "0", seconds: 10), "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.query("SELECT last_seq FROM sensor_devices") == "3")
    }
}
