import Foundation
import Testing
import TestSupport

/// The bridge binary `swift build` made (or PARKWISE_BRIDGE_BIN).
let bridgeBinary: String = ProcessInfo.processInfo.environment["PARKWISE_BRIDGE_BIN"]
    ?? packageRoot + "/.build/debug/parkwise-bridge"

/// One PostgreSQL cluster for the whole run (each test gets a fresh database in it), stopped at exit.
let sharedCluster: PostgresCluster = {
    let cluster = try! PostgresCluster()
    atexit { stopSharedCluster() }
    return cluster
}()

private func stopSharedCluster() {
    sharedCluster.stop()
    try? FileManager.default.removeItem(at: sharedCluster.directory)
}

/// A fresh ParkWise database (test schema, 156 seeded spots), a private mosquitto, and the bridge.
final class BridgeFixture {
    let cluster: PostgresCluster
    let database = "t_" + UUID().uuidString.prefix(8).lowercased()
    let broker: Broker
    let dir = temporaryDirectory()
    private(set) var bridge: Child?

    init(migrate: Bool = true, cluster: PostgresCluster = sharedCluster) throws {
        self.cluster = cluster
        try cluster.sql("CREATE DATABASE \(database)")
        try cluster.sqlFile(packageRoot + "/deploy/backend/parkwise-test-schema.sql", database: database)
        broker = try Broker()
        if migrate {
            let result = try runBridge(["migrate", "--database", url])
            guard result.code == 0 else { throw HarnessError("migrate failed: \(result.err)") }
        }
    }

    var url: String { cluster.url(database) }

    /// Starts `parkwise-bridge run` with this YAML config. The fake and simulated boards of most tests were never
    /// provisioned: unless the config says otherwise, their spots go by `spot_owners: first_report` (a demo's setting);
    /// the tests of the site's register (OwnershipTests) run the default, `registered`.
    @discardableResult
    /// `brokers`: the --broker value (default: this fixture's broker).
    func startBridge(config: String = "accept_simulated: true\nreassert_every: 200ms\n", database: String? = nil,
                     brokers: String? = nil, extra: [String] = []) throws -> Child {
        let path = dir.appendingPathComponent("bridge-\(UUID().uuidString.prefix(4)).yaml").path
        let config = config.contains("spot_owners:") ? config : config + "spot_owners: first_report\n"
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        let child = try Child(bridgeBinary, ["run", "--broker", brokers ?? broker.url, "--database", database ?? url, "--config", path] + extra)
        bridge = child
        guard eventually(15, { child.stderr.contains("bridge running") || child.hasExited }), !child.hasExited else {
            throw HarnessError("bridge did not start: \(child.stderr)")
        }
        return child
    }

