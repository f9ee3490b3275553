/// The sensors' view of spots written by one batch, reduced to one write per spot (a statement
/// may change a row once): the write with the highest order wins, as it would one by one.
///
/// Order = device seq × 2, + 1 for a retained state: a state already includes the event of its
/// seq, so it wins over that event and both lose to any later event. Stored in `sensor_spots.ord`,
/// it makes the writes commute: redelivered, replayed or late messages change nothing.
struct SpotWrites {
    struct Write {
        var spot: String
        var key: DeviceKey
        var state: String
        var since: String?
        var checkedIn: Bool
        var seq: UInt64
        var isState: Bool

        var order: UInt64 { seq &* 2 &+ (isState ? 1 : 0) }
    }

    private(set) var winners: [String: Write] = [:]

    var isEmpty: Bool { winners.isEmpty }

    mutating func add(_ write: Write) {
        if let current = winners[write.spot], current.order > write.order { return }
        winners[write.spot] = write
    }

    mutating func removeAll() { winners.removeAll(keepingCapacity: true) }

    /// In spot order, so two bridges lock rows in the same order (no deadlock).
    var sorted: [Write] { winners.values.sorted { $0.spot < $1.spot } }
}

/// A device's order as the batch sees it, read under the device row's lock and written back once.
struct DeviceCursor {
    var boot: UInt64
    var lastSeq: UInt64
}
