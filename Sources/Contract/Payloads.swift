import FoundationEssentials

/// One event on `.../events`. Every event has id, seq, boot, type, at and clock; the rest depends on type.
public struct EventPayload: Codable, Sendable, Hashable {
    /// UUID, stable across redelivery: a backend dedupes by it.
    public var id: String
    /// Per device, strictly increasing: a backend detects gaps by it.
    public var seq: UInt64
    /// Counts the agent's starts.
    public var boot: UInt64
    public var type: String
    /// ISO-8601 UTC with milliseconds: when the vehicle did it, not when it was sent.
    public var at: String
    /// `synced`, `unsynced` (the board's clock was not yet set by NTP) or `corrected`.
    public var clock: String
    /// True when sent from the outbox after the link came back.
    public var replayed: Bool?

    public var spot: String?
    public var level: String?
    public var lane: String?
    public var from: String?
    public var to: String?
    public var arrival: String?
    public var departure: String?
    public var staySeconds: Double?
    public var subject: String?
    public var input: String?
    public var reason: String?
    public var counted: Int?
    public var clampedTo: Int?
    /// `outbox.dropped`: how many events a full outbox gave up, and the range of their seqs.
    public var dropped: Int?
    public var firstSeq: UInt64?
    public var lastSeq: UInt64?

    public init(id: String, seq: UInt64, boot: UInt64, type: String, at: String, clock: String) {
        self.id = id
        self.seq = seq
        self.boot = boot
        self.type = type
        self.at = at
        self.clock = clock
    }

    enum CodingKeys: String, CodingKey {
        case id, seq, boot, type, at, clock, replayed, spot, level, lane, from, to, arrival, departure
        case staySeconds = "stay_s", subject, input, reason, counted, clampedTo = "clamped_to"
        case dropped, firstSeq = "first_seq", lastSeq = "last_seq"
    }
}

/// Retained on `.../status`. The broker publishes `offline` as the last will.
public struct StatusPayload: Codable, Sendable, Hashable {
    public var state: String
    public var version: String?
    public var configHash: String?
    public var boot: UInt64?
    public var since: String?
    /// Absent for a live feed (real sensors); `simulated` (traffic simulator) or `replay` (a recorded
    /// trace) otherwise: a backend must not write such a feed into real tables unless told to.
    public var mode: String?
    /// What a control room needs at a glance (online only; republished at most once per
    /// `mqtt.status_every`, and only when one of them changed): seconds since the agent started,
    /// events waiting for the broker and how long the oldest has waited, the wall clock (`synced`,
    /// `unsynced`, `simulated`), inputs not trusted now, connections lost since start.
    public var uptimeSeconds: Int?
    public var outboxDepth: Int?
    public var outboxOldestAgeSeconds: Int?
    public var clock: String?
    public var faultedInputs: Int?
    public var reconnects: Int?
    /// While the device's disk fails it (online only; absent otherwise): what is wrong, in a technician's words.
    /// Events are then kept in memory, or held unsent when no seq reservation reaches the disk, so a backend that
    /// sees this knows why a device that is online may send nothing, and that its SD card needs looking at.
    public var storageFault: String?
    /// While another client with this device's id keeps taking its broker connection over (online only; absent
    /// otherwise): most likely a second board configured with the same site and device id, whose events then mix with
    /// this one's under one device. What is known of it, in a technician's words.
    public var idConflict: String?
    /// While the broker refuses this device's events (MQTT 5 PUBACK reason 0x80 or more, e.g. not authorized: its ACL
    /// does not know the device by this id): the broker's words. The events stay in the device's outbox, none is lost,
    /// none arrives; absent otherwise.
    public var publishRefused: String?
    /// When this status was produced, on the device's wall clock (online only): a reader ages a retained status
    /// against its own clock (while `clock` is `unsynced` the device's wall clock may be off).
    public var at: String?
    /// The agent's broker connection this status belongs to (online, a clean stop's offline and the last will): counts
    /// up within a boot, one per connection attempt. A reader holding an offline of connection n (same boot) knows an
    /// online of connection n or before it is older news, and an offline of a connection before the online it holds
    /// the same (the two may reach two bridges of a shared subscription in either order). Absent from agents before 0.2.
    public var connection: UInt64?