    /// A device whose first event (`spot` occupied) the bridge applied before it was killed (no goodbye): its persistent
    /// session keeps what the device sends next, for the next `startBridge`.
    func deviceSeenByAKilledBridge(spot: String, level: String) throws -> FakeDevice {
        let bridge = try startBridge()
        var device = FakeDevice(broker)
        device.online()
        device.event("spot.occupied", #""spot":"\#(spot)","level":"\#(level)""#)
        guard waitFor("SELECT count(*) FROM sensor_events", "1") else { throw HarnessError("first event not applied: \(bridge.stderr)") }
        bridge.signal(SIGKILL)
        _ = bridge.wait(5)
        return device
    }

    @discardableResult
    func query(_ sql: String) -> String {
        (try? cluster.sql(sql, database: database)) ?? "<query failed>"
    }

    /// Waits until `sql` returns `expected` (psql's unaligned output).
    func waitFor(_ sql: String, _ expected: String, seconds: Double = 15) -> Bool {
        eventually(seconds) { query(sql) == expected }
    }

    /// A login role of the bridge's own (not the superuser), with what `migrate --grant` gives it and nothing more (as
    /// deploy/backend/README.md deploys it): its name and URL.
    func bridgeRole() throws -> (name: String, url: String) {
        let role = "bridge_" + database
        try cluster.sql("CREATE ROLE \(role) LOGIN")
        let granted = try runBridge(["migrate", "--database", url, "--grant", role])
        guard granted.code == 0 else { throw HarnessError("migrate --grant failed: \(granted.err)") }
        return (role, "postgresql://\(role)@127.0.0.1:\(cluster.port)/\(database)")
    }

    /// Waits until events 1…`count` of one device are each in sensor_events once (none lost, none twice).
    func eventsLandedOnce(_ count: Int, seconds: Double = 40) -> Bool {
        waitFor("SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || max(seq) FROM sensor_events", "\(count) \(count) \(count)",
                seconds: seconds)
    }

    /// The bridge running, and a device online whose first `count` events (spots P1-A-01…) it applied.
    func bridgeWithAppliedEvents(_ count: Int) throws -> (bridge: Child, device: FakeDevice) {
        let bridge = try startBridge()
        var device = FakeDevice(broker)
        device.online()
        device.occupy((1...count).map { "P1-A-" + String(format: "%02d", $0) })
        guard waitFor("SELECT count(*) FROM sensor_events", "\(count)") else { throw HarnessError("events not applied: \(bridge.stderr)") }
        return (bridge, device)
    }

    func spot(_ id: String) -> String { query("SELECT status || '/' || coalesce(source, '-') FROM spots WHERE id = '\(id)'") }

    /// Free spots of a level, as the apps count them.
    func free(_ level: String) -> Int { Int(query("SELECT count(*) FROM spots WHERE level_code = '\(level)' AND status = 'free'")) ?? -1 }

    /// An active reservation on `spot` for a new user, made `minutesAgo`, held 15 minutes; the spot reserved.
    func reserve(_ spot: String, minutesAgo: Int = 1) {
        query("""
            WITH u AS (INSERT INTO users (email) VALUES ('\(UUID().uuidString)@example.com') RETURNING id),
            r AS (INSERT INTO reservations (user_id, spot_id, source, status, created_at, expires_at)
                  SELECT id, '\(spot)', 'user', 'active', now() - interval '\(minutesAgo) minutes',
                         now() - interval '\(minutesAgo) minutes' + interval '15 minutes' FROM u RETURNING user_id)
            UPDATE spots SET status = 'reserved', held_by = (SELECT user_id FROM r), source = 'user' WHERE id = '\(spot)'
            """)
    }

    /// The database as an earlier release (bridge schema version 2) left it: versions 3 to 8 undone.
    func backToSchemaVersion2() throws {
        try cluster.sql("""
            DROP TABLE sensor_arrivals, sensor_device_outages, sensor_no_shows; ALTER TABLE sensor_devices DROP COLUMN storage_fault;
            ALTER TABLE sensor_levels DROP COLUMN unknown;
            ALTER TABLE sensor_devices DROP COLUMN status, DROP COLUMN status_at, DROP COLUMN heard_at;
            ALTER TABLE sensor_devices DROP COLUMN offline_boot, DROP COLUMN offline_connection;
            DROP TRIGGER sensor_spot_truth ON spots; DROP FUNCTION sensor_spot_truth();
            DROP TABLE sensor_spot_owners, sensor_refused_spots, sensor_bridges;
            ALTER TABLE sensor_devices DROP COLUMN register_rev, DROP COLUMN revoked_at;
            DELETE FROM sensor_schema_migrations WHERE version IN (3, 4, 5, 6, 7, 8, 9)
            """, database: database)
    }

    /// A signed-up user of the app: its id.
    func appUser() -> String {
        query("INSERT INTO users (email) VALUES ('\(UUID().uuidString)@example.com') RETURNING id")
    }

    /// A reservation call as the backend's API makes it (the test schema's `api_*` functions, written from
    /// parkwise-backend-facts.md): its result, or nil when the API refuses it (a 409).
    @discardableResult
    func api(_ call: String) -> String? {
        try? cluster.sql("SELECT \(call)", database: database)
    }

    deinit {
        bridge?.signal(SIGKILL)
        _ = bridge?.wait(5)
    }
}

/// Runs the bridge binary to completion.
func runBridge(_ arguments: [String], environment: [String: String]? = nil, timeout: Double = 30) throws
    -> (code: Int32, out: String, err: String) {
    try runToCompletion(bridgeBinary, arguments, timeout: timeout)
}

/// Runs a program (the bridge, the agent) to completion: its exit code, stdout and stderr.
func runToCompletion(_ program: String, _ arguments: [String], timeout: Double = 30) throws -> (code: Int32, out: String, err: String) {
    let child = try Child(program, arguments)
    guard let code = child.wait(timeout) else {
        child.signal(SIGKILL)
        Issue.record("\(program) \(arguments) did not finish")
        return (-1, child.stdout, child.stderr)
    }
    return (code, child.stdout, child.stderr)
}

/// A device on the wire, published with mosquitto_pub exactly as an agent would (contract v1), for
/// cases a real agent makes slow to reach: duplicates, gaps, faults, offline devices.
struct FakeDevice {
    let broker: Broker
    var site = "garage"
    var device = "p1-north"
    var boot: UInt64 = 1
    private(set) var seq: UInt64 = 0

