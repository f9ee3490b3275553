/// Everything an installer configures, validated. Built by `ConfigReader`.
public struct AgentConfig: Sendable {
    public var site: String
    public var device: String
    public var mqtt: MQTTSettings
    public var outbox: OutboxSettings
    public var board: BoardChoice
    public var spotIDPattern: String?
    public var levels: [LevelConfig]
    public var lanes: [LaneConfig]
    public var spots: [SpotConfig]

    /// Every input the agent reads, in a fixed order: lanes' loops a, b, then spots.
    /// A line change's `input` (an `Int`) indexes this list.
    public var inputs: [InputConfig] {
        lanes.flatMap { [$0.loopA, $0.loopB] } + spots.map(\.input)
    }
}

public struct MQTTSettings: Sendable {
    public var brokers: [BrokerAddress]
    public var credentialsPath: String?
    public var keepalive: Duration
    /// CA, client certificate and key files for `mqtts://` brokers.
    public var tls: TLSFiles?
    /// 4 (MQTT 3.1.1) or 5.
    public var protocolVersion: Int
    /// `mqtt.protocol` unset: 5, and 3.1.1 with a broker that refuses 5.
    public var fallsBackTo311 = false
    /// The credentials and TLS files above, with where the config names them: checked before anything runs.
    public var files: [LinkFile] = []
    /// The retained `status` is republished at most this often, and only when what it reports changed.
    public var statusEvery: Duration = ConfigDefaults.statusEvery
}

/// A file the MQTT link needs, as the config names it.
public struct LinkFile: Sendable, Hashable {
    public enum Role: String, Sendable {
        case credentials = "credentials file", ca = "TLS CA file", cert = "TLS certificate file", key = "TLS key file"
    }

    public var role: Role
    public var path: String
    public var mark: Mark

    /// Credentials and a private key must be readable by the agent's user only.
    public var isSecret: Bool { role == .credentials || role == .key }
}

public struct TLSFiles: Sendable, Hashable {
    /// The CA that signed the broker's certificate (nil: the system's CAs).
    public var ca: String?
    /// A client certificate and its key, for mutual TLS.
    public var cert: String?
    public var key: String?
}

public struct BrokerAddress: Sendable, Hashable, CustomStringConvertible {
    public var tls: Bool
    public var host: String
    public var port: Int

    public init(tls: Bool, host: String, port: Int) {
        self.tls = tls
        self.host = host
        self.port = port
    }

