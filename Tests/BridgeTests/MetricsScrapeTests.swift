import Foundation
import Testing
import TestSupport

/// The bridge's `metrics_file` as an operator scrapes it: Debian's prometheus-node-exporter reads it from its textfile
/// directory, Debian's prometheus scrapes that every second with deploy/prometheus's config and rules, and the figures
/// are asked of prometheus's HTTP API.
@Suite(.serialized) struct MetricsScrapeTests {
    @Test func prometheusSeesEventsDevicesErrorsAndTheBrokerLink() throws {
        let fixture = try BridgeFixture()
        let (role, url) = try fixture.bridgeRole()
        let textfiles = fixture.dir.appendingPathComponent("node-exporter").path
        try FileManager.default.createDirectory(atPath: textfiles, withIntermediateDirectories: true)
        let file = textfiles + "/parkwise-bridge.prom"
        let node = try NodeExporter(textfileDirectory: textfiles)
        let prometheus = try PrometheusServer(config: try scrapeConfig(target: node.target))
        let bridge = try fixture.startBridge(config: "accept_simulated: true\nreassert_every: 200ms\nmetrics_file: \(file)\n",
                                             database: url)
        func shows(_ query: String, _ expected: String, seconds: Double = 30) -> Bool {
            eventually(seconds) { prometheus.value(of: query) == expected }
        }

        var device = FakeDevice(fixture.broker)
        device.online()
        device.occupy(["P1-A-01", "P1-A-02", "P1-A-03"])
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_events", "3"), "\(bridge.stderr)")
        #expect(shows("parkwise_bridge_events_applied_total", "3"), "\(prometheus.log)\n\(bridge.stderr)")
        #expect(shows(#"parkwise_bridge_device_online{site="garage",device="p1-north"}"#, "1"))
        #expect(shows("parkwise_bridge_broker_connected", "1"))
        #expect(shows("parkwise_bridge_database_errors_total", "0"))
        // Every committed message (the status and the three events) in the lag histogram, each under its +Inf.
        #expect(shows(#"parkwise_bridge_commit_lag_seconds_bucket{le="+Inf"}"#, "4"))
        #expect(shows("parkwise_bridge_commit_lag_seconds_count", "4"))
        // Heard now (the fake device's clock is this machine's): within a minute of prometheus's own time.
        #expect(shows(#"abs(time() - parkwise_bridge_device_last_seen_timestamp_seconds{device="p1-north"}) < bool 60"#, "1"))
        // node-exporter read the file whole (no parse error) and saw no temp file.
        #expect(shows("node_textfile_scrape_error", "0"))
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? Int) == 0o644, "node-exporter runs as its own user: \(attributes)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: textfiles) == ["parkwise-bridge.prom"])

        // Idle (the sweep runs every 200 ms): the file is not rewritten. Ten more scrapes, at least ten seconds.
        let inode = attributes[.systemFileNumber] as? UInt64
        let scrapes = Int(prometheus.value(of: "count_over_time(up[1h])") ?? "") ?? 0
        #expect(eventually(60) { (Int(prometheus.value(of: "count_over_time(up[1h])") ?? "") ?? 0) >= scrapes + 10 })
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.systemFileNumber] as? UInt64 == inode,
                "rewritten while nothing changed")

        // A status with the board's outbox (as an agent's says it).
        device.send("status", #"{"boot":1,"state":"online","version":"0.1.0","outbox_depth":7}"#, retain: true)
        #expect(shows(#"parkwise_bridge_device_outbox_events{site="garage",device="p1-north"}"#, "7"))

        // The database refuses the bridge's writes: errors counted while the events are held.
        fixture.query("REVOKE INSERT ON sensor_events FROM \(role)")
        device.occupy(["P1-A-04"])
        #expect(eventually(30) { (Int(prometheus.value(of: "parkwise_bridge_database_errors_total") ?? "") ?? 0) >= 1 },
                "\(bridge.stderr)")
        #expect(shows("parkwise_bridge_events_applied_total", "3"))
        fixture.query("GRANT INSERT ON sensor_events TO \(role)")
        #expect(shows("parkwise_bridge_events_applied_total", "4", seconds: 60), "\(bridge.stderr)")

        // The device goes offline (its last will), then the broker goes away.
        device.offline()
        #expect(shows(#"parkwise_bridge_device_online{site="garage",device="p1-north"}"#, "0"))
        fixture.broker.stop()
        #expect(shows("parkwise_bridge_broker_connected", "0"), "\(bridge.stderr)")
    }
}

/// deploy/prometheus/prometheus.yml with the test's node-exporter as its target, a 1 s scrape and evaluation interval
/// and the rules from the source tree (so prometheus loads them as shipped).
private func scrapeConfig(target: String) throws -> String {
    var config = try String(contentsOfFile: packageRoot + "/deploy/prometheus/prometheus.yml", encoding: .utf8)
    for (from, to) in [("scrape_interval: 15s", "scrape_interval: 1s"), ("evaluation_interval: 15s", "evaluation_interval: 1s"),
                       ("/etc/prometheus/parkwise.rules.yml", packageRoot + "/deploy/prometheus/parkwise.rules.yml"),
                       (#"["localhost:9100"]"#, #"["\#(target)"]"#)] {
        guard config.contains(from) else { throw HarnessError("deploy/prometheus/prometheus.yml has no '\(from)'") }
        config = config.replacingOccurrences(of: from, with: to)
    }
    return config
}
