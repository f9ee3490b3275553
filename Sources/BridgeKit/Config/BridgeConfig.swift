import ParkWiseCore

/// What `run` needs beyond the broker and database URLs. Every field has a default, so the config
/// file is optional; `check-config` and `run --config` read it with the agent's YAML reader.
enum SpotOwners: String, Sendable { case registered, firstReport = "first_report" }

struct BridgeConfig: Sendable {
    /// Sites whose devices are accepted (nil: every site).
    var sites: Set<String>?
    /// `site/device` pairs accepted (nil: every device of an accepted site).
    var devices: Set<String>?
    /// A device offline longer than this has its spots taken out of the free count.
    var staleAfter: Duration = .seconds(120)
    /// One `occupancy_snapshots` row per level per slot of this length (the backend's 15 minutes).
    var snapshotEvery: Duration = .seconds(900)
    /// Write feeds marked `simulated` or `replay` (a demo); refused otherwise.
    var acceptSimulated = false
    /// Who may report a spot: only the device the site's register gives it to (`registered`, written by the broker
    /// host's provision.sh and spots.sh), or whichever device reports it first and, once that one is offline, the next
    /// (`first_report`: a demo or a simulator, which nobody provisions).
    var spotOwners: SpotOwners = .registered
    /// The MQTT client id: fixed, so the broker keeps this bridge's session while it is away.
    var clientID = "parkwise-bridge"
    /// Several bridges share the feed through `$share/<group>/…` (nil: a plain subscription).
    var shareGroup: String?
    /// Several bridges split the devices (`k/N`: this one takes the devices whose key hashes to k among N), each
    /// subscribed to the whole feed: a broker without shared subscriptions (NATS) then costs no bridge the others'
    /// work, and no two bridges write one device's rows (nil: every device).
    var partition: Partition?
    /// How often the bridge re-asserts what its sensors see over the backend's own writes, expires holds that ran out
    /// and writes a slot's snapshot once there is data for it.
    var reassertEvery: Duration = .seconds(5)
    /// A reservation checked in from the app whose car the sensor has not seen this long is released (nil: never).
    /// The backend's own hold (HOLD_MINUTES): the time a user had to reach the spot after reserving it is the time
    /// they get to reach it after pressing "I parked".
    var noShowAfter: Duration? = .seconds(900)
    /// At a stop, how long a failing database may hold it (received messages not yet committed are
    /// then given up; systemd's TimeoutStopSec is 30 s).
    var stopGrace: Duration = .seconds(20)
    /// Messages applied per transaction at most.
    var batchSize = 500
    /// Messages held in memory at most while the database is away (about 0.5 kB each): beyond, new events and
    /// states are dropped (a rebirth of every online device rebuilds the spots once the queue is short again, and
    /// the seq gaps are detected), so a long outage cannot grow the bridge until it is killed with all it held.
    var holdAtMost = 100_000
    /// MQTT username and password, a file of `username=` and `password=` lines (mode 0600), as the agent's.
    var credentials: String?
    var tls: (ca: String?, cert: String?, key: String?)?
    /// Prometheus figures for node-exporter's textfile collector (nil: none), e.g.
    /// /var/lib/prometheus/node-exporter/parkwise-bridge.prom: rewritten when they change, at most once a second.
    var metricsFile: String?

    func accepts(_ key: DeviceKey) -> Bool {
        (sites?.contains(key.site) ?? true) && (devices?.contains(key.description) ?? true) && inPartition(key)
    }

    /// Whether the device is this bridge's share of a partitioned feed (always, without `partition`).
    func inPartition(_ key: DeviceKey) -> Bool { partition.map { $0.contains(key) } ?? true }

    /// The subscription filter: every site's feed, or each accepted site's.
    var filters: [String] {
        let bases = sites.map { $0.sorted().map { "parkwise/v1/\($0)/#" } } ?? ["parkwise/v1/+/#"]
        return bases.map { base in shareGroup.map { "$share/\($0)/\(base)" } ?? base }
    }
}

/// Reads a `BridgeConfig` from a YAML tree, collecting every problem with its place.
struct BridgeConfigReader {
    let file: String
    private(set) var issues: [ConfigIssue] = []

    init(file: String) { self.file = file }

    static let keys = ["sites", "devices", "stale_after", "snapshot_every", "accept_simulated", "spot_owners", "client_id",
                       "share_group", "partition", "reassert_every", "no_show_after", "stop_grace", "batch_size", "hold_at_most", "credentials", "tls",
                       "metrics_file"]

    static func read(_ root: ConfigNode, file: String) throws(ConfigError) -> BridgeConfig {
        var reader = BridgeConfigReader(file: file)
        let config = reader.read(root)
        guard reader.issues.isEmpty else { throw ConfigError(reader.issues) }
        return config
    }

