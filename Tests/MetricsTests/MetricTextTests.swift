import Metrics
import Testing

struct MetricTextTests {
    @Test func familiesHaveHelpTypeAndEscapedLabels() {
        let text = MetricText.render([
            MetricFamily("parkwise_x_total", .counter, help: "Back\\slash and\nnewline.", value: 3),
            MetricFamily("parkwise_y", .gauge, help: "Per device.",
                         samples: [.init(labels: [("site", "north"), ("device", "p\"1\\\n")], value: 0.25)]),
        ])
        #expect(text == """
            # HELP parkwise_x_total Back\\\\slash and\\nnewline.
            # TYPE parkwise_x_total counter
            parkwise_x_total 3
            # HELP parkwise_y Per device.
            # TYPE parkwise_y gauge
            parkwise_y{site="north",device="p\\"1\\\\\\n"} 0.25

            """)
    }

    @Test func numbersAsPrometheusReadsThem() {
        #expect(MetricText.number(0) == "0")
        #expect(MetricText.number(1_700_000_000) == "1700000000")
        #expect(MetricText.number(0.005) == "0.005")
        #expect(MetricText.number(.infinity) == "+Inf")
        #expect(MetricText.number(.nan) == "NaN")
    }

    @Test func histogramBucketsAreCumulative() {
        var lag = LagHistogram()
        for seconds in [0.001, 0.02, 0.02, 7, 1000] { lag.observe(seconds) }
        let samples = lag.family("lag_seconds", help: "h").samples
        func bucket(_ le: String) -> Double? {
            samples.first { $0.suffix == "_bucket" && $0.labels.first?.1 == le }?.value
        }
        #expect(bucket("0.005") == 1)
        #expect(bucket("0.025") == 3)
        #expect(bucket("5") == 3)
        #expect(bucket("10") == 4)
        #expect(bucket("300") == 4)
        #expect(bucket("+Inf") == 5)
        #expect(samples.last == .init(suffix: "_count", value: 5))
        #expect(lag.sum == 0.001 + 0.02 + 0.02 + 7 + 1000)
    }

    @Test func bridgeFiguresRenderEveryFamilyAndDevicesInOrder() {
        var figures = BridgeFigures()
        figures.eventsApplied = 12
        figures.brokerConnected = true
        figures.device(site: "south", device: "p1") { $0.online = true; $0.outboxEvents = 4; $0.lastSeen = 1_700_000_000 }
        figures.device(site: "north", device: "p2") { $0.online = false }
        let text = figures.text
        for name in ["parkwise_bridge_messages_applied_total", "parkwise_bridge_events_applied_total", "parkwise_bridge_duplicate_events_total", "parkwise_bridge_database_errors_total",
                     "parkwise_bridge_broker_connected", "parkwise_bridge_messages_held", "parkwise_bridge_commit_lag_seconds",
                     "parkwise_bridge_device_online", "parkwise_bridge_device_outbox_events",
                     "parkwise_bridge_device_last_seen_timestamp_seconds"] {
            #expect(text.contains("# HELP \(name) ") && text.contains("# TYPE \(name) "), "\(name)")
        }
        let lines = text.split(separator: "\n")
        #expect(lines.contains("parkwise_bridge_events_applied_total 12"))
        #expect(lines.contains("parkwise_bridge_broker_connected 1"))
        #expect(lines.contains(#"parkwise_bridge_device_online{site="north",device="p2"} 0"#))
        #expect(lines.contains(#"parkwise_bridge_device_outbox_events{site="south",device="p1"} 4"#))
        #expect(lines.contains(#"parkwise_bridge_device_last_seen_timestamp_seconds{site="south",device="p1"} 1700000000"#))
        // What no status said yet is absent, not 0: an unknown depth is not an empty outbox.
        #expect(!text.contains(#"parkwise_bridge_device_outbox_events{site="north""#))
        let north = lines.firstIndex(of: #"parkwise_bridge_device_online{site="north",device="p2"} 0"#)
        let south = lines.firstIndex(of: #"parkwise_bridge_device_online{site="south",device="p1"} 1"#)
        #expect(north != nil && south != nil && north! < south!)
    }
}

struct TextfilePaceTests {
    @Test func writesOnlyWhatChangedAtMostOncePerInterval() {
        var pace = TextfilePace<Int>(every: 1, retry: 30)
        #expect(pace.decide(1, now: 100) == .writeNow)   // the first write is never held back
        pace.wrote(1, at: 100)
        #expect(pace.decide(1, now: 100.2) == .nothing)
        #expect(pace.decide(1, now: 5000) == .nothing)   // idle: no deadline, however long
        #expect(pace.decide(2, now: 100.4) == .wait(until: 101))
        #expect(pace.decide(2, now: 101) == .writeNow)
        pace.wrote(2, at: 101)
        #expect(pace.decide(2, now: 101.5) == .nothing)
    }

    @Test func aFailedWriteIsTriedAgainAfterTheInterval() {
        var pace = TextfilePace<Int>(every: 1, retry: 30)
        pace.failed(at: 10)
        #expect(pace.decide(1, now: 10.5) == .wait(until: 40))
        #expect(pace.decide(1, now: 40) == .writeNow)
        #expect(pace.decide(1, now: 10.5, final: true) == .writeNow)   // the stop's last figures are not held back
    }

    @Test func backToTheWrittenFactsIsNoChange() {
        var pace = TextfilePace<Int>(every: 1, retry: 30)
        pace.wrote(1, at: 0)
        #expect(pace.decide(2, now: 0.5) == .wait(until: 1))
        #expect(pace.decide(1, now: 0.7) == .nothing)
    }
}