    public init(state: String, version: String? = nil, configHash: String? = nil, boot: UInt64? = nil, since: String? = nil,
                mode: String? = nil, connection: UInt64? = nil) {
        self.state = state
        self.connection = connection
        self.version = version
        self.configHash = configHash
        self.boot = boot
        self.since = since
        self.mode = mode
    }

    /// The facts that change while running, as one value: what decides whether to republish.
    /// (The oldest event's age and the uptime grow by themselves: they are sent, not compared.)
    public struct Health: Sendable, Hashable {
        public var outboxDepth: Int
        public var clock: String
        public var faultedInputs: Int
        public var reconnects: Int
        public var storageFault: String?
        public var idConflict: String?
        public var publishRefused: String?
        public init(outboxDepth: Int, clock: String, faultedInputs: Int, reconnects: Int, storageFault: String? = nil,
                    idConflict: String? = nil, publishRefused: String? = nil) {
            self.outboxDepth = outboxDepth
            self.clock = clock
            self.faultedInputs = faultedInputs
            self.reconnects = reconnects
            self.storageFault = storageFault
            self.idConflict = idConflict
            self.publishRefused = publishRefused
        }
    }

    /// This status with `health`, the uptime and the oldest pending event's age filled in.
    public func with(_ health: Health, uptimeSeconds: Int, outboxOldestAgeSeconds: Int?, at: String?) -> StatusPayload {
        var copy = self
        copy.at = at
        copy.uptimeSeconds = uptimeSeconds
        copy.outboxDepth = health.outboxDepth
        copy.outboxOldestAgeSeconds = outboxOldestAgeSeconds
        copy.clock = health.clock
        copy.faultedInputs = health.faultedInputs
        copy.reconnects = health.reconnects
        copy.storageFault = health.storageFault
        copy.idConflict = health.idConflict
        copy.publishRefused = health.publishRefused
        return copy
    }

    /// The `mode` of a feed driven by the traffic simulator or a trace.
    public static let simulatedMode = "simulated"
    public static let replayMode = "replay"

    /// The MQTT 5 message expiry interval the status is published with, in seconds (about 136 years: it never
    /// expires). A broker hands a retained copy on with what is left of it, so a reader learns how long ago the status
    /// was published by the broker's clock, whatever the board's: `ageSeconds(remaining:)`.
    public static let expiryInterval = UInt32.max

    /// How long ago a status was published, from the expiry interval left when it arrived; nil for another interval.
    public static func ageSeconds(remaining: UInt32?) -> Int64? {
        remaining.map { Int64(expiryInterval) - Int64($0) }.flatMap { (0...Int64(Int32.max)).contains($0) ? $0 : nil }
    }

    enum CodingKeys: String, CodingKey {
        case state, version, configHash = "config_hash", boot, since, mode, uptimeSeconds = "uptime_s"
        case outboxDepth = "outbox_depth", outboxOldestAgeSeconds = "outbox_oldest_age_s", clock
        case faultedInputs = "faulted_inputs", reconnects, storageFault = "storage_fault", idConflict = "id_conflict", publishRefused = "publish_refused", at
        case connection
    }
}

/// Retained on `.../state/spot/<id>`.
public struct SpotStatePayload: Codable, Sendable, Hashable {
    /// `occupied`, `free` or `unknown`.
    public var state: String
    /// When this state began; null when it was already so when the agent started.
    public var since: String?
    public var checkedIn: Bool
    /// The device's `seq` of its last event when this state was published: the state already
    /// includes every event up to it, so a consumer applies an event to the spot only when its seq
    /// is higher (a replayed older event never overwrites it). Absent from agents before it existed.
    public var seq: UInt64?

    public init(state: String, since: String?, checkedIn: Bool, seq: UInt64? = nil) {
        self.state = state
        self.since = since
        self.checkedIn = checkedIn
        self.seq = seq
    }

    enum CodingKeys: String, CodingKey { case state, since, checkedIn = "checked_in", seq }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(state, forKey: .state)
        try c.encode(since, forKey: .since)
        try c.encode(checkedIn, forKey: .checkedIn)
        try c.encodeIfPresent(seq, forKey: .seq)
    }
}

