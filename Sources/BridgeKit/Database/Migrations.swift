import Postgres

/// The bridge's changes to the backend's database: numbered, each applied once, in order; the steps a run applies
/// share one transaction with their version rows (so a crash or an error leaves all of them or none).
/// Additive only: the backend keeps working unchanged on a migrated database.
enum Migrations {
    struct Step {
        var version: Int
        var name: String
        var statements: [String]
    }

    /// The tables of ParkWise's backend the bridge writes; a database without them is not ParkWise's.
    static let backendTables = ["levels", "spots", "reservations", "occupancy_snapshots", "telemetry_events"]

    static let steps: [Step] = [
        Step(version: 1, name: "sensor source and bridge tables", statements: [
            // 'sensor' joins the spots.source CHECK, whatever the backend named that constraint: the CHECKs on that
            // column alone (a rule of the backend's tying source to another column stays as it is).
            """
            DO $$ DECLARE c record; BEGIN
              FOR c IN SELECT con.conname FROM pg_constraint con
                       JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attname = 'source'
                       WHERE con.conrelid = 'spots'::regclass AND con.contype = 'c' AND con.conkey = ARRAY[a.attnum]
              LOOP EXECUTE format('ALTER TABLE spots DROP CONSTRAINT %I', c.conname); END LOOP;
            END $$
            """,
            "ALTER TABLE spots ADD CONSTRAINT spots_source_check CHECK (source IN ('sim', 'user', 'sensor'))",
            """
            CREATE TABLE sensor_devices (
              site text NOT NULL, device text NOT NULL,
              boot bigint NOT NULL DEFAULT 0, last_seq bigint NOT NULL DEFAULT 0,
              online boolean NOT NULL DEFAULT false, mode text,
              online_since timestamptz, offline_since timestamptz,
              stale boolean NOT NULL DEFAULT false,
              updated_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (site, device))
            """,
            """
            CREATE TABLE sensor_events (
              id uuid PRIMARY KEY, site text NOT NULL, device text NOT NULL,
              seq bigint NOT NULL, boot bigint NOT NULL, type text NOT NULL, at timestamptz NOT NULL,
              payload jsonb NOT NULL, received_at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX sensor_events_device_seq ON sensor_events (site, device, seq)",
            // No foreign key to spots: checking it would take a key-share lock on the spot row and
            // wait for an API transaction holding it, which the bridge must never do.
            """
            CREATE TABLE sensor_spots (
              spot_id text PRIMARY KEY,
              site text NOT NULL, device text NOT NULL,
              state text NOT NULL CHECK (state IN ('free', 'occupied', 'unknown')),
              since timestamptz, checked_in boolean NOT NULL DEFAULT false,
              seq bigint NOT NULL DEFAULT 0,
              ord bigint NOT NULL DEFAULT 0,
              updated_at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX sensor_spots_device ON sensor_spots (site, device)",
            """
            CREATE TABLE sensor_levels (
              site text NOT NULL, device text NOT NULL, level_code text NOT NULL,
              capacity int NOT NULL, occupied int, source text NOT NULL,
              updated_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (site, device, level_code))
            """,
            """
            CREATE TABLE sensor_gaps (
              id bigserial PRIMARY KEY, site text NOT NULL, device text NOT NULL,
              first_seq bigint NOT NULL, last_seq bigint NOT NULL,
              declared boolean NOT NULL, dropped int,
              detected_at timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE sensor_faults (
              id bigserial PRIMARY KEY, event_id uuid UNIQUE, site text NOT NULL, device text NOT NULL,
              subject text NOT NULL, input text, reason text, at timestamptz NOT NULL, recovered_at timestamptz)
            """,
            """
            CREATE TABLE sensor_unknown_spots (
              site text NOT NULL, device text NOT NULL, spot_id text NOT NULL,
              first_seen timestamptz NOT NULL DEFAULT now(), last_seen timestamptz NOT NULL DEFAULT now(),
              reports bigint NOT NULL DEFAULT 1,
              PRIMARY KEY (site, device, spot_id))
            """,
            // Each bridge's link to its broker (`connected`, `lost`, `stopped`) and since when: the fleet view says a
            // bridge lost its broker, or else a broker outage reads as every board gone quiet.
            """
            CREATE TABLE sensor_bridges (
              client_id text PRIMARY KEY, brokers text NOT NULL, broker_state text NOT NULL,
              since timestamptz NOT NULL DEFAULT now())
            """,
        ]),
        Step(version: 2, name: "detected gaps checked before a rebirth", statements: [
            // A seq jump may be an event another bridge (shared subscription) has not committed yet:
            // a detected gap is checked after a moment, and dropped when its seqs arrived meanwhile.
            "ALTER TABLE sensor_gaps ADD COLUMN checked boolean NOT NULL DEFAULT false",
        ]),
        Step(version: 3, name: "a device's storage fault", statements: [
            // What the device's status says its disk refuses (a dying SD card): NULL while nothing does.
            "ALTER TABLE sensor_devices ADD COLUMN storage_fault text",
        ]),
        Step(version: 4, name: "the bridge's own records: arrivals, device outages, no-shows", statements: [
            // Every sensed arrival (events and retained states of one arrival share the key) and what it met: the
            // reservation it fulfilled, one the app had fulfilled already, or none. Operational records live here,
            // never in the product's telemetry_events.
            """
            CREATE TABLE sensor_arrivals (
              spot_id text NOT NULL, arrival timestamptz NOT NULL,
              site text NOT NULL, device text NOT NULL,
              kind text NOT NULL CHECK (kind IN ('checked_in', 'app_checked_in', 'unreserved')),
              reservation_id uuid,
              recorded_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (spot_id, arrival))
            """,
            "CREATE INDEX sensor_arrivals_reservation ON sensor_arrivals (reservation_id) WHERE reservation_id IS NOT NULL",
            // A device's offline intervals: began at its last will, stale once past stale_after (its spots left
            // the free count), ended when it came back. One open interval per device.
            """
            CREATE TABLE sensor_device_outages (
              id bigserial PRIMARY KEY, site text NOT NULL, device text NOT NULL,
              began timestamptz NOT NULL, stale_at timestamptz, ended timestamptz)
            """,
            "CREATE UNIQUE INDEX sensor_device_outages_open ON sensor_device_outages (site, device) WHERE ended IS NULL",
            // A level state's spaces nobody knows now (a fully sensed level with faulted spots: its counts are bounds).
            "ALTER TABLE sensor_levels ADD COLUMN unknown int NOT NULL DEFAULT 0",
            // Reservations checked in from the app whose car the sensor never saw, released by the no-show rule.
            """
            CREATE TABLE sensor_no_shows (
              reservation_id uuid PRIMARY KEY, spot_id text NOT NULL, user_id uuid,
              checked_in_at timestamptz NOT NULL, released_at timestamptz NOT NULL)
            """,
        ]),
        Step(version: 5, name: "the fleet view: each device's last status and when it was last heard", statements: [
            // The last online status as the device sent it (version, outbox, clock, faulted inputs: `fleet` shows them,
            // kept while it is offline), when the bridge applied it, and when it last applied anything of the device's.
            "ALTER TABLE sensor_devices ADD COLUMN status jsonb, ADD COLUMN status_at timestamptz, ADD COLUMN heard_at timestamptz",
        ]),
        Step(version: 6, name: "a device's last offline: its boot and connection", statements: [
            // Which connection the offline applied last ended (status `connection`, agents 0.2 on): an online of that
            // connection or an earlier one, applied by another bridge of a shared group after it, is older news.
            "ALTER TABLE sensor_devices ADD COLUMN offline_boot bigint, ADD COLUMN offline_connection bigint",
        ]),
        Step(version: 7, name: "the sensor's truth holds at the backend's own writes: a spot it sees taken is never set free", statements: [
            // The backend's release, cancel and expiry set a spot `free` knowing nothing of sensors (a user releases
            // while the car is still parked): before, the spot was listed free, and could be reserved by another user,
            // until the bridge's next re-assert (up to `reassert_every`). This trigger corrects such a write in the same
            // statement, so no transaction ever sees it free: a car sensed (its device not stale) → `occupied`; a sensor
            // that cannot see (unknown, its device stale) → `disabled`; either with source 'sensor', as the re-assert
            // would write it. Only writes that set `free` from outside the sensors (source not 'sensor') are looked at:
            // the bridge's own writes skip the function (measured: +17 µs per backend free-write, +3 µs per bridge
            // write for the WHEN test, PostgreSQL 15). SECURITY DEFINER with a pinned search_path: the backend's role need
            // not read the bridge's tables, and no schema it can write to is searched.
            """
            DO $migration$ BEGIN EXECUTE format($create$
              CREATE OR REPLACE FUNCTION sensor_spot_truth() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
              SET search_path = pg_catalog, %I, pg_temp AS $body$
              DECLARE sensed record;
              BEGIN
                SELECT ss.state, coalesce(ss.since, ss.updated_at) AS at, coalesce(d.stale, false) AS stale INTO sensed
                  FROM sensor_spots ss LEFT JOIN sensor_devices d ON d.site = ss.site AND d.device = ss.device
                  WHERE ss.spot_id = NEW.id;
                IF NOT FOUND THEN RETURN NEW; END IF;
                IF sensed.state = 'occupied' AND NOT sensed.stale THEN
                  NEW.status := 'occupied'; NEW.source := 'sensor'; NEW.updated_at := sensed.at;
                ELSIF sensed.stale OR sensed.state = 'unknown' THEN
                  NEW.status := 'disabled'; NEW.source := 'sensor';
                END IF;
                RETURN NEW;
              END $body$
            $create$, current_schema()); END $migration$
            """,
            // (`OR REPLACE`, `IF EXISTS`: the README's roll back drops both and keeps the version row; deleting it and
            // migrating again brings them back.)
            "DROP TRIGGER IF EXISTS sensor_spot_truth ON spots",
            """
            CREATE TRIGGER sensor_spot_truth BEFORE UPDATE OF status ON spots FOR EACH ROW
              WHEN (NEW.status = 'free' AND NEW.source IS DISTINCT FROM 'sensor') EXECUTE FUNCTION sensor_spot_truth()
            """,
        ]),
        Step(version: 8, name: "a departure the board did not see: its bounds on the arrival", statements: [
            // A reservation released on a departure no event timed (a board restarted, or a sensor recovered, and saw
            // the spot free): between when the car was last shown there and when it was first shown gone.
            "ALTER TABLE sensor_arrivals ADD COLUMN departure_after timestamptz, ADD COLUMN departure_by timestamptz",
        ]),
        Step(version: 9, name: "who may speak for a spot: the site's register of owners and revoked devices", statements: [
            // A device's register entry as the broker host last published it (`rev`), and when it was revoked: for ever
            // (an id is never given again), so a broker restart that brings back its retained states changes nothing.
            "ALTER TABLE sensor_devices ADD COLUMN register_rev bigint, ADD COLUMN revoked_at timestamptz",
            // Which device may report each spot (`spot_owners: registered`): provision.sh and spots.sh give it.
            """
            CREATE TABLE sensor_spot_owners (
              spot_id text PRIMARY KEY, site text NOT NULL, device text NOT NULL, rev bigint NOT NULL,
              assigned_at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX sensor_spot_owners_device ON sensor_spot_owners (site, device)",
            // Reports of a spot the device does not own, refused: counted per device and spot, with the owner then.
            """
            CREATE TABLE sensor_refused_spots (
              site text NOT NULL, device text NOT NULL, spot_id text NOT NULL, owner text,
              first_seen timestamptz NOT NULL DEFAULT now(), last_seen timestamptz NOT NULL DEFAULT now(),
              reports bigint NOT NULL DEFAULT 1,
              PRIMARY KEY (site, device, spot_id))
            """,
        ]),
    ]

    static var latest: Int { steps.map(\.version).max() ?? 0 }

    /// Backend tables missing from the database (empty: it is ParkWise's).
    static func missingBackendTables(_ db: PostgresConnection) throws(PostgresError) -> [String] {
        var missing: [String] = []
        for table in backendTables {
            let rows = try db.query("SELECT to_regclass($1) IS NOT NULL AS present", [table])
            if rows.value(0, "present") != "t" { missing.append(table) }
        }
        return missing
    }

    /// The highest applied version (0: never migrated).
    static func currentVersion(_ db: PostgresConnection) throws(PostgresError) -> Int {
        let exists = try db.query("SELECT to_regclass('sensor_schema_migrations') IS NOT NULL AS present")
        guard exists.value(0, "present") == "t" else { return 0 }
        return Int(try db.query("SELECT coalesce(max(version), 0) AS v FROM sensor_schema_migrations").value(0, "v") ?? "0") ?? 0
    }

    /// How long a step waits for a table lock (an ALTER TABLE needs the table to itself) before the migration gives
    /// up: queued behind a long transaction, it would hold up every bridge's writes to that table meanwhile.
    static let lockWait = "5s"

    /// Applies what is missing; returns the steps applied (empty: already current). Concurrent
    /// runs wait for each other on an advisory lock, so each step still runs once. A table lock not
    /// granted within `lockWait` fails the whole migration (SQLSTATE 55P03), nothing kept.
    static func migrate(_ db: PostgresConnection) throws(PostgresError) -> [Step] {
        try db.transaction { db throws(PostgresError) in
            try db.query("SELECT pg_advisory_xact_lock(hashtext('parkwise-bridge migrate'))")
            try db.query("SET LOCAL lock_timeout = '\(lockWait)'")
            try db.query("""
                CREATE TABLE IF NOT EXISTS sensor_schema_migrations (
                  version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            let current = try currentVersion(db)
            var applied: [Step] = []
            for step in steps where step.version > current {
                for statement in step.statements { try db.query(statement) }
                try db.query("INSERT INTO sensor_schema_migrations (version, name) VALUES ($1, $2)",
                             [String(step.version), step.name])
                applied.append(step)
            }
            return applied
        }
    }
}