    /// `mqtt://host[:1883]` or `mqtts://host[:8883]`.
    public static func parse(_ text: String) -> BrokerAddress? {
        let tls: Bool
        var rest: Substring
        if text.hasPrefix("mqtt://") { tls = false; rest = text.dropFirst(7) }
        else if text.hasPrefix("mqtts://") { tls = true; rest = text.dropFirst(8) }
        else { return nil }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        var port = tls ? 8883 : 1883
        if let colon = rest.lastIndex(of: ":"), !rest.hasPrefix("[") || rest[..<colon].hasSuffix("]") {
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            rest = rest[..<colon]
        }
        if rest.hasPrefix("["), rest.hasSuffix("]") { rest = rest.dropFirst().dropLast() }
        // No user name or password in the address (`user:pass@host`): they go in the credentials file.
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return nil }
        return BrokerAddress(tls: tls, host: String(rest), port: port)
    }

    public var description: String { "\(tls ? "mqtts" : "mqtt")://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

public struct OutboxSettings: Sendable {
    public var path: String
    public var capacity: Int
    /// Where the config file sets `path` and `capacity` (nil: the default).
    public var pathMark: Mark?
    public var capacityMark: Mark?

    /// A capacity above what the agent keeps (`ConfigDefaults.outboxCapacityLimit`), and why it is lowered: valid
    /// (configs said up to 100000), but a full outbox that large would have the service killed at every start.
    public var capacityLowered: ConfigIssue? {
        guard capacity > ConfigDefaults.outboxCapacityLimit else { return nil }
        return ConfigIssue(file: "", mark: capacityMark ?? Mark(line: 1, column: 1),
                           message: "outbox.capacity \(capacity) is more than the agent keeps: it uses "
                               + "\(ConfigDefaults.outboxCapacityLimit)",
                           hint: "each waiting event takes about 1 KB of memory, and the service's MemoryMax=64M holds "
                               + "\(ConfigDefaults.outboxCapacityLimit) with room to spare; set it to that or less")
    }
}

public enum BoardChoice: Sendable, Hashable {
    case simulated
    case auto
    case named(String)
}

public struct LevelConfig: Sendable {
    public var id: String
    public var capacity: Int
    public var mark: Mark
}

/// A lane: two loops (or beams) a and b; a full a→b crossing moves a vehicle from `from` to `to`.
public struct LaneConfig: Sendable {
    public var id: String
    public var from: String
    public var to: String
    public var loopA: InputConfig
    public var loopB: InputConfig
    /// Shorter than this in the lane is not a car (pedestrian, cart).
    public var minPresence: Duration
    /// A loop held longer than this is a fault, not a queue.
    public var maxPresence: Duration
    public var mark: Mark
}

public struct SpotConfig: Sendable {
    public var id: String
    public var level: String
    public var input: InputConfig
    /// A vehicle that stays this long is checked in.
    public var checkinAfter: Duration
    public var mark: Mark
}

public enum Bias: String, Sendable, CaseIterable {
    case pullUp = "pull-up", pullDown = "pull-down", disabled = "none", asIs = "as-is"
}

/// One sensor line and how its level is conditioned before the garage model sees it.
public struct InputConfig: Sendable {
    public var ref: InputRef
    public var activeLow: Bool
    public var bias: Bias
    public var delayedOn: Duration
    public var delayedOff: Duration
    /// Instead of the delays: report a change at once, then let the input settle this long.
    public var settle: Duration?
    /// Held active longer than this is a `stuck` fault (lanes: `max_presence`); nil: never.
    public var stuckAfter: Duration?
    /// More raw changes than this in a minute is a `chatter` fault.
    public var chatterLimit: Int
    /// A chattering input is trusted again after this long without a change.
    public var recoverAfter: Duration
    /// Where it was written, for messages about it.
    public var mark: Mark
    /// `lane P2-ramp loop a` or `spot P2-A-01`.
    public var owner: String
}

/// Defaults an installer gets without writing anything; documented in the config reference.
public enum ConfigDefaults {
    /// What `parkwise-bridge export-config` writes where the installer has to put a spot's line (`input: UNSET`):
    /// check-config refuses it as "input not set" with its line, so a half-filled file never goes live (and since it
    /// is no input at all, an agent before this one refuses it too).
    public static let inputNotSet = "UNSET"
    public static let outboxPath = "/var/lib/parkwise-agent/outbox"
    public static let outboxCapacity = 200
    /// The most events the outbox holds: each takes about 1 KB of memory while it waits, and 1.6 KB while the file
    /// is read at start (measured: 20000 waiting, 33 MB running and 46 MB at the start after; 100000, 104 and 162 MB),
    /// within the service's MemoryMax=64M with room to spare. More would have the kernel kill the agent at start with
    /// a full outbox, again at every restart, delivering nothing. A config may say more (up to 100000, as it always
    /// could): the agent uses this and says so (`OutboxSettings.capacityLowered`).
    public static let outboxCapacityLimit = 20_000
    public static let keepalive: Duration = .seconds(30)
    public static let statusEvery: Duration = .seconds(60)
    public static let spotDelayedOn: Duration = .seconds(5)
    public static let spotDelayedOff: Duration = .seconds(10)
    public static let loopDelayedOn: Duration = .milliseconds(50)
    public static let loopDelayedOff: Duration = .milliseconds(50)
    public static let checkinAfter: Duration = .seconds(120)
    public static let minPresence: Duration = .milliseconds(400)
    public static let maxPresence: Duration = .seconds(120)
    /// A spot sensor held for three days is more likely stuck than parked on.
    public static let spotStuckAfter: Duration = .seconds(72 * 3600)
    public static let spotChatterLimit = 20
    public static let loopChatterLimit = 120
    public static let recoverAfter: Duration = .seconds(30)
}

extension InputConfig {
    /// A line read as it is: no filter, no pull set, no fault limits. What `walk-test --learn` watches every free
    /// line of the board with, to see which one a sensor moves.
    public static func raw(_ ref: InputRef, owner: String) -> InputConfig {
        InputConfig(ref: ref, activeLow: false, bias: .asIs, delayedOn: .zero, delayedOff: .zero, settle: nil, stuckAfter: nil,
                    chatterLimit: 10_000, recoverAfter: ConfigDefaults.recoverAfter, mark: Mark(line: 0, column: 0), owner: owner)
    }
}