/// Retained on `.../state/level/<id>`. Unknown numbers are `null`, never 0.
public struct LevelStatePayload: Codable, Sendable, Hashable {
    public var capacity: Int
    /// Vehicles known to be on the level; null while unknown. A lower bound while `unknown` > 0.
    public var occupied: Int?
    /// Spaces known to be free (capacity - occupied - unknown); null when occupied is. A lower bound while
    /// `unknown` > 0.
    public var free: Int?
    /// `spots` (every space has a sensor; counted from them), `lanes` (counted at the lanes) or `unknown`.
    public var source: String
    /// Spaces whose state nobody knows now: `spots_unknown` for `spots`, 0 for `lanes`, `capacity` for `unknown`.
    /// So occupied + free + unknown = capacity, null taken as 0. Added within v1: a payload of an agent before it
    /// has none, and decodes with the value it would have sent (its `spots` levels had no unknown spot).
    public var unknown: Int
    /// From spot sensors: how many spaces have one, how many are occupied, how many report unknown.
    public var spotsSensed: Int
    public var spotsOccupied: Int
    public var spotsUnknown: Int
    /// From lane passages; null until calibrated.
    public var laneCount: Int?

    /// `unknown` nil: the value the source implies (`LevelStatePayload.unknown(source:capacity:spotsUnknown:)`).
    public init(capacity: Int, occupied: Int?, source: String, spotsSensed: Int, spotsOccupied: Int, spotsUnknown: Int,
                laneCount: Int?, unknown: Int? = nil) {
        let unknown = unknown ?? LevelStatePayload.unknown(source: source, capacity: capacity, spotsUnknown: spotsUnknown)
        self.capacity = capacity
        self.occupied = occupied
        self.free = occupied.map { max(capacity - $0 - unknown, 0) }
        self.source = source
        self.unknown = unknown
        self.spotsSensed = spotsSensed
        self.spotsOccupied = spotsOccupied
        self.spotsUnknown = spotsUnknown
        self.laneCount = laneCount
    }

    /// The spaces nobody knows of a level reported from `source`.
    public static func unknown(source: String, capacity: Int, spotsUnknown: Int) -> Int {
        switch source {
        case "spots": return spotsUnknown
        case "lanes": return 0
        default: return capacity
        }
    }

    enum CodingKeys: String, CodingKey {
        case capacity, occupied, free, source, unknown, spotsSensed = "spots_sensed", spotsOccupied = "spots_occupied"
        case spotsUnknown = "spots_unknown", laneCount = "lane_count"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        capacity = try c.decode(Int.self, forKey: .capacity)
        occupied = try c.decodeIfPresent(Int.self, forKey: .occupied)
        free = try c.decodeIfPresent(Int.self, forKey: .free)
        source = try c.decode(String.self, forKey: .source)
        spotsSensed = try c.decode(Int.self, forKey: .spotsSensed)
        spotsOccupied = try c.decode(Int.self, forKey: .spotsOccupied)
        spotsUnknown = try c.decode(Int.self, forKey: .spotsUnknown)
        laneCount = try c.decodeIfPresent(Int.self, forKey: .laneCount)
        unknown = try c.decodeIfPresent(Int.self, forKey: .unknown)
            ?? LevelStatePayload.unknown(source: source, capacity: capacity, spotsUnknown: spotsUnknown)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(capacity, forKey: .capacity)
        try c.encode(occupied, forKey: .occupied)
        try c.encode(free, forKey: .free)
        try c.encode(source, forKey: .source)
        try c.encode(spotsSensed, forKey: .spotsSensed)
        try c.encode(spotsOccupied, forKey: .spotsOccupied)
        try c.encode(spotsUnknown, forKey: .spotsUnknown)
        try c.encode(laneCount, forKey: .laneCount)
        try c.encode(unknown, forKey: .unknown)
    }
}

/// The JSON form used on the wire: sorted keys, no escaped slashes.
public enum WireJSON {
    /// The payloads sent on every edge, without JSONEncoder: the same bytes (see `WireWriter`).
    public static func encode(_ value: some WireWritable) -> [UInt8] {
        encodeIfValid(value) ?? unencodable
    }

    /// Nil where JSONEncoder would have thrown (a NaN, an infinity).
    public static func encodeIfValid(_ value: some WireWritable) -> [UInt8]? {
        WireWriter.written { value.write(to: &$0) }
    }

