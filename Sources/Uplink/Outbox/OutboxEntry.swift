import ParkWiseContract

/// An event waiting in the outbox, with what it takes to correct its wall-clock times later: the
/// monotonic instants they were made from and the kernel boot those instants belong to.
public struct OutboxEntry: Codable, Sendable, Hashable {
    public var event: EventPayload
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
    }

    enum CodingKeys: String, CodingKey {
        case event, atMonotonic = "at_mono", arrivalMonotonic = "arrival_mono", kernelBoot = "kernel_boot"
    }

    /// The event with its times recomputed from a wall clock that has just been set by NTP
    /// (`wallTime` turns a monotonic instant into ISO-8601), marked `clock: corrected`. Only
    /// events stamped `unsynced` in this kernel boot can be corrected; others come back as they were.
    public func corrected(kernelBoot current: String, wallTime: (Int64) -> String) -> OutboxEntry {
        guard event.clock == "unsynced", kernelBoot == current else { return self }
        var copy = self
        copy.event.at = wallTime(atMonotonic)
        if let arrival = arrivalMonotonic { copy.event.arrival = wallTime(arrival) }
        if copy.event.departure != nil { copy.event.departure = copy.event.at }
        copy.event.clock = "corrected"
        return copy
    }
}
