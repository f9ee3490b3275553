import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct BridgeCLITests {
    /// Another session's long transaction holds a table the next step changes: migrate gives up after its lock wait
    /// (not queued behind it, holding up every bridge's writes to that table), changes nothing and says what to do;
    /// once that transaction has ended it goes through.
    @Test func migrateGivesUpOnATableALongTransactionHolds() throws {
        let fixture = try BridgeFixture()
        try fixture.backToSchemaVersion2()
        let holder = try Child("/usr/bin/psql", ["-X", "-q", "-d", fixture.url, "-c",
                                                 "BEGIN; LOCK TABLE sensor_devices IN ACCESS SHARE MODE; SELECT pg_sleep(120); COMMIT"])
        defer { holder.signal(SIGKILL); _ = holder.wait(5) }
        #expect(eventually(15) {
            fixture.query("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                          + "WHERE c.relname = 'sensor_devices' AND l.granted AND l.pid <> pg_backend_pid()") != "0"
        })
        let blocked = try runBridge(["migrate", "--database", fixture.url])
        #expect(blocked.code == 1)
        #expect(blocked.err.contains("migration gave up after waiting 5s for a table lock"), "\(blocked.err)")
        #expect(blocked.err.contains("pg_stat_activity"), "\(blocked.err)")
        #expect(fixture.query("SELECT max(version) FROM sensor_schema_migrations") == "2")
        // The long transaction ends (its session ended by the server): the same command now goes through.
        _ = fixture.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()")
        let again = try runBridge(["migrate", "--database", fixture.url])
        #expect(again.code == 0 && again.out.contains("applied 3: a device's storage fault")
                && again.out.contains("applied 4: the bridge's own records") && again.out.contains("applied 5: the fleet view")
                && again.out.contains("applied 6: a device's last offline"), "\(again.out) \(again.err)")
    }

    /// Step 1 replaces the CHECK on spots.source only: a rule of the backend's own that names source beside another
    /// column is left alone.
    @Test func migrateLeavesTheBackendsOtherChecksOnSourceAlone() throws {
        let fixture = try BridgeFixture(migrate: false)
        try fixture.cluster.sql("ALTER TABLE spots ADD CONSTRAINT spots_user_never_disabled "
                                + "CHECK (status <> 'disabled' OR source IS DISTINCT FROM 'user')", database: fixture.database)
        let migrated = try runBridge(["migrate", "--database", fixture.url])
        #expect(migrated.code == 0, "\(migrated.err)")
        #expect(fixture.query("SELECT count(*) FROM pg_constraint WHERE conname = 'spots_user_never_disabled'") == "1")
        #expect(fixture.query("UPDATE spots SET source = 'sensor' WHERE id = 'P1-A-01' RETURNING source") == "sensor")
    }

    @Test func migrateIsIdempotentAndSaysWhatItDid() throws {
        let fixture = try BridgeFixture(migrate: false)
        #expect(throws: (any Error).self) { try fixture.cluster.sql("UPDATE spots SET source = 'sensor' WHERE id = 'P1-A-01'", database: fixture.database) }
        let first = try runBridge(["migrate", "--database", fixture.url])
        #expect(first.code == 0, "\(first.err)")
        #expect(first.out.contains("applied 1: sensor source and bridge tables"), "\(first.out)")
        #expect(first.out.contains("applied 2: detected gaps checked before a rebirth"), "\(first.out)")
        #expect(first.out.contains("applied 3: a device's storage fault"), "\(first.out)")
        #expect(first.out.contains("applied 4: the bridge's own records: arrivals, device outages, no-shows"), "\(first.out)")
        #expect(first.out.contains("applied 5: the fleet view: each device's last status"), "\(first.out)")
        #expect(first.out.contains("applied 6: a device's last offline: its boot and connection"), "\(first.out)")
        #expect(first.out.contains("applied 7: the sensor's truth holds at the backend's own writes"), "\(first.out)")
        #expect(first.out.contains("applied 8: a departure the board did not see"), "\(first.out)")
        #expect(first.out.contains("applied 9: who may speak for a spot"), "\(first.out)")
        let second = try runBridge(["migrate", "--database", fixture.url])
        #expect(second.code == 0)
        #expect(second.out.contains("already at bridge schema version 9, nothing to do"), "\(second.out)")
        #expect(second.err.isEmpty, "\(second.err)")
        #expect(fixture.query("SELECT count(*) FROM sensor_schema_migrations") == "9")
        // 'sensor' is now allowed, the old values still are, anything else still is not.
        #expect(fixture.query("UPDATE spots SET source = 'sensor' WHERE id = 'P1-A-01' RETURNING source") == "sensor")
        #expect(fixture.query("UPDATE spots SET source = 'sim' WHERE id = 'P1-A-02' RETURNING source") == "sim")
        #expect(throws: (any Error).self) { try fixture.cluster.sql("UPDATE spots SET source = 'robot'", database: fixture.database) }
        // DATABASE_URL works like --database.
        setenv("DATABASE_URL", fixture.url, 1)
        defer { unsetenv("DATABASE_URL") }
        let fromEnvironment = try runBridge(["migrate"])
        #expect(fromEnvironment.code == 0 && fromEnvironment.out.contains("nothing to do"), "\(fromEnvironment.err)")
        // A newer bridge migrated further: this one says the database's version, and changes nothing.
        _ = fixture.query("INSERT INTO sensor_schema_migrations (version, name) VALUES (99, 'from a newer bridge')")
        let older = try runBridge(["migrate", "--database", fixture.url])
        #expect(older.code == 0 && older.out.contains("already at bridge schema version 99 (newer than this bridge's 9), nothing to do"),
                "\(older.out) \(older.err)")
    }

    @Test func badStartsFailWithOneClearLineAndTheirExitCode() throws {
        let fixture = try BridgeFixture(migrate: false)
        let empty = "e_" + UUID().uuidString.prefix(8).lowercased()
        try fixture.cluster.sql("CREATE DATABASE \(empty)")

        let notParkWise = try runBridge(["migrate", "--database", fixture.cluster.url(empty)])
        #expect(notParkWise.code == 78)
        #expect(notParkWise.err.contains("has no ParkWise tables (missing: levels, spots"), "\(notParkWise.err)")

        let badURL = try runBridge(["migrate", "--database", "mysql://db/parkwise"])
        #expect(badURL.code == 64)
        #expect(badURL.err.hasPrefix("Error: 'mysql://db/parkwise' is not a database URL"), "\(badURL.err)")

        let unreachable = try runBridge(["migrate", "--database", "postgresql://postgres:secret@127.0.0.1:\(freePort())/x"])
        #expect(unreachable.code == 1)
        #expect(unreachable.err.contains("cannot connect to postgresql://postgres:***@127.0.0.1"), "\(unreachable.err)")
        #expect(!unreachable.err.contains("secret"))

        let notMigrated = try runBridge(["run", "--broker", fixture.broker.url, "--database", fixture.url])
        #expect(notMigrated.code == 78)
        #expect(notMigrated.err.contains("bridge schema version 0, this bridge needs 9"), "\(notMigrated.err)")

        let badBroker = try runBridge(["run", "--broker", "http://broker", "--database", fixture.url])
        #expect(badBroker.code == 64)
        #expect(badBroker.err.contains("'http://broker' is not a broker address"), "\(badBroker.err)")
        // A cluster's nodes: each one checked, the bad one named with the list it is in.
        let badNode = try runBridge(["run", "--broker", "mqtt://a:1883,,mqtt://c:1883", "--database", fixture.url])
        #expect(badNode.code == 64)
        #expect(badNode.err.contains("'' is not a broker address like mqtt://HOST:PORT (in --broker 'mqtt://a:1883,,mqtt://c:1883')"),
                "\(badNode.err)")

        _ = try runBridge(["migrate", "--database", fixture.url])
        let noBroker = try runBridge(["run", "--broker", "mqtt://127.0.0.1:\(freePort())", "--database", fixture.url,
                                      "--start-timeout", "1"])
        #expect(noBroker.code == 1)
        #expect(noBroker.err.contains("error cannot reach the broker"), "\(noBroker.err)")

        let noDatabase = try runBridge(["run", "--broker", fixture.broker.url])
        #expect(noDatabase.code == 64)
        #expect(noDatabase.err.contains("Missing expected argument '--database <url>' (or DATABASE_URL)"))
    }

    /// While the bridge waits for its first broker connection, a SIGTERM ends it at once as a graceful stop (exit 0,
    /// not at the start timeout, not as a failure to reach the broker); without one, the start timeout is a real
    /// deadline: exit 1 once it has passed, not before.
    @Test func aStopWhileWaitingForTheBrokerEndsAtOnceAndTheStartTimeoutIsADeadline() throws {
        let fixture = try BridgeFixture()
        let nowhere = "mqtt://127.0.0.1:\(freePort())"
        let waiting = try Child(bridgeBinary, ["run", "--broker", nowhere, "--database", fixture.url, "--start-timeout", "120"])
        defer { waiting.signal(SIGKILL); _ = waiting.wait(5) }
        // Said by the link, which starts after the stop signals are handled.
        #expect(eventually(15) { waiting.stderr.contains("broker unreachable") }, "\(waiting.stderr)")
        let asked = Date()
        waiting.signal(SIGTERM)
        #expect(waiting.wait(10) == 0, "\(waiting.stderr)")
        #expect(Date().timeIntervalSince(asked) < 5, "\(waiting.stderr)")
        #expect(waiting.stderr.contains("stop requested") && waiting.stderr.contains("bridge stopped"), "\(waiting.stderr)")
        #expect(!waiting.stderr.contains("cannot reach the broker") && !waiting.stderr.contains("bridge running"), "\(waiting.stderr)")

        let started = Date()
        let timedOut = try runBridge(["run", "--broker", nowhere, "--database", fixture.url, "--start-timeout", "2"])
        let took = Date().timeIntervalSince(started)
        #expect(timedOut.code == 1 && timedOut.err.contains("error cannot reach the broker"), "\(timedOut.err)")
        #expect(took >= 2 && took < 10, "gave up after \(took) s")
    }

    /// Under systemd (`Type=notify`, the shipped unit): READY=1 only once the broker is reached, STOPPING=1 at a stop;
    /// a start that fails says why in STATUS= and never says READY, so `systemctl start` (and `enable --now`) fails.
    @Test func systemdHearsReadyOnlyOnceTheBrokerIsReachedAndWhyAStartFailed() throws {
        let fixture = try BridgeFixture()
        let notify = try NotifySocket(fixture.dir)
        let bridge = try Child("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", bridgeBinary, "run", "--broker", fixture.broker.url,
                                                "--database", fixture.url])
        defer { bridge.signal(SIGKILL); _ = bridge.wait(5) }
        let ready = notify.next() ?? ""
        #expect(ready.hasPrefix("READY=1"), "\(ready) / \(bridge.stderr)")
        // (Its log line comes before READY; the pipe is read on another thread. Without a broker there is no READY at
        // all: the third part below.)
        #expect(eventually(10) { bridge.stderr.contains("bridge running") }, "\(bridge.stderr)")
        bridge.signal(SIGTERM)
        #expect(notify.next() == "STOPPING=1", "\(bridge.stderr)")
        #expect(bridge.wait(15) == 0, "\(bridge.stderr)")

        let config = fixture.dir.appendingPathComponent("bad.yaml").path
        try "sites: [garage]\nstale_after: soon\n".write(toFile: config, atomically: true, encoding: .utf8)
        let refused = try Child("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", bridgeBinary, "run", "--broker", fixture.broker.url,
                                                 "--database", fixture.url, "--config", config])
        #expect(refused.wait(20) == 78, "\(refused.stderr)")
        let status = notify.next() ?? ""
        #expect(status.hasPrefix("STATUS=exit 78: \(config):2:") && status.contains("error"), "\(status) / \(refused.stderr)")

        let unreachable = try Child("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", bridgeBinary, "run", "--broker",
                                                     "mqtt://127.0.0.1:\(freePort())", "--database", fixture.url,
                                                     "--start-timeout", "1"])
        #expect(unreachable.wait(20) == 1, "\(unreachable.stderr)")
        let why = notify.next() ?? ""
        #expect(why.hasPrefix("STATUS=exit 1: ") && why.contains("cannot reach the broker"), "\(why) / \(unreachable.stderr)")
    }

    @Test func checkConfigListsEveryProblemWithItsPlace() throws {
        let dir = temporaryDirectory()
        let good = dir.appendingPathComponent("good.yaml").path
        try "sites: [garage]\nstale_after: 2m\naccept_simulated: false\nshare_group: bridges\n".write(toFile: good, atomically: true, encoding: .utf8)
        let ok = try runBridge(["check-config", good])
        #expect(ok.code == 0, "\(ok.err)")
        #expect(ok.out.contains("subscribes $share/bridges/parkwise/v1/garage/#"), "\(ok.out)")

        let bad = dir.appendingPathComponent("bad.yaml").path
        try "stale_afterr: 2m\nsnapshot_every: soon\ndevices: [garage/p1, justone]\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let result = try runBridge(["check-config", bad])
        #expect(result.code == 78)
        #expect(result.err.contains("\(bad):1:1: error: unknown setting 'stale_afterr'"), "\(result.err)")
        #expect(result.err.contains("did you mean 'stale_after'?"))
        #expect(result.err.contains("\(bad):2:17: error: 'soon' is not a duration"), "\(result.err)")
        #expect(result.err.contains("\(bad):3:10: error: 'justone' is not a device like site/device"), "\(result.err)")
        #expect(result.err.contains("3 problems found"))

        let help = try runBridge(["--help"])
        #expect(help.code == 0 && help.out.contains("migrate") && help.out.contains("check-config"))
        let unknown = try runBridge(["rnu"])
        #expect(unknown.code == 64 && unknown.err.contains("did you mean 'run'?"), "\(unknown.err)")
    }

    @Test func checkConfigTakesAMetricsFileOnlyWhereNodeExporterReadsIt() throws {
        let ok = try checkConfig("metrics_file: /var/lib/prometheus/node-exporter/parkwise-bridge.prom\n")
        #expect(ok.result.code == 0, "\(ok.result.err)")
        #expect(ok.result.out.contains("metrics to /var/lib/prometheus/node-exporter/parkwise-bridge.prom"), "\(ok.result.out)")

        let (bad, result) = try checkConfig("""
            metrics_file: parkwise-bridge.prom
            batch_size: 10
            metrics_file: /var/lib/prometheus/node-exporter/bridge.txt

            """)
        #expect(result.code == 78)
        #expect(result.err.contains("\(bad):1:15: error: metrics_file must be an absolute path ending in .prom"), "\(result.err)")
        #expect(result.err.contains("\(bad):3:15: error: metrics_file must be an absolute path ending in .prom"), "\(result.err)")
        #expect(result.err.contains("node-exporter's textfile directory"), "\(result.err)")
        #expect(result.err.contains("2 problems found"), "\(result.err)")
    }
}

extension BridgeCLITests {
    @Test func checkConfigTakesAPartitionKOfN() throws {
        let ok = try checkConfig("partition: 2/3\n")
        #expect(ok.result.code == 0, "\(ok.result.err)")
        #expect(ok.result.out.contains("devices all (partition 2/3: this bridge's share of them)"), "\(ok.result.out)")
        let (bad, result) = try checkConfig("partition: 3/2\nbatch_size: 10\npartition: half\n")
        #expect(result.code == 78)
        #expect(result.err.contains("\(bad):1:12: error: partition must be k/N"), "\(result.err)")
        #expect(result.err.contains("\(bad):3:12: error: partition must be k/N"), "\(result.err)")
        #expect(result.err.contains("1/2 on one bridge and 2/2 on the other"), "\(result.err)")
    }
}

/// `yaml` in a file of its own, as `parkwise-bridge check-config` sees it: the file and the result.
private func checkConfig(_ yaml: String) throws -> (path: String, result: (code: Int32, out: String, err: String)) {
    let path = temporaryDirectory().appendingPathComponent("bridge.yaml").path
    try yaml.write(toFile: path, atomically: true, encoding: .utf8)
    return (path, try runBridge(["check-config", path]))
}