    /// What is sent for a payload JSON cannot hold.
    public static let unencodable = Array("{}".utf8)

    public static func encode(_ value: some Encodable) -> [UInt8] {
        encodeWithFoundation(value)
    }

    /// Through JSONEncoder, whatever the type: the reference the hand-written payloads are checked against.
    public static func encodeWithFoundation(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Our payload types encode only strings, numbers and booleans: encoding cannot fail.
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) -> T? {
        try? JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// ISO-8601 UTC with milliseconds, e.g. `2026-11-29T14:03:07.250Z`, computed in integers so a
/// millisecond never rounds away.
public enum WireTime {
    /// "YYYY-MM-DDTHH:MM:SS.mmmZ", written digit by digit into one buffer (once or twice per event: no
    /// interpolation, no intermediate strings).
    public static func format(unixNanoseconds ns: Int64) -> String {
        // Floor divisions (toward the past, also before 1970) that cannot overflow, even at Int64.min.
        let ms = ns / 1_000_000 - (ns % 1_000_000 < 0 ? 1 : 0)
        let days = ms / 86_400_000 - (ms % 86_400_000 < 0 ? 1 : 0)
        let msOfDay = ms - days * 86_400_000
        let (year, month, day) = civil(days: days)
        let h = msOfDay / 3_600_000, m = msOfDay / 60_000 % 60, s = msOfDay / 1000 % 60, f = msOfDay % 1000
        // Nanoseconds since 1970 in an Int64 lie within the years 1677-2262: always four digits.
        return String(unsafeUninitializedCapacity: 24) { text in
            var at = 0
            func digits(_ value: Int64, _ width: Int, then mark: UInt8) {
                // Backwards from the last digit (a plain loop: `stride` over Int64 stayed generic, looked up at run time).
                var rest = value, i = at + width
                while i > at {
                    i -= 1
                    text[i] = UInt8(truncatingIfNeeded: 48 + rest % 10)
                    rest /= 10
                }
                text[at + width] = mark
                at += width + 1
            }
            digits(year, 4, then: UInt8(ascii: "-"))
            digits(month, 2, then: UInt8(ascii: "-"))
            digits(day, 2, then: UInt8(ascii: "T"))
            digits(h, 2, then: UInt8(ascii: ":"))
            digits(m, 2, then: UInt8(ascii: ":"))
            digits(s, 2, then: UInt8(ascii: "."))
            digits(f, 3, then: UInt8(ascii: "Z"))
            return at
        }
    }

    /// "YYYY-MM-DD" of a time in seconds: any date a certificate can carry (up to 9999-12-31), which nanoseconds
    /// since 1970 cannot hold past 2262.
    public static func formatDate(unixSeconds s: Int64) -> String {
        let (year, month, day) = civil(days: s >= 0 ? s / 86_400 : (s - 86_399) / 86_400)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    /// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    private static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func pad(_ n: Int64, _ width: Int) -> String {
        let text = String(n)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}

/// Any command may carry an `id`; the reply repeats it.
/// A device's entry in the site's register (`Topics.register`), retained, published by the broker host's
/// `provision.sh`, `spots.sh` and `revoke.sh` as the admin role: the spots it may report, or that it is revoked (for
/// ever: an id is never given again). `rev` (the broker host's clock, ms) orders entries: of two that give one spot,
/// the higher wins, so an older retained entry read after a newer one changes nothing.
public struct RegisterPayload: Codable, Sendable, Hashable {
    /// `provisioned` or `revoked`.
    public var state: String
    public var spots: [String]
    public var rev: Int64
    public var at: String?

    public init(state: String, spots: [String], rev: Int64, at: String? = nil) {
        self.state = state
        self.spots = spots
        self.rev = rev
        self.at = at
    }

    public var revoked: Bool { state == "revoked" }
}

public struct CommandEnvelope: Codable, Sendable {
    public var id: String?
}

/// Published on `.../reply` for every command received.
public struct CommandReply: Codable, Sendable, Hashable {
    public var command: String
    public var id: String?
    public var ok: Bool
    public var error: String?

    public init(command: String, id: String?, ok: Bool, error: String? = nil) {
        self.command = command
        self.id = id
        self.ok = ok
        self.error = error
    }
}
