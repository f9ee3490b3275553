import Foundation
import Testing
import TestSupport

/// ParkWise's backend on sensors (issue 21): the app's own writes — create, check-in, release, expiry, as the backend's
/// API makes them (the test schema's `api_*` functions) — against the real agent, broker, bridge and PostgreSQL. The
/// rule under test: the sensor is the truth about the car, the reservation the truth about who holds the spot.
@Suite(.serialized) struct BackendFitTests {
    /// "I parked" pressed at the ramp, before the sensor saw the car: the spot is never listed free and keeps its
    /// holder; when the car comes, its arrival joins that reservation (the app's check-in time kept); it leaves: released.
    @Test func anAppCheckInBeforeTheCarIsNeverUndoneAndTheCarJoinsIt() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        let user = fixture.appUser()
        let reservation = try #require(fixture.api("api_reserve('\(user)', 'P2-A-01')"))
        #expect(fixture.api("api_check_in('\(reservation)')") != nil)
        let checkedIn = epochMs(fixture, "SELECT checked_in_at FROM reservations")
        #expect(fixture.spot("P2-A-01") == "occupied/user")

        // The agent starts with the spot free (its retained state), the car arrives 3 s later and leaves at 9 s.
        let trace = fixture.dir.appendingPathComponent("trace.jsonl").path
        try """
        {"parkwise_trace": 1}
        {"t_ms": 3000, "input": "GPIO22", "value": 1}
        {"t_ms": 9000, "input": "GPIO22", "value": 0}
        """.write(toFile: trace, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", try writeAgentGarage(fixture.dir), "--replay", trace,
                                            "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        var seen: [String] = []
        let spotRow = "SELECT status || '/' || coalesce(held_by::text, '-') FROM spots WHERE id = 'P2-A-01'"
        #expect(eventually(30) {
            seen.append(fixture.query(spotRow))
            return fixture.query("SELECT count(*) FROM sensor_arrivals") == "1"
        }, "\(agent.stderr)\n\(fixture.bridge?.stderr ?? "")")
        #expect(!seen.contains { $0.hasPrefix("free") }, "listed free while the app's check-in held it: \(Set(seen))")
        #expect(seen.allSatisfy { $0.hasSuffix("/" + user) }, "holder lost: \(Set(seen))")
        #expect(seen.contains("reserved/\(user)"), "before the car: held for its user, \(Set(seen))")
        // The sensed arrival is that reservation's: recorded in the bridge's own table, the app's check-in time kept.
        #expect(fixture.query("SELECT kind || ' ' || reservation_id FROM sensor_arrivals") == "app_checked_in \(reservation)")
        #expect(epochMs(fixture, "SELECT checked_in_at FROM reservations") == checkedIn)
        #expect(fixture.query("SELECT status FROM reservations") == "fulfilled")
        #expect(fixture.query(spotRow) == "occupied/\(user)")
        #expect(fixture.query("SELECT count(*) FROM telemetry_events") == "0", "no sensed check-in of its own")

        // The car leaves: released at its departure, the spot free and no longer held; the next student may reserve it.
        #expect(fixture.waitFor("SELECT status FROM reservations", "released", seconds: 20), "\(fixture.bridge?.stderr ?? "")")
        #expect(epochMs(fixture, "SELECT released_at FROM reservations")
                == epochMs(fixture, "SELECT (payload->>'departure')::timestamptz FROM sensor_events WHERE type = 'spot.checkout'"))
        #expect(fixture.waitFor(spotRow, "free/-"))
        #expect(fixture.api("api_reserve('\(fixture.appUser())', 'P2-A-01')") != nil, "the next reservation is refused")
    }

    /// A reservation checked in from the app whose car never comes is released by the no-show rule, the way the
    /// user's release would; one whose car is there is not.
    @Test func anAppCheckInWhoseCarNeverComesIsReleasedAsANoShow() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nno_show_after: 2s\n")
        let gone = fixture.appUser(), parked = fixture.appUser()
        let came = try #require(fixture.api("api_reserve('\(parked)', 'P2-A-02')"))
        // P2-A-02's car arrives at 0.1 s and stays (its checkin_after, 2 minutes, does not pass in this test).
        let trace = fixture.dir.appendingPathComponent("trace.jsonl").path
        try """
        {"parkwise_trace": 1}
        {"t_ms": 100, "input": "GPIO23", "value": 1}
        """.write(toFile: trace, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", try writeAgentGarage(fixture.dir), "--replay", trace,
                                            "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        #expect(fixture.waitFor("SELECT string_agg(id || '=' || status, ',' ORDER BY id) FROM spots WHERE source = 'sensor'",
                                "P2-A-01=free,P2-A-02=occupied"), "\(agent.stderr)")
        #expect(fixture.api("api_check_in('\(came)')") != nil)
        let noShow = try #require(fixture.api("api_reserve('\(gone)', 'P2-A-01')"))
        #expect(fixture.api("api_check_in('\(noShow)')") != nil)

        #expect(fixture.waitFor("SELECT status FROM reservations WHERE id = '\(noShow)'", "released", seconds: 20), "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT status || '/' || source || '/' || coalesce(held_by::text, '-') FROM spots WHERE id = 'P2-A-01'",
                                "free/sensor/-"))
        #expect(fixture.query("SELECT reservation_id || ' ' || user_id FROM sensor_no_shows") == "\(noShow) \(gone)")
        #expect(fixture.query("SELECT name || ' ' || user_id || ' ' || (properties->>'spot_id') FROM telemetry_events")
                == "sensor_no_show \(gone) P2-A-01")
        #expect(eventually(5) { bridge.stderr.contains("no car came, reservations released (no-show) count=1 spots=P2-A-01") },
                "\(bridge.stderr)")
        #expect(fixture.query("SELECT status FROM reservations WHERE id = '\(came)'") == "fulfilled")
        #expect(fixture.query("SELECT status || '/' || held_by FROM spots WHERE id = 'P2-A-02'") == "occupied/\(parked)")
    }

    /// With OCCUPANCY_SOURCE=none nothing runs the backend's expiry between API calls: the bridge does, at every sweep,
    /// with the backend's exact writes, on a sensed spot and on one without a sensor.
    @Test func aHoldThatRunsOutEndsWithinSecondsWithNoAPICall() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(config: "accept_simulated: true\n")   // the default sweep: every 5 s
        let trace = fixture.dir.appendingPathComponent("trace.jsonl").path
        try #"{"parkwise_trace": 1}"#.write(toFile: trace, atomically: true, encoding: .utf8)   // nothing moves
        let agent = try Child(agentBinary, ["run", "--config", try writeAgentGarage(fixture.dir), "--replay", trace,
                                            "--broker", fixture.broker.url, "--outbox", fixture.dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE source = 'sensor' AND status = 'free'", "2"), "\(agent.stderr)")
        let sensed = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P2-A-01', interval '3 seconds')"))
        let unsensed = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-01', interval '3 seconds')"))
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P2-A-01'", "reserved"))
        #expect(fixture.waitFor("SELECT string_agg(status, ',') FROM reservations", "expired,expired", seconds: 15), "\(bridge.stderr)")
        let delay = fixture.query("SELECT round(extract(epoch FROM now() - max(expires_at))::numeric, 1) FROM reservations")
        print("hold expiry: observed \(delay) s after expires_at (sweep every 5 s)")
        #expect(fixture.waitFor("SELECT status || '/' || source || '/' || coalesce(held_by::text, '-') FROM spots WHERE id = 'P2-A-01'",
                                "free/sensor/-"))
        // The spot without a sensor: exactly the backend's expiry (free, no holder, no source, updated_at written).
        #expect(fixture.query("""
            SELECT s.status || '/' || coalesce(s.source, '-') || '/' || coalesce(s.held_by::text, '-') || '/' || (s.updated_at >= r.expires_at)
            FROM spots s, reservations r WHERE s.id = 'P1-A-01' AND r.id = '\(unsensed)'
            """) == "free/-/-/true")
        #expect(eventually(5) { bridge.stderr.contains("holds ran out, reservations expired") }, "\(bridge.stderr)")
        #expect(fixture.query("SELECT count(*) FROM reservations WHERE id = '\(sensed)' AND status = 'expired'") == "1")
    }

    /// The sensed check-in's window is the backend's: an arrival at `expires_at` is late (the app's check-in refuses
    /// `expires_at <= now()`), one a millisecond before is in time; a car that arrived in time is not expired while its
    /// check-in is still to come (`checkin_after`).
    @Test func theSensedCheckInWindowIsTheBackends() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        var device = FakeDevice(fixture.broker)
        device.online()
        fixture.reserve("P1-A-01")
        fixture.reserve("P1-A-02")
        fixture.reserve("P1-A-03")
        fixture.query("UPDATE reservations SET expires_at = now() + interval '3 seconds' WHERE spot_id = 'P1-A-03'")
        fixture.query("UPDATE reservations SET expires_at = date_trunc('milliseconds', expires_at)")   // as the wire's times
        let expiry = { (spot: String) in fixture.query("""
            SELECT to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM reservations WHERE spot_id = '\(spot)'
            """) }
        let late = expiry("P1-A-01")
        let ownTime = expiry("P1-A-03")   // (its car's wait for the check-in moves expires_at on)
        let onTime = fixture.query("""
            SELECT to_char((expires_at - interval '1 millisecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
            FROM reservations WHERE spot_id = 'P1-A-02'
            """)
        for (spot, arrival) in [("P1-A-01", late), ("P1-A-02", onTime)] {
            device.event("spot.occupied", at: arrival, #""spot":"\#(spot)","level":"P1""#)
            device.event("spot.checkin", at: arrival, #""spot":"\#(spot)","level":"P1","arrival":"\#(arrival)""#)
        }
        // P1-A-03's car arrived in time; its hold runs out before checkin_after has passed.
        let arrived = wireTime(-1)
        device.event("spot.occupied", at: arrived, #""spot":"P1-A-03","level":"P1""#)
        #expect(fixture.waitFor("SELECT string_agg(spot_id || ' ' || kind, ',' ORDER BY spot_id) FROM sensor_arrivals",
                                "P1-A-01 unreserved,P1-A-02 checked_in"), "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.query("SELECT string_agg(spot_id || ' ' || status, ',' ORDER BY spot_id) FROM reservations")
                == "P1-A-01 active,P1-A-02 fulfilled,P1-A-03 active")
        #expect(fixture.waitFor("SELECT now() > '\(ownTime)'::timestamptz + interval '1 second'", "t"))
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE id = 'P1-A-03' AND status = 'occupied'", "1"))
        #expect(fixture.query("SELECT status FROM reservations WHERE spot_id = 'P1-A-03'") == "active", "expired under its car")
        device.event("spot.checkin", #""spot":"P1-A-03","level":"P1","arrival":"\#(arrived)""#)
        #expect(fixture.waitFor("SELECT status FROM reservations WHERE spot_id = 'P1-A-03'", "fulfilled"))
        #expect(epochMs(fixture, "SELECT checked_in_at FROM reservations WHERE spot_id = 'P1-A-03'")
                == epochMs(fixture, "'\(arrived)'::timestamptz"))
    }

    /// Only what the product's analytics should count goes into telemetry_events, named and shaped as the backend's
    /// POST /telemetry accepts; the device's chatter (faults, gaps, drift, outbox, unreserved arrivals) stays in the
    /// bridge's own tables. A morning of the simulated campus (the real agent) and every device event type.
    @Test func onlyProductEventsReachTelemetryAndTheBackendWouldAcceptThem() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        for spot in ["P1-A-05", "P2-B-10"] { fixture.api("api_reserve('\(fixture.appUser())', '\(spot)')") }
        let agent = try Child(agentBinary, ["run", "--config", packageRoot + "/hardware/examples/campus.yaml", "--simulate",
                                            "--speed", "300", "--sim-start", "07:30", "--broker", fixture.broker.url,
                                            "--outbox", fixture.dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(15) }
        var device = FakeDevice(fixture.broker)
        device.online()
        fixture.reserve("P1-C-20")
        let arrival = wireTime(-30), departure = wireTime(-1)
        device.event("spot.occupied", at: arrival, #""spot":"P1-C-20","level":"P1""#)
        device.event("spot.checkin", #""spot":"P1-C-20","level":"P1","arrival":"\#(arrival)""#)
        device.event("spot.checkout", at: departure,
                     #""spot":"P1-C-20","level":"P1","arrival":"\#(arrival)","departure":"\#(departure)","stay_s":29"#)
        device.event("sensor.fault", #""subject":"spot P1-C-19","input":"GPIO5","reason":"stuck""#)
        device.event("sensor.recovered", #""subject":"spot P1-C-19","input":"GPIO5""#)
        device.event("level.drift", #""level":"P1","counted":61,"clamped_to":60"#)
        device.event("outbox.fault", #""reason":"disk full""#)
        device.event("outbox.recovered")
        device.event("input.shed", #""dropped":3,"reason":"burst""#)
        device.event("outbox.dropped", #""dropped":1,"first_seq":20,"last_seq":20"#)
        // The campus fills: many ordinary, unreserved arrivals.
        #expect(fixture.waitFor("SELECT count(*) >= 20 FROM sensor_arrivals WHERE kind = 'unreserved'", "t", seconds: 60),
                "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events WHERE device = 'p1-north'", "10"))
        #expect(fixture.query("SELECT count(*) FROM sensor_faults WHERE device = 'p1-north' AND recovered_at IS NOT NULL") == "1")

        let rows = fixture.query("SELECT name || E'\\t' || properties::text FROM telemetry_events ORDER BY id")
            .split(separator: "\n").map(String.init)
        #expect(!rows.isEmpty)
        for row in rows {
            let parts = row.split(separator: "\t", maxSplits: 1).map(String.init)
            #expect(["sensor_check_in", "sensor_check_out", "sensor_no_show"].contains(parts[0]), "\(row)")
            #expect(backendAcceptsTelemetry(name: parts[0], properties: parts[1]), "the backend's POST /telemetry would refuse \(row)")
        }
        #expect(fixture.query("SELECT count(*) FROM telemetry_events WHERE name = 'sensor_check_in' AND user_id IS NOT NULL")
                == fixture.query("SELECT count(*) FROM reservations WHERE checked_in_at IS NOT NULL"))
    }

    /// A bridge started before any spot is sensed writes the slot it starts in once data exists (the old one marked
    /// the slot done after writing nothing); the slot is the database's.
    @Test func theSlotTheBridgeStartsInIsWrittenOnceDataExists() throws {
        let fixture = try BridgeFixture()
        let commits = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        let before = Int(fixture.query(commits)) ?? 0
        try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nsnapshot_every: 1h\n")
        // Several sweeps with nothing sensed (each is a handful of statements, each its own transaction).
        #expect(eventually(20) { (Int(fixture.query(commits)) ?? 0) > before + 40 })
        #expect(fixture.query("SELECT count(*) FROM occupancy_snapshots") == "0")
        let device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P3-A-01", "occupied", since: wireTime(-60))
        device.spot("P3-A-02", "free", since: wireTime(-60))
        let slot = "to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600)"
        #expect(fixture.waitFor("SELECT total || ' ' || free || ' ' || occupied || ' ' || source FROM occupancy_snapshots "
                                + "WHERE level_code = 'P3' AND taken_at = \(slot)", "48 47 1 sensor"), "\(fixture.bridge?.stderr ?? "")")
        #expect(fixture.query("SELECT count(*) FROM occupancy_snapshots") == "1", "levels without data get no row")
    }

    /// A device offline past `stale_after`: its spots `disabled` (never free), no all-zero snapshot rows while it lasts,
    /// the outage in sensor_device_outages, and the README's unmet-demand query leaves its slots out.
    @Test func aDeviceOfflinePastStaleAfterWritesNoEmptySnapshotAndItsOutageIsRecorded() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nstale_after: 1s\nsnapshot_every: 1s\n")
        let device = FakeDevice(fixture.broker, device: "p2-all")
        device.online()
        let p2 = (1...24).flatMap { n in ["A", "B"].map { "P2-\($0)-" + String(format: "%02d", n) } }
        for (i, spot) in p2.enumerated() { device.spot(spot, i < 10 ? "occupied" : "free", since: wireTime(-600)) }
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots WHERE level_code = 'P2' AND total = 48 AND free = 38", "t"),
                "\(fixture.bridge?.stderr ?? "")")

        device.offline()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages WHERE stale_at IS NOT NULL AND ended IS NULL", "1"))
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE level_code = 'P2' AND status = 'disabled' AND source = 'sensor'", "48"))
        // What GET /levels then answers (README, "What the apps see"): P2 total 0, free 0; the other levels as they are.
        #expect(fixture.query("SELECT code || ' ' || total || ' ' || free FROM api_levels() WHERE code = 'P2'") == "P2 0 0")
        #expect(fixture.query("SELECT DISTINCT campus_full FROM api_levels()") == "f")
        // Three slots pass during the outage: none is written for P2 (unknown is not a number), and no row is all zero.
        #expect(fixture.waitFor("SELECT now() > stale_at + interval '3 seconds' FROM sensor_device_outages", "t"))
        #expect(fixture.query("SELECT count(*) FROM occupancy_snapshots WHERE total = 0") == "0")
        #expect(fixture.query("""
            SELECT count(*) FROM occupancy_snapshots s, sensor_device_outages o
            WHERE s.level_code = 'P2' AND s.taken_at > o.stale_at
            """) == "0")

        // Unmet demand recorded during the outage (the campus read "full") is left out by the README's query.
        fixture.query("""
            INSERT INTO unmet_demand (user_id, slot_start, weekday, zone)
            SELECT gen_random_uuid(), to_timestamp(floor(extract(epoch FROM stale_at) / 900) * 900), 3, 'A' FROM sensor_device_outages
            UNION ALL SELECT gen_random_uuid(), now() - interval '1 day', 2, 'B'
            """)
        let query = try #require(try readmeSQL(section: "### Unmet demand without the outages").first)
        #expect(try fixture.cluster.sql(query, database: fixture.database).split(separator: "\n").count == 1)
        #expect(try fixture.cluster.sql(query.replacingOccurrences(of: "SELECT u.*", with: "SELECT u.zone"), database: fixture.database)
                == "B")

        device.online()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages WHERE ended IS NOT NULL", "1"))
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE level_code = 'P2' AND status = 'free'", "38"))
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots s, sensor_device_outages o "
                                + "WHERE s.level_code = 'P2' AND s.taken_at > o.ended", "t"))
    }

    /// A user releases (or cancels) while the car is still on the spot (issue 36, item 2). The backend's release writes
    /// the spot `free` knowing nothing of sensors; before, the API listed it free until the bridge's next sweep (3.4 s in
    /// the issue's run) and another user reserved it. The bridge's trigger corrects the write in the same statement: no
    /// transaction ever sees the spot free — not even the releasing one — and nobody can reserve it while the car is
    /// there. A sensor that cannot see makes such a write `disabled`; a spot sensed free is released as before. The
    /// backend's own role runs the release and needs no privilege on the bridge's tables.
    @Test func aReleaseWhileTheCarIsParkedNeverListsTheSpotFree() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge(config: "accept_simulated: true\n")   // the default sweep: every 5 s
        let api = "api_" + UUID().uuidString.prefix(8).lowercased()
        _ = try fixture.cluster.sql("""
            CREATE ROLE \(api); GRANT SELECT, UPDATE, INSERT ON spots, reservations TO \(api);
            CREATE FUNCTION release_and_look(p uuid) RETURNS text LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM api_release(p);
              RETURN (SELECT s.status || '/' || coalesce(s.source, '-') || '/' || coalesce(s.held_by::text, '-')
                      FROM spots s JOIN reservations r ON r.spot_id = s.id WHERE r.id = p);
            END $$
            """, database: fixture.database)
        /// The backend's release as its own role, and what that same transaction then sees of the spot.
        func release(_ reservation: String) throws -> String {
            try fixture.cluster.sql("SET ROLE \(api); SELECT release_and_look('\(reservation)')", database: fixture.database)
        }
        let parked = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-01')"))
        #expect(fixture.api("api_check_in('\(parked)')") != nil)
        let blind = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-02')"))
        let empty = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-03')"))
        var device = FakeDevice(fixture.broker)
        device.online()
        device.occupy(["P1-A-01"])
        device.spot("P1-A-02", "unknown", since: nil)
        device.event("spot.vacated", #""spot":"P1-A-03","level":"P1""#)
        let spots = "SELECT string_agg(id || ' ' || status || '/' || source, ', ' ORDER BY id) FROM spots WHERE id IN ('P1-A-01', 'P1-A-02', 'P1-A-03')"
        #expect(fixture.waitFor(spots, "P1-A-01 occupied/sensor, P1-A-02 reserved/sensor, P1-A-03 reserved/sensor"),
                "\(fixture.bridge?.stderr ?? "")")

        #expect(try release(parked) == "occupied/sensor/-", "the car is there: never free, held by nobody")
        #expect(try release(blind) == "disabled/sensor/-", "the sensor cannot see: never free")
        #expect(try release(empty) == "free/-/-", "sensed free: the backend's release as it writes it")
        #expect(fixture.query("SELECT string_agg(status, ',' ORDER BY spot_id) FROM reservations") == "released,cancelled,cancelled")
        #expect(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-01')") == nil, "a second user held a spot with a car on it")
        #expect(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-02')") == nil)
        #expect(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-03')") != nil)

        // The car leaves: the bridge's own write frees the spot (the trigger looks only at writes from outside the sensors).
        device.event("spot.vacated", #""spot":"P1-A-01","level":"P1""#)
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-01'", "free/sensor"))
        #expect(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-01')") != nil)
    }

    /// A checked-in car leaves while its board is down (issue 36, item 1): after the restart the board reports the spot
    /// free with no `since`. Before, the bridge released only on a timed departure: the reservation stayed `fulfilled`
    /// for ever, its spot `reserved` to everyone else and "find my car" showing the car. Now the departure the board
    /// did not see ends it, released when the evidence first shows the car gone (the board back), both bounds recorded
    /// on the arrival. An app check-in whose car the sensor never saw is not ended so (that is the no-show rule's).
    @Test func aDepartureTheBoardMissedStillEndsTheReservation() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        let parked = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-01')"))
        let pressed = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-02')"))
        #expect(fixture.api("api_check_in('\(pressed)')") != nil, "\"I parked\" before the car came")
        var device = FakeDevice(fixture.broker)
        device.online()
        device.spot("P1-A-02", "free", since: nil)   // as a board starts: free, since unknown
        device.event("spot.checkin", #""spot":"P1-A-01","level":"P1","arrival":"\#(wireTime())""#)
        #expect(fixture.waitFor("SELECT kind || ' ' || reservation_id FROM sensor_arrivals", "checked_in \(parked)"), "\(bridge.stderr)")
        #expect(fixture.query("SELECT status FROM reservations WHERE id = '\(parked)'") == "fulfilled")

        // The board stops; the car leaves while it is down; the board starts again and sees the spot free, since unknown.
        device.offline()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages", "1"))
        var restarted = FakeDevice(fixture.broker)
        restarted.boot = 2
        restarted.skip(device.seq)   // seqs go on across boots
        restarted.online()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages WHERE ended IS NOT NULL", "1"))
        restarted.spot("P1-A-01", "free", since: nil)
        restarted.spot("P1-A-02", "free", since: nil)
        #expect(fixture.waitFor("SELECT status FROM reservations WHERE id = '\(parked)'", "released", seconds: 10), "\(bridge.stderr)")
        #expect(fixture.query("""
            SELECT a.departure_after = o.began AND a.departure_by = o.ended AND r.released_at = o.ended
            FROM sensor_arrivals a, sensor_device_outages o, reservations r WHERE r.id = '\(parked)'
            """) == "t", "released between the board's last word and its return, at the return")
        #expect(fixture.waitFor("SELECT status || '/' || coalesce(held_by::text, '-') FROM spots WHERE id = 'P1-A-01'", "free/-"))
        #expect(fixture.query("SELECT properties->>'departure_estimated' FROM telemetry_events WHERE name = 'sensor_check_out'") == "true")
        #expect(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-01')") != nil, "the spot is offered again")
        // The app's check-in with no sensed arrival: still the user's (the no-show rule decides, not this one).
        #expect(fixture.query("SELECT status FROM reservations WHERE id = '\(pressed)'") == "fulfilled")
    }

    /// A car that parks inside its hold, then waits for `checkin_after` (issue 36, item 3): at the hold's end the app's
    /// own `GET /reservations/me` runs the backend's expiry. Before, the hold expired there, the arrival was recorded
    /// as unreserved and "find my car" was empty. Now the hold is kept alive in the backend's own terms (its
    /// `expires_at` moved on) from the batch that applies the arrival, and the check-in fulfils it at the arrival. A car
    /// that leaves before its check-in (a passer-by) stops the renewal and fulfils nothing.
    @Test func aHoldWhoseCarCameInTimeOutlivesTheAppsOwnExpiry() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge()
        let holder = fixture.appUser()
        let hold = try #require(fixture.api("api_reserve('\(holder)', 'P1-A-01', interval '3 seconds')"))
        let passed = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P1-A-02', interval '3 seconds')"))
        var device = FakeDevice(fixture.broker)
        device.online()
        let arrival = wireTime()
        device.event("spot.occupied", at: arrival, #""spot":"P1-A-01","level":"P1""#)
        device.event("spot.occupied", #""spot":"P1-A-02","level":"P1""#)
        #expect(fixture.waitFor("SELECT count(*) FROM spots WHERE id IN ('P1-A-01', 'P1-A-02') AND status = 'occupied'", "2"),
                "\(bridge.stderr)")
        device.event("spot.vacated", #""spot":"P1-A-02","level":"P1""#)   // the passer-by goes
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id = 'P1-A-02'", "reserved"))
        let passedUntil = fixture.query("SELECT expires_at FROM reservations WHERE id = '\(passed)'")

        // The holds' own time passes; the holder's app asks for its reservation (the backend's expiry runs first).
        #expect(fixture.waitFor("SELECT now() > created_at + interval '4 seconds' FROM reservations WHERE id = '\(hold)'", "t", seconds: 10))
        #expect(fixture.api("api_expire()") != nil)
        #expect(fixture.query("SELECT status || ' ' || (expires_at > now()) FROM reservations WHERE id = '\(hold)'") == "active true",
                "the car is there, its check-in waits: the hold must not expire")
        #expect(fixture.query("SELECT expires_at FROM reservations WHERE id = '\(passed)'") == passedUntil,
                "the passer-by's spot: not renewed once the car left")

        // checkin_after later: the check-in fulfils the hold at the arrival.
        device.event("spot.checkin", #""spot":"P1-A-01","level":"P1","arrival":"\#(arrival)""#)
        #expect(fixture.waitFor("SELECT status FROM reservations WHERE id = '\(hold)'", "fulfilled"), "\(bridge.stderr)")
        #expect(fixture.query("SELECT kind || ' ' || reservation_id FROM sensor_arrivals WHERE spot_id = 'P1-A-01'") == "checked_in \(hold)")
        #expect(epochMs(fixture, "SELECT checked_in_at FROM reservations WHERE id = '\(hold)'")
                == epochMs(fixture, "'\(arrival)'::timestamptz"))
        #expect(fixture.query("SELECT status || '/' || held_by FROM spots WHERE id = 'P1-A-01'") == "occupied/\(holder)")
        #expect(fixture.query("SELECT status || ' ' || (expires_at < created_at + interval '\(3 + 60 + 5) seconds') FROM reservations WHERE id = '\(passed)'")
                == "active true", "the passer-by's hold runs out at most a minute after its own time")
    }

    /// A level's snapshot only while every sensed spot of it is known (issue 36, item 4): during an outage P2's only
    /// spot left in the counts was a held one, and its rows read total 1, reserved 1 — 100 % full to the forecasts of
    /// that slot for four weeks. No row is written while a spot's sensor cannot see (its device stale, or the sensor
    /// faulted), whatever the spot's row says; rows resume when it sees again, or once an administrator disables the
    /// spot (out of the total, as in the simulator's rows).
    @Test func aLevelWithASpotNoSensorCanSeeWritesNoSnapshot() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nstale_after: 1s\nsnapshot_every: 1s\n")
        _ = try #require(fixture.api("api_reserve('\(fixture.appUser())', 'P2-B-24')"))
        let device = FakeDevice(fixture.broker, device: "p2-all")
        device.online()
        let p2 = (1...24).flatMap { n in ["A", "B"].map { "P2-\($0)-" + String(format: "%02d", n) } }
        for (i, spot) in p2.enumerated() { device.spot(spot, i < 10 ? "occupied" : "free", since: wireTime(-600)) }
        let full = "SELECT count(*) > 0 FROM occupancy_snapshots WHERE level_code = 'P2' AND total = 48 AND reserved = 1 AND free = 37"
        #expect(fixture.waitFor(full, "t"), "\(fixture.bridge?.stderr ?? "")")

        // The outage: every spot but the held one leaves the counts.
        device.offline()
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_device_outages WHERE stale_at IS NOT NULL", "1"))
        #expect(fixture.waitFor("SELECT string_agg(DISTINCT status, ',') FROM spots WHERE level_code = 'P2' AND id <> 'P2-B-24'", "disabled"))
        #expect(fixture.query("SELECT status FROM spots WHERE id = 'P2-B-24'") == "reserved")
        #expect(fixture.waitFor("SELECT now() > stale_at + interval '3 seconds' FROM sensor_device_outages", "t"))
        #expect(fixture.query("""
            SELECT count(*) FROM occupancy_snapshots s, sensor_device_outages o WHERE s.level_code = 'P2' AND s.taken_at > o.stale_at
            """) == "0", "rows from the held spot alone: \(fixture.query("SELECT string_agg(total || '/' || reserved, ' ') FROM occupancy_snapshots WHERE level_code = 'P2'"))")

        // Back: rows again. Then one sensor faults: none while it cannot see.
        device.online()
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots s, sensor_device_outages o "
                                + "WHERE s.level_code = 'P2' AND s.taken_at > o.ended AND s.total = 48", "t"))
        device.spot("P2-A-05", "unknown", since: nil)
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P2-A-05'", "disabled/sensor"))
        let faulted = fixture.query("SELECT now()")
        #expect(fixture.waitFor("SELECT now() > '\(faulted)'::timestamptz + interval '3 seconds'", "t"))
        #expect(fixture.query("SELECT count(*) FROM occupancy_snapshots WHERE level_code = 'P2' AND taken_at > '\(faulted)'") == "0")

        // An administrator takes the spot out of service: rows resume without it.
        fixture.query("UPDATE spots SET status = 'disabled', source = NULL WHERE id = 'P2-A-05'")
        #expect(fixture.waitFor("SELECT count(*) > 0 FROM occupancy_snapshots WHERE level_code = 'P2' AND taken_at > '\(faulted)' AND total = 47", "t"),
                "\(fixture.bridge?.stderr ?? "")")
    }
}

/// The backend's POST /telemetry rules (parkwise-backend-facts.md): a snake_case name of at most 100 characters, at
/// most 20 properties, keys of at most 40 characters, values strings of at most 200 characters, finite numbers or
/// booleans.
func backendAcceptsTelemetry(name: String, properties: String) -> Bool {
    guard name.count <= 100, name.range(of: "^[a-z][a-z0-9]*(_[a-z0-9]+)*$", options: .regularExpression) != nil,
          let object = try? JSONSerialization.jsonObject(with: Data(properties.utf8)) as? [String: Any], object.count <= 20
    else { return false }
    return object.allSatisfy { key, value in
        guard key.count <= 40 else { return false }
        switch value {
        case let text as String: return text.count <= 200
        case let number as NSNumber: return number.doubleValue.isFinite   // numbers and booleans
        default: return false
        }
    }
}

/// The campus agent (the real one, replaying a trace) with one faulted spot on P1 (60 spots, every space sensed):
/// the level's state says 2 occupied, 57 free, 1 unknown from its spots (never a lane count), and the apps count
/// it the same way.
@Suite struct FaultedLevelTests {
    @Test func oneFaultedSpotOfSixtyLeavesTheLevelFiftySevenFreeWithOneUnknown() throws {
        let fixture = try BridgeFixture()
        try fixture.startBridge()
        let config = fixture.dir.appendingPathComponent("campus.yaml").path
        let campus = try String(contentsOfFile: packageRoot + "/hardware/examples/campus.yaml", encoding: .utf8)
        try campus.replacingOccurrences(of: #"{ id: P1-A-03, input: "1-0020:GPA2" }"#,
                                        with: #"{ id: P1-A-03, input: "1-0020:GPA2", chatter_limit: 3, recover_after: 1h }"#)
            .write(toFile: config, atomically: true, encoding: .utf8)
        let trace = fixture.dir.appendingPathComponent("trace.jsonl").path
        try """
        {"parkwise_trace": 1}
        {"t_ms": 100, "input": "1-0020:GPA0", "value": 1}
        {"t_ms": 100, "input": "1-0020:GPA1", "value": 1}
        {"t_ms": 200, "input": "1-0020:GPA2", "value": 1}
        {"t_ms": 300, "input": "1-0020:GPA2", "value": 0}
        {"t_ms": 400, "input": "1-0020:GPA2", "value": 1}
        {"t_ms": 500, "input": "1-0020:GPA2", "value": 0}
        {"t_ms": 600, "input": "1-0020:GPA2", "value": 1}
        """.write(toFile: trace, atomically: true, encoding: .utf8)
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", trace, "--broker", fixture.broker.url,
                                            "--outbox", fixture.dir.path + "/outbox"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        // A lane count left from an earlier run must not take over the level.
        try publish(fixture.broker, "parkwise/v1/uniandes/campus-main/cmd/calibrate", #"{"level": "P1", "count": 57}"#)
        #expect(fixture.waitFor("SELECT capacity || ' ' || occupied || ' ' || unknown || ' ' || source FROM sensor_levels "
                                + "WHERE level_code = 'P1'", "60 2 1 spots", seconds: 30), "\(agent.stderr)")
        #expect(fixture.waitFor("SELECT total || ' ' || free || ' ' || occupied FROM api_levels() WHERE code = 'P1'", "59 57 2"))
        #expect(fixture.spot("P1-A-03") == "disabled/sensor")
    }
}