    init(_ broker: Broker, device: String = "p1-north") {
        self.broker = broker
        self.device = device
    }

    var prefix: String { "parkwise/v1/\(site)/\(device)" }

    func send(_ topic: String, _ payload: String, retain: Bool = false, options: [String] = []) {
        let code = try? mosquittoPublish(broker, prefix + "/" + topic, payload, retain: retain, options: options)
        #expect(code == 0, "mosquitto_pub \(topic)")
    }

    /// `connection`: as agents from 0.2 number their broker connections (absent: an older agent).
    func online(mode: String? = nil, storageFault: String? = nil, connection: Int? = nil) {
        let mark = (mode.map { #","mode":"\#($0)""# } ?? "") + (storageFault.map { #","storage_fault":"\#($0)""# } ?? "")
            + (connection.map { #","connection":\#($0)"# } ?? "")
        send("status", #"{"boot":\#(boot),"since":"\#(wireTime())","state":"online","version":"0.1.0"\#(mark)}"#, retain: true)
    }

    func offline(connection: Int? = nil) {
        send("status", #"{"boot":\#(boot),"state":"offline"\#(connection.map { #","connection":\#($0)"# } ?? "")}"#, retain: true)
    }

    /// The retained state, as of the device's current seq (or `asOf`).
    func spot(_ id: String, _ state: String, since: String?, checkedIn: Bool = false, asOf: UInt64? = nil) {
        let sinceText = since.map { "\"\($0)\"" } ?? "null"
        send("state/spot/\(id)", #"{"checked_in":\#(checkedIn),"seq":\#(asOf ?? seq),"since":\#(sinceText),"state":"\#(state)"}"#,
             retain: true)
    }

    /// Stamps and sends an event with the next seq; returns its JSON so a test can send it again.
    @discardableResult
    mutating func event(_ type: String, at: String = wireTime(), _ fields: String = "") -> String {
        let json = stamp(type, at: at, fields)
        send("events", json)
        return json
    }

    /// An event with the next seq, not sent.
    mutating func stamp(_ type: String, at: String = wireTime(), clock: String = "synced", _ fields: String = "") -> String {
        seq += 1
        return #"{"at":"\#(at)","boot":\#(boot),"clock":"\#(clock)","id":"\#(UUID().uuidString.lowercased())","seq":\#(seq),"type":"\#(type)"\#(fields.isEmpty ? "" : "," + fields)}"#
    }

    /// A `spot.occupied` event for each spot, in order.
    mutating func occupy(_ spots: [String], level: String = "P1") {
        for spot in spots { event("spot.occupied", #""spot":"\#(spot)","level":"\#(level)""#) }
    }

    /// Moves the seq on without sending (events lost on the way).
    mutating func skip(_ count: UInt64) { seq += count }
}

/// ISO-8601 UTC with milliseconds, `seconds` from now.
func wireTime(_ seconds: Double = 0) -> String {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.string(from: Date().addingTimeInterval(seconds))
}

/// PostgreSQL's text form of a timestamp, normalised to epoch milliseconds for comparison.
func epochMs(_ fixture: BridgeFixture, _ expression: String) -> String {
    fixture.query("SELECT (extract(epoch FROM (\(expression))) * 1000)::bigint")
}
