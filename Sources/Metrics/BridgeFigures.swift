/// What `parkwise-bridge` tells operators (its `metrics_file`): counters since the process started (Prometheus
/// takes a restart's reset in its stride), the broker link, and each device as its feed last said it.
public struct BridgeFigures: Equatable, Sendable {
    public struct Device: Equatable, Sendable {
        /// Its last status said `online` (its last will or goodbye says `offline`).
        public var online = false
        /// Events waiting in its outbox, as its last status said (nil: no status said it yet).
        public var outboxEvents: Int?
        /// Unix seconds the bridge last received a message of its own from it (not a retained copy; nil: none yet).
        public var lastSeen: Int64?

        public init() {}
    }

    public var messagesApplied = 0
    public var eventsApplied = 0
    public var duplicates = 0
    public var databaseErrors = 0
    public var brokerConnected = false
    /// Received and not committed yet (queued, or held through a database outage).
    public var held = 0
    public var lag = LagHistogram()
    /// By site, then device.
    public var devices: [String: [String: Device]] = [:]

    public init() {}

    public mutating func device(site: String, device: String, _ change: (inout Device) -> Void) {
        change(&devices[site, default: [:]][device, default: Device()])
    }

    public var families: [MetricFamily] {
        let boards = devices.keys.sorted().flatMap { site in
            devices[site]!.keys.sorted().map { (site: site, device: $0, figures: devices[site]![$0]!) }
        }
        func perDevice(_ value: (Device) -> Double?) -> [MetricFamily.Sample] {
            boards.compactMap { board in
                value(board.figures).map { .init(labels: [("site", board.site), ("device", board.device)], value: $0) }
            }
        }
        return [
            MetricFamily("parkwise_bridge_messages_applied_total", .counter,
                         help: "Messages written to the database: events, statuses, retained states, register entries.",
                         value: Double(messagesApplied)),
            MetricFamily("parkwise_bridge_events_applied_total", .counter,
                         help: "Events written to the database (duplicates not counted).", value: Double(eventsApplied)),
            MetricFamily("parkwise_bridge_duplicate_events_total", .counter,
                         help: "Events received again (same id) and skipped.", value: Double(duplicates)),
            MetricFamily("parkwise_bridge_database_errors_total", .counter,
                         help: "Database failures: each failed batch, connection attempt or sweep step (retried, nothing lost).",
                         value: Double(databaseErrors)),
            MetricFamily("parkwise_bridge_broker_connected", .gauge,
                         help: "1 while the bridge is connected to the MQTT broker.", value: brokerConnected ? 1 : 0),
            MetricFamily("parkwise_bridge_messages_held", .gauge,
                         help: "Messages received and not yet committed (grows while the database is away).", value: Double(held)),
            lag.family("parkwise_bridge_commit_lag_seconds", help: "From a message's receipt to its transaction's commit."),
            MetricFamily("parkwise_bridge_device_online", .gauge, help: "1 when the device's last status said online.",
                         samples: perDevice { $0.online ? 1 : 0 }),
            MetricFamily("parkwise_bridge_device_outbox_events", .gauge,
                         help: "Events waiting in the device's outbox, as its last status said.",
                         samples: perDevice { $0.outboxEvents.map(Double.init) }),
            MetricFamily("parkwise_bridge_device_last_seen_timestamp_seconds", .gauge,
                         help: "Unix time the bridge last received a message from the device.",
                         samples: perDevice { $0.lastSeen.map(Double.init) }),
        ]
    }

    public var text: String { MetricText.render(families) }
}
