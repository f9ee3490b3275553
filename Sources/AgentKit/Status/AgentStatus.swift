/// What a running agent reports about itself: its link, outbox, clock, every input and every
/// spot, lane and level. Served as JSON on the local status socket (`parkwise-agent status`),
/// read by `doctor`, and sent in the reply to `cmd/diag`. Keys are snake_case; a value not known
/// (or not applicable) is left out. `format` goes up only when a field changes meaning (new fields
/// do not bump it).
public struct AgentStatus: Codable, Sendable, Equatable {
    public static let currentFormat = 1

    public var format: Int = AgentStatus.currentFormat
    public var site: String
    public var device: String
    public var version: String
    public var configHash: String?
    /// `live` (real sensors), `simulated` (traffic simulator) or `replay` (a recorded trace).
    public var mode: String
    public var pid: Int32
    /// The agent's start counter (the events' `boot`).
    public var boot: UInt64
    /// Wall-clock time of the snapshot and of the agent's start (simulated time when scaled).
    public var now: String
    public var startedAt: String
    public var uptimeSeconds: Double
    /// `synced` (NTP has set the wall clock), `unsynced`, or `simulated` (scaled simulated time).
    public var clock: String
    /// The agent's log threshold now (`cmd/loglevel` changes it until restart).
    public var logLevel: String
    public var link: Link
    public var outbox: OutboxStatus
    public var levels: [Level]
    public var lanes: [Lane]
    public var spots: [Spot]
    public var inputs: [Input]

    public init(site: String, device: String, version: String, configHash: String?, mode: String, pid: Int32, boot: UInt64,
                now: String, startedAt: String, uptimeSeconds: Double, clock: String, logLevel: String, link: Link,
                outbox: OutboxStatus, levels: [Level], lanes: [Lane], spots: [Spot], inputs: [Input]) {
        self.site = site
        self.device = device
        self.version = version
        self.configHash = configHash
        self.mode = mode
        self.pid = pid
        self.boot = boot
        self.now = now
        self.startedAt = startedAt
        self.uptimeSeconds = uptimeSeconds
        self.clock = clock
        self.logLevel = logLevel
        self.link = link
        self.outbox = outbox
        self.levels = levels
        self.lanes = lanes
        self.spots = spots
        self.inputs = inputs
    }

    public struct Link: Codable, Sendable, Equatable {
        /// `connected` or `connecting` (no broker reachable yet, or the link was lost).
        public var state: String
        /// The broker connected to; while connecting, nil.
        public var broker: String?
        public var connectedSince: String?
        /// Connections lost since start (each counts once, however many retries it took).
        public var reconnects: Int
        /// Why the last connection ended, if one did.
        public var lastLoss: String?
        /// The configured brokers, tried in turn.
        public var brokers: [String]
        /// While another client with this device's id keeps taking the connection over (a second board configured
        /// with the same site and device id): what is known of it. Absent otherwise, and from agents before it.
        public var idConflict: String?
        /// Commands dropped unread since start for a payload over the limit (`CommandHandler.payloadLimit`).
        public var oversizedCommands: Int?
        /// While the broker refuses this device's events (MQTT 5): its words, and the first seq it refused.
        public var publishRefused: String?

        public init(state: String, broker: String?, connectedSince: String?, reconnects: Int, lastLoss: String?,
                    brokers: [String], idConflict: String? = nil, oversizedCommands: Int? = nil) {
            self.state = state
            self.broker = broker
            self.connectedSince = connectedSince
            self.reconnects = reconnects
            self.lastLoss = lastLoss
            self.brokers = brokers
            self.idConflict = idConflict
            self.oversizedCommands = oversizedCommands
        }
        public var isConnected: Bool { state == "connected" }
    }

    public struct OutboxStatus: Codable, Sendable, Equatable {
        public var path: String
        /// Events stored and not yet acknowledged by the broker.
        public var depth: Int
        public var capacity: Int
        public var oldestSeq: UInt64?
        /// How long the oldest pending event has waited (since it happened), seconds.
        public var oldestAgeSeconds: Double?
        /// The last seq handed out.
        public var lastSeq: UInt64
        /// Events a full outbox gave up during this run and that `outbox.dropped` announced or will announce.
        public var dropsDeclared: Int
        /// Of those, not yet acknowledged by the broker as announced.
        public var dropsUnannounced: Int
        /// What the disk refuses the agent now and what comes of it (the retained status's `storage_fault`), if anything.
        public var problem: String?

        public init(path: String, depth: Int, capacity: Int, oldestSeq: UInt64?, oldestAgeSeconds: Double?, lastSeq: UInt64,
                    dropsDeclared: Int, dropsUnannounced: Int, problem: String?) {
            self.path = path
            self.depth = depth
            self.capacity = capacity
            self.oldestSeq = oldestSeq
            self.oldestAgeSeconds = oldestAgeSeconds
            self.lastSeq = lastSeq
            self.dropsDeclared = dropsDeclared
            self.dropsUnannounced = dropsUnannounced
            self.problem = problem
        }
    }

    /// As on `state/level/<id>`.
    public struct Level: Codable, Sendable, Equatable {
        public var id: String
        public var capacity: Int
        public var occupied: Int?
        public var free: Int?
        /// Spaces whose state nobody knows (as on the wire): `free` and `occupied` are lower bounds while it is > 0.
        public var unknown: Int
        /// `spots`, `lanes` or `unknown`.
        public var source: String
        public var spotsSensed: Int
        public var spotsOccupied: Int
        public var spotsUnknown: Int
        public var laneCount: Int?

