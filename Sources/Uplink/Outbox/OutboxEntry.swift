import ParkWiseContract

/// An event waiting in the outbox, with what it takes to correct its wall-clock times later: the
/// monotonic instants they were made from and the kernel boot those instants belong to.
public struct OutboxEntry: Codable, Sendable, Hashable {
    public var event: EventPayload { didSet { encode() } }
    /// The event as published (`WireJSON.encode(event)`), encoded once when the event is set: the outbox record
    /// and the MQTT payload are both these bytes (an edge's event is not encoded twice).
    public private(set) var wire: [UInt8] = []
    /// False when the event holds what JSON cannot (a NaN): `wire` is then `WireJSON.unencodable`, and its outbox
    /// record is refused.
    public private(set) var encodable = true
    /// CLOCK_MONOTONIC nanoseconds of `event.at` (and of `event.arrival`, when it has one).
    public var atMonotonic: Int64
    public var arrivalMonotonic: Int64?
    /// /proc/sys/kernel/random/boot_id: monotonic instants mean nothing across kernel boots.
    public var kernelBoot: String

    public init(event: EventPayload, atMonotonic: Int64, arrivalMonotonic: Int64?, kernelBoot: String) {
        self.event = event
        self.atMonotonic = atMonotonic
        self.arrivalMonotonic = arrivalMonotonic
        self.kernelBoot = kernelBoot
        encode()   // an initializer's assignment calls no didSet
    }

    private mutating func encode() {
        let bytes = WireJSON.encodeIfValid(event)
        encodable = bytes != nil
        wire = bytes ?? WireJSON.unencodable
    }

    enum CodingKeys: String, CodingKey {
        case event, atMonotonic = "at_mono", arrivalMonotonic = "arrival_mono", kernelBoot = "kernel_boot"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(event: try c.decode(EventPayload.self, forKey: .event),
                  atMonotonic: try c.decode(Int64.self, forKey: .atMonotonic),
                  arrivalMonotonic: try c.decodeIfPresent(Int64.self, forKey: .arrivalMonotonic),
                  kernelBoot: try c.decode(String.self, forKey: .kernelBoot))
    }

    /// The event with its times recomputed from a wall clock that has just been set by NTP
    /// (`wallTime` turns a monotonic instant into ISO-8601), marked `clock: corrected`. Only
    /// events stamped `unsynced` in this kernel boot can be corrected; others come back as they were.
    public func corrected(kernelBoot current: String, wallTime: (Int64) -> String) -> OutboxEntry {
        guard event.clock == "unsynced", kernelBoot == current else { return self }
        var event = self.event
        event.at = wallTime(atMonotonic)
        if let arrival = arrivalMonotonic { event.arrival = wallTime(arrival) }
        if event.departure != nil { event.departure = event.at }
        event.clock = "corrected"
        var copy = self
        copy.event = event   // encoded once
        return copy
    }
}