    mutating func read(_ root: ConfigNode) -> BridgeConfig {
        var config = BridgeConfig()
        if root.isNull { return config }
        guard case .mapping(let pairs) = root.value else {
            issue(root, "the bridge config must be a mapping of settings", hint: "e.g. `stale_after: 2m`")
            return config
        }
        for (keyNode, value) in pairs {
            let key = keyNode.text ?? ""
            switch key {
            case "sites": config.sites = names(value).map(Set.init)
            case "devices":
                config.devices = names(value).map(Set.init)
                for device in config.devices ?? [] where device.split(separator: "/").count != 2 {
                    issue(value, "'\(device)' is not a device like site/device", hint: "e.g. campus-norte/p2-east")
                }
            case "stale_after": duration(value).map { config.staleAfter = $0 }
            case "snapshot_every": duration(value).map { config.snapshotEvery = $0 }
            case "reassert_every": duration(value).map { config.reassertEvery = $0 }
            case "no_show_after":
                if value.text?.lowercased() == "off" { config.noShowAfter = nil } else { duration(value).map { config.noShowAfter = $0 } }
            case "stop_grace": duration(value).map { config.stopGrace = $0 }
            case "accept_simulated": boolean(value, key: key).map { config.acceptSimulated = $0 }
            case "spot_owners":
                if let owners = text(value).flatMap(SpotOwners.init(rawValue:)) { config.spotOwners = owners } else if !value.isNull {
                    issue(value, "spot_owners must be registered or first_report",
                          hint: "registered: each spot only from the device provisioning gave it (a live site); first_report: a demo")
                }
            case "client_id": text(value).map { config.clientID = $0 }
            case "share_group": text(value).map { config.shareGroup = $0 }
            case "partition":
                if let partition = text(value).flatMap(Partition.init) { config.partition = partition } else {
                    issue(value, "partition must be k/N, this bridge's number k among N bridges (1 ≤ k ≤ N ≤ 64)",
                          hint: "e.g. 1/2 on one bridge and 2/2 on the other: together they take every device once")
                }
            case "credentials": text(value).map { config.credentials = $0 }
            case "batch_size":
                if let n = text(value).flatMap(Int.init), (1...10_000).contains(n) { config.batchSize = n } else {
                    issue(value, "batch_size must be a whole number from 1 to 10000", hint: "500 suits most sites")
                }
            case "hold_at_most":
                if let n = text(value).flatMap(Int.init), (100...10_000_000).contains(n) { config.holdAtMost = n } else {
                    issue(value, "hold_at_most must be a whole number from 100 to 10000000",
                          hint: "messages held while the database is away, about 0.5 kB each: 100000 is some 50 MB")
                }
            case "tls": config.tls = tls(value)
            case "metrics_file":
                // node-exporter reads only `*.prom`; the temp file beside it (`….prom.tmp`) it skips.
                if let path = text(value) {
                    if path.hasPrefix("/") && path.hasSuffix(".prom") && !path.hasSuffix("/.prom") { config.metricsFile = path } else {
                        issue(value, "metrics_file must be an absolute path ending in .prom",
                              hint: "node-exporter's textfile directory, e.g. /var/lib/prometheus/node-exporter/parkwise-bridge.prom")
                    }
                }
            default:
                let close = suggestion(for: key, among: BridgeConfigReader.keys)
                issue(keyNode, "unknown setting '\(key)'",
                      hint: close.map { "did you mean '\($0)'?" } ?? "known: \(BridgeConfigReader.keys.joined(separator: ", "))")
            }
        }
        return config
    }

    private mutating func issue(_ node: ConfigNode, _ message: String, hint: String? = nil) {
        issues.append(ConfigIssue(file: file, mark: node.mark, message: message, hint: hint))
    }

    private mutating func text(_ node: ConfigNode) -> String? {
        guard let text = node.text, !node.isNull else {
            issue(node, "expected a single value here, found \(node.isNull ? "nothing" : "a list or mapping")")
            return nil
        }
        return text
    }

    private mutating func names(_ node: ConfigNode) -> [String]? {
        guard case .sequence(let items) = node.value else {
            issue(node, "expected a list, e.g. [garage-north]")
            return nil
        }
        return items.compactMap { text($0) }
    }

    private mutating func duration(_ node: ConfigNode) -> Duration? {
        guard let text = text(node) else { return nil }
        do {
            let value = try DurationText.read(text)
            guard value > .zero else {
                issue(node, "'\(text)' is not a duration", hint: "write it like 90s, 2m or 1h")
                return nil
            }
            return value
        } catch .tooLong {
            issue(node, "'\(text)' is longer than \(DurationText.format(DurationText.longest))", hint: "a year at most")
            return nil
        } catch {
            issue(node, "'\(text)' is not a duration", hint: "write it like 90s, 2m or 1h")
            return nil
        }
    }

    private mutating func boolean(_ node: ConfigNode, key: String) -> Bool? {
        guard let text = text(node) else { return nil }
        guard let value = ConfigBoolean.read(text) else {
            issue(node, ConfigBoolean.problem(key, found: text), hint: ConfigBoolean.hint)
            return nil
        }
        return value
    }

    private mutating func tls(_ node: ConfigNode) -> (ca: String?, cert: String?, key: String?)? {
        guard case .mapping(let pairs) = node.value else {
            issue(node, "tls must be a mapping with ca, cert and key files")
            return nil
        }
        var files: (ca: String?, cert: String?, key: String?) = (nil, nil, nil)
        for (keyNode, value) in pairs {
            switch keyNode.text {
            case "ca": files.ca = text(value)
            case "cert": files.cert = text(value)
            case "key": files.key = text(value)
            default: issue(keyNode, "unknown tls setting '\(keyNode.text ?? "")'", hint: "ca, cert or key")
            }
        }
        return files
    }
}