        public init(id: String, capacity: Int, occupied: Int?, free: Int?, unknown: Int, source: String, spotsSensed: Int,
                    spotsOccupied: Int, spotsUnknown: Int, laneCount: Int?) {
            self.id = id
            self.capacity = capacity
            self.occupied = occupied
            self.free = free
            self.unknown = unknown
            self.source = source
            self.spotsSensed = spotsSensed
            self.spotsOccupied = spotsOccupied
            self.spotsUnknown = spotsUnknown
            self.laneCount = laneCount
        }
    }

    public struct Lane: Codable, Sendable, Equatable {
        public var id: String
        public var from: String
        public var to: String
        /// The inputs of loops a and b, as in the config.
        public var loopA: String
        public var loopB: String
        /// A loop's input is faulted: nothing in the lane is counted.
        public var faulted: Bool
        /// Passages counted since start.
        public var passages: Int
        public var lastPassage: Passage?

        public init(id: String, from: String, to: String, loopA: String, loopB: String, faulted: Bool, passages: Int,
                    lastPassage: Passage?) {
            self.id = id
            self.from = from
            self.to = to
            self.loopA = loopA
            self.loopB = loopB
            self.faulted = faulted
            self.passages = passages
            self.lastPassage = lastPassage
        }
    }

    public struct Passage: Codable, Sendable, Equatable {
        public var at: String
        public var from: String
        public var to: String
        public init(at: String, from: String, to: String) {
            self.at = at
            self.from = from
            self.to = to
        }
    }

    /// As on `state/spot/<id>`, with its level and zone (`P2-A-01`: zone `A`; "" when the id has none).
    public struct Spot: Codable, Sendable, Equatable {
        public var id: String
        public var level: String
        public var zone: String
        /// `occupied`, `free` or `unknown`.
        public var state: String
        public var since: String?
        public var checkedIn: Bool

        public init(id: String, level: String, zone: String, state: String, since: String?, checkedIn: Bool) {
            self.id = id
            self.level = level
            self.zone = zone
            self.state = state
            self.since = since
            self.checkedIn = checkedIn
        }
    }

    /// One input as a technician checks it.
    public struct Input: Codable, Sendable, Equatable {
        /// As in the config (`GPIO17`, `1-0020:GPA0`).
        public var input: String
        /// What it feeds: `spot P2-A-01`, `lane gate-in loop a`.
        public var feeds: String
        /// The line's level now (true: active, after `active_low`) and the filtered level.
        public var raw: Bool
        public var filtered: Bool
        /// `ok`, `stuck`, `chatter` or `lost`.
        public var health: String
        /// Raw changes since start.
        public var changes: Int
        /// When the raw level last changed; nil: never since start.
        public var lastChange: String?
        public var lastChangeAgoSeconds: Double?

        public init(input: String, feeds: String, raw: Bool, filtered: Bool, health: String, changes: Int, lastChange: String?,
                    lastChangeAgoSeconds: Double?) {
            self.input = input
            self.feeds = feeds
            self.raw = raw
            self.filtered = filtered
            self.health = health
            self.changes = changes
            self.lastChange = lastChange
            self.lastChangeAgoSeconds = lastChangeAgoSeconds
        }
    }

    enum CodingKeys: String, CodingKey {
        case format, site, device, version, configHash = "config_hash", mode, pid, boot, now, startedAt = "started_at"
        case uptimeSeconds = "uptime_s", clock, logLevel = "log_level", link, outbox, levels, lanes, spots, inputs
    }

    /// Inputs whose health is not `ok`.
    public var faultedInputs: Int { inputs.count(where: { $0.health != "ok" }) }
}

extension AgentStatus.Link {
    enum CodingKeys: String, CodingKey {
        case state, broker, connectedSince = "connected_since", reconnects, lastLoss = "last_loss", brokers
        case idConflict = "id_conflict", oversizedCommands = "oversized_commands", publishRefused = "publish_refused"
    }
}

extension AgentStatus.OutboxStatus {
    enum CodingKeys: String, CodingKey {
        case path, depth, capacity, oldestSeq = "oldest_seq", oldestAgeSeconds = "oldest_age_s", lastSeq = "last_seq"
        case dropsDeclared = "drops_declared", dropsUnannounced = "drops_unannounced", problem
    }
}

extension AgentStatus.Level {
    enum CodingKeys: String, CodingKey {
        case id, capacity, occupied, free, unknown, source, spotsSensed = "spots_sensed", spotsOccupied = "spots_occupied"
        case spotsUnknown = "spots_unknown", laneCount = "lane_count"
    }
}

extension AgentStatus.Lane {
    enum CodingKeys: String, CodingKey {
        case id, from, to, loopA = "loop_a", loopB = "loop_b", faulted, passages, lastPassage = "last_passage"
    }
}

extension AgentStatus.Spot {
    enum CodingKeys: String, CodingKey { case id, level, zone, state, since, checkedIn = "checked_in" }
}

extension AgentStatus.Input {
    enum CodingKeys: String, CodingKey {
        case input, feeds, raw, filtered, health, changes, lastChange = "last_change"
        case lastChangeAgoSeconds = "last_change_ago_s"
    }
}

extension AgentStatus.Spot {
    /// The zone of a spot id: what lies between the level's id and the spot's number
    /// (`P2-A-01` on level `P2`: `A`); "" when the id has no such part.
    public static func zone(of id: String, level: String) -> String {
        var parts = id.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3 else { return "" }
        parts.removeLast()
        if parts.first == level { parts.removeFirst() }
        return parts.joined(separator: "-")
    }
}

extension AgentStatus.Link {
    /// What to do about `idConflict` (as the log's line says it).
    public static let idConflictFix = "give each board its own device id (device: in its config) and its own broker credentials "
        + "(username = device id), then restart both; the broker's ACL can refuse a second login (deploy/mosquitto/README.md)"
}
