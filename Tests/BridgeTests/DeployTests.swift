import Foundation
import Testing
import TestSupport

/// deploy/backend/README.md as a backend engineer follows it: the bridge's own role with exactly the documented
/// grants, upgrades with `run --migrate`, and the rollback's SQL, each run verbatim from the README.
@Suite(.serialized) struct DeployTests {
    /// A role (not a superuser, not the tables' owner) given the README's GRANTs takes the whole feed: telemetry, faults
    /// and gaps draw ids from sequences, snapshots read back what they insert. `migrate --grant` grants the same. A
    /// privilege revoked later holds the feed with a log line naming the role and the fix; the fix applies it all.
    @Test func aRoleWithExactlyTheDocumentedGrantsTakesTheWholeFeed() throws {
        let fixture = try BridgeFixture()
        let documented = "doc_" + fixture.database, granted = "cmd_" + fixture.database
        try fixture.cluster.sql("CREATE ROLE \(documented) LOGIN; CREATE ROLE \(granted) LOGIN")
        try fixture.cluster.sql(try readmeSQL(section: "### The bridge's database role")[0]
            .replacingOccurrences(of: "parkwise_bridge", with: documented), database: fixture.database)
        let grant = try runBridge(["migrate", "--database", fixture.url, "--grant", granted])
        #expect(grant.code == 0, "\(grant.err)")
        #expect(grant.out.contains("GRANT USAGE ON SEQUENCE public.telemetry_events_id_seq, public.sensor_gaps_id_seq, "
                                   + "public.sensor_faults_id_seq, public.sensor_device_outages_id_seq TO \(granted)"), "\(grant.out)")
        let privileges = privilegesOf(documented, fixture)
        #expect(privileges.contains("telemetry_events_id_seq:USAGE"), "\(privileges)")
        #expect(privileges == privilegesOf(granted, fixture), "README and migrate --grant differ")

        fixture.reserve("P1-A-03")
        fixture.reserve("P1-B-01", minutesAgo: 20)   // expired: the bridge's sweep expires it
        let url = "postgresql://\(documented)@127.0.0.1:\(fixture.cluster.port)/\(fixture.database)"
        let bridge = try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nsnapshot_every: 2s\n",
                                             database: url, extra: ["--migrate"])
        var device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P1-A-01", "free", since: nil)
        device.spot("P9-Z-99", "occupied", since: nil)   // not in spots
        device.send("state/level/P2", #"{"capacity":48,"free":40,"lane_count":8,"occupied":8,"source":"lanes","spots_occupied":0,"spots_sensed":0,"spots_unknown":0}"#,
                    retain: true)
        let arrival = wireTime(-30)
        for spot in ["P1-A-02", "P1-A-03"] {   // P1-A-02 without a reservation, P1-A-03 with one
            device.event("spot.occupied", at: arrival, #""spot":"\#(spot)","level":"P1""#)
            device.event("spot.checkin", #""spot":"\#(spot)","level":"P1","arrival":"\#(arrival)""#)
        }
        device.event("sensor.fault", #""subject":"spot P1-A-04","input":"GPIO5","reason":"stuck""#)
        device.skip(2)   // seqs 6-7 lost on the way: a detected gap, then declared
        device.event("lane.passage", #""lane":"P1-ramp","from":"outside","to":"P1""#)
        device.event("outbox.dropped", #""dropped":2,"first_seq":6,"last_seq":7"#)
        let departure = wireTime()
        device.event("spot.checkout", at: departure,
                     #""spot":"P1-A-03","level":"P1","arrival":"\#(arrival)","departure":"\#(departure)","stay_s":30"#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "8"), "\(bridge.stderr)")
        #expect(fixture.query("SELECT string_agg(spot_id || ' ' || kind, ',' ORDER BY spot_id) FROM sensor_arrivals")
                == "P1-A-02 unreserved,P1-A-03 checked_in")
        #expect(fixture.query("SELECT string_agg(name, ',' ORDER BY id) FROM telemetry_events") == "sensor_check_in,sensor_check_out")
        #expect(fixture.query("SELECT status FROM reservations WHERE spot_id = 'P1-A-03'") == "released")
        #expect(fixture.query("SELECT subject || ' ' || reason FROM sensor_faults") == "spot P1-A-04 stuck")
        #expect(fixture.waitFor("SELECT string_agg(first_seq || '-' || last_seq || ' ' || declared, ',' ORDER BY id) FROM sensor_gaps",
                                "6-7 false,6-7 true"), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT bool_and(checked) FROM sensor_gaps WHERE NOT declared", "t"), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots WHERE level_code = 'P2'", "t"), "\(bridge.stderr)")
        #expect(fixture.spot("P1-A-04") == "disabled/sensor")
        #expect(fixture.waitFor("SELECT status FROM reservations WHERE spot_id = 'P1-B-01'", "expired"), "\(bridge.stderr)")
        #expect(fixture.spot("P1-B-01") == "free/-")
        #expect(fixture.query("SELECT spot_id FROM sensor_unknown_spots") == "P9-Z-99")
        #expect(fixture.query("SELECT level_code || ' ' || occupied FROM sensor_levels") == "P2 8")
        #expect(!bridge.stderr.contains("database unavailable") && !bridge.stderr.contains("skipped"), "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("bridge schema migrated"), "at the current version --migrate changes nothing")

        // A sweep's step refused (the snapshot reads back what it inserts): said with the same fix, the feed goes on.
        try fixture.cluster.sql("REVOKE SELECT ON occupancy_snapshots FROM \(documented)", database: fixture.database)
        #expect(eventually(15) { bridge.stderr.contains("a step of the sweep failed") }, "\(bridge.stderr)")
        let sweep = bridge.stderr.split(separator: "\n").first { $0.contains("a step of the sweep failed") } ?? ""
        #expect(sweep.contains("statement=snapshot") && sweep.contains("SQLSTATE 42501")
                && sweep.contains("hint=\"role \(documented) lacks a privilege the bridge needs"), "\(sweep)")
        // The sequence's privilege revoked: held and retried, the log names the role and the fix; the fix loses nothing.
        try fixture.cluster.sql("REVOKE USAGE ON SEQUENCE sensor_faults_id_seq FROM \(documented)", database: fixture.database)
        device.event("sensor.fault", #""subject":"spot P1-A-05","input":"GPIO6","reason":"chatter""#)
        func held() -> Substring? {
            bridge.stderr.split(separator: "\n").first { $0.contains("holding received messages") && $0.contains("SQLSTATE 42501") }
        }
        #expect(eventually(15) { held() != nil }, "\(bridge.stderr)")
        let line = held() ?? ""
        #expect(line.contains("database unavailable, holding received messages")
                && line.contains("fix=\"role \(documented) lacks a privilege the bridge needs")
                && line.contains("parkwise-bridge migrate --grant \(documented)"), "\(line)")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "8")
        let fix = try runBridge(["migrate", "--database", fixture.url, "--grant", documented])
        #expect(fix.code == 0, "\(fix.err)")
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_faults", "2", seconds: 40), "\(bridge.stderr)")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == "9")
        #expect(eventually(5) { bridge.stderr.contains("database available again") }, "\(bridge.stderr)")
        #expect(eventually(5) { bridge.stderr.contains("the sweep's step works again statement=snapshot") }, "\(bridge.stderr)")
        #expect(!bridge.stderr.contains("skipped"), "\(bridge.stderr)")
        // A device's outage is the bridge's own record (its id from a sequence too).
        device.offline()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages WHERE ended IS NULL", "1"), "\(bridge.stderr)")
        device.online()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages WHERE ended IS NOT NULL", "1"), "\(bridge.stderr)")
    }

    /// After an upgrade the database is a schema version behind the new binary: `run --migrate` migrates it when its role
    /// owns the tables and runs; the bridge's own role may not, so it exits 78 naming the fix, changing nothing.
    /// As on a real backend (the system test's Debian PostgreSQL): the tables' owner is no superuser. `migrate --grant`
    /// read every column of the database to find the sequences once schema 9's tables made PostgreSQL plan a hash join,
    /// and stopped at pg_toast's ("permission denied for schema pg_toast"); the owner may grant what it owns.
    @Test func theTablesOwnerWhoIsNoSuperuserMigratesAndGrants() throws {
        let cluster = sharedCluster
        let id = UUID().uuidString.prefix(8).lowercased()
        let (owner, bridgeRole, database) = ("owner_\(id)", "bridge_\(id)", "owned_\(id)")
        try cluster.sql("CREATE ROLE \(owner) LOGIN")
        try cluster.sql("CREATE ROLE \(bridgeRole) LOGIN")
        try cluster.sql("CREATE DATABASE \(database) OWNER \(owner)")
        let load = try Child("/usr/bin/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", "\(cluster.port)", "-U", owner,
                                               "-d", database, "-f", packageRoot + "/deploy/backend/parkwise-test-schema.sql"])
        #expect(load.wait(60) == 0, "\(load.stderr)")
        let migrated = try runBridge(["migrate", "--database", "postgresql://\(owner)@127.0.0.1:\(cluster.port)/\(database)",
                                      "--grant", bridgeRole])
        #expect(migrated.code == 0 && migrated.out.contains("GRANT USAGE ON SEQUENCE public.telemetry_events_id_seq"),
                "\(migrated.out) \(migrated.err)")
    }

    @Test func runMigrateBringsADatabaseLeftBehindUpToThisBridge() throws {
        let fixture = try BridgeFixture()
        try fixture.backToSchemaVersion2()
        let role = "own_" + fixture.database
        try fixture.cluster.sql("CREATE ROLE \(role) LOGIN")
        // The grants the release that left the database at version 2 gave: the README's, without version 4's and 9's tables.
        let v4 = ["sensor_arrivals", "sensor_device_outages_id_seq", "sensor_device_outages", "sensor_no_shows",
                  "sensor_spot_owners", "sensor_refused_spots", "sensor_bridges"]
        let grants = try readmeSQL(section: "### The bridge's database role")[0].replacingOccurrences(of: "parkwise_bridge", with: role)
        try fixture.cluster.sql(v4.reduce(grants) { $0.replacingOccurrences(of: ", " + $1, with: "").replacingOccurrences(of: ",\n" + $1, with: "") },
                                database: fixture.database)
        let ownURL = "postgresql://\(role)@127.0.0.1:\(fixture.cluster.port)/\(fixture.database)"
        let plain = try runBridge(["run", "--broker", fixture.broker.url, "--database", fixture.url])
        #expect(plain.code == 78 && plain.err.contains("or start it with run --migrate"), "\(plain.err)")

        // A role granted nothing cannot even read the schema's version: exit 1 (systemd tries again), with the fix.
        let nothing = "none_" + fixture.database
        try fixture.cluster.sql("CREATE ROLE \(nothing) LOGIN")
        let bare = try runBridge(["run", "--migrate", "--broker", fixture.broker.url, "--database",
                                  "postgresql://\(nothing)@127.0.0.1:\(fixture.cluster.port)/\(fixture.database)"])
        #expect(bare.code == 1 && bare.err.contains("SQLSTATE 42501")
                && bare.err.contains("hint: role \(nothing) lacks a privilege the bridge needs"), "\(bare.err)")

        let refused = try runBridge(["run", "--migrate", "--broker", fixture.broker.url, "--database", ownURL])
        #expect(refused.code == 78, "\(refused.err)")
        #expect(refused.err.contains("role \(role) may not migrate the database to bridge schema version 9"), "\(refused.err)")
        #expect(refused.err.contains("hint: as the owner of the backend's tables run: parkwise-bridge migrate --grant \(role)"),
                "\(refused.err)")
        #expect(fixture.query("SELECT max(version) FROM sensor_schema_migrations") == "2")

        let bridge = try fixture.startBridge(extra: ["--migrate"])   // the tables' owner
        #expect(bridge.stderr.contains("bridge schema migrated") && bridge.stderr.contains("from=2 to=9 steps=3,4,5,6,7,8,9"), "\(bridge.stderr)")
        #expect(fixture.query("SELECT max(version) FROM sensor_schema_migrations") == "9")
        let device = FakeDevice(fixture.broker)
        device.online(storageFault: "disk full")   // version 3's column
        #expect(fixture.waitFor("SELECT storage_fault FROM sensor_devices", "disk full"), "\(bridge.stderr)")
        // The grant of a role not created yet says how to create it.
        let missing = try runBridge(["migrate", "--database", fixture.url, "--grant", "no_such_role"])
        #expect(missing.code == 1 && missing.err.contains("hint: create the role first: CREATE ROLE no_such_role LOGIN"),
                "\(missing.err)")
    }

    /// The README's rollback, verbatim, on a database the bridge wrote (sensed, reserved and disabled spots): no spot
    /// is left 'sensor', reserved ones keep their user, and the backend's own CHECK on spots.source is back.
    @Test func theDocumentedRollbackRestoresTheBackendsSchema() throws {
        let fixture = try BridgeFixture(migrate: false)
        let check = "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'spots'::regclass AND conname = 'spots_source_check'"
        let original = fixture.query(check)
        #expect(original.contains("'sim'::text, 'user'::text]"), "\(original)")
        let migrated = try runBridge(["migrate", "--database", fixture.url])
        #expect(migrated.code == 0, "\(migrated.err)")
        fixture.reserve("P2-A-05")
        fixture.query("""
            UPDATE spots SET status = 'occupied', source = 'sensor' WHERE id IN ('P1-A-01', 'P1-A-02');
            UPDATE spots SET status = 'disabled', source = 'sensor' WHERE id = 'P1-A-03';
            UPDATE spots SET status = 'free', source = 'sensor' WHERE id = 'P1-A-04';
            UPDATE spots SET source = 'sensor' WHERE id = 'P2-A-05';
            UPDATE spots SET status = 'occupied', source = 'sim' WHERE id = 'P3-A-01';
            """)
        let held = fixture.query("SELECT held_by FROM spots WHERE id = 'P2-A-05'")
        let blocks = try readmeSQL(section: "## Roll back to the simulator")
        #expect(blocks.count == 2)
        try fixture.cluster.sql(blocks[0], database: fixture.database)
        #expect(fixture.query("SELECT count(*) FROM spots WHERE source = 'sensor'") == "0")
        #expect(fixture.query("SELECT count(*) FROM spots WHERE id IN ('P1-A-01', 'P1-A-02', 'P1-A-03', 'P1-A-04') AND status = 'free' AND source IS NULL AND held_by IS NULL") == "4")
        #expect(fixture.query("SELECT status || '/' || source || '/' || held_by FROM spots WHERE id = 'P2-A-05'") == "reserved/user/\(held)")
        #expect(fixture.spot("P3-A-01") == "occupied/sim")

        try fixture.cluster.sql(blocks[1], database: fixture.database)
        #expect(fixture.query(check) == original)
        #expect(fixture.query("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sensor\\_%'") == "0")
        #expect(throws: (any Error).self) {
            try fixture.cluster.sql("UPDATE spots SET source = 'sensor' WHERE id = 'P1-A-01'", database: fixture.database)
        }
        // Back where the backend started: a later migrate goes through from the start.
        let again = try runBridge(["migrate", "--database", fixture.url])
        #expect(again.code == 0 && again.out.contains("applied 1: sensor source and bridge tables"), "\(again.out) \(again.err)")
    }
}

/// The ```sql blocks of a README section (from its heading to the next heading of the same or a higher level), as
/// written: a test runs what a reader would paste.
func readmeSQL(section heading: String) throws -> [String] {
    let text = try String(contentsOfFile: packageRoot + "/deploy/backend/README.md", encoding: .utf8)
    guard let start = text.range(of: "\n" + heading + "\n") else { throw HarnessError("README has no \(heading)") }
    let level = heading.prefix { $0 == "#" }
    var blocks: [String] = [], block: [Substring]? = nil
    for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
        let trimmed = line.drop { $0 == " " }
        if block == nil, line.hasPrefix("#"), line.prefix(while: { $0 == "#" }).count <= level.count { break }
        if trimmed.hasPrefix("```sql") {
            block = []
        } else if trimmed.hasPrefix("```"), let done = block {
            blocks.append(done.joined(separator: "\n"))
            block = nil
        } else if block != nil {
            block!.append(trimmed)
        }
    }
    return blocks
}

/// `table:PRIVILEGE` for each privilege `role` holds on a table or sequence, sorted.
private func privilegesOf(_ role: String, _ fixture: BridgeFixture) -> String {
    fixture.query("""
        SELECT string_agg(c.relname || ':' || a.privilege_type, ',' ORDER BY c.relname, a.privilege_type)
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a WHERE a.grantee = '\(role)'::regrole
        """)
}
