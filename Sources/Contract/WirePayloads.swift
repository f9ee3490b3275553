/// A payload sent on every edge: written by hand, byte for byte as JSONEncoder writes it (keys in its sorted order).
public protocol WireWritable: Encodable {
    func write(to writer: inout WireWriter)
}

extension EventPayload: WireWritable {
    public func write(to w: inout WireWriter) {
        w.open()
        w.string("arrival", ifPresent: arrival)
        w.string("at", at)
        w.unsigned("boot", boot)
        w.integer("clamped_to", ifPresent: clampedTo)
        w.string("clock", clock)
        w.integer("counted", ifPresent: counted)
        w.string("departure", ifPresent: departure)
        w.integer("dropped", ifPresent: dropped)
        w.unsigned("first_seq", ifPresent: firstSeq)
        w.string("from", ifPresent: from)
        w.string("id", id)
        w.string("input", ifPresent: input)
        w.string("lane", ifPresent: lane)
        w.unsigned("last_seq", ifPresent: lastSeq)
        w.string("level", ifPresent: level)
        w.string("reason", ifPresent: reason)
        w.bool("replayed", ifPresent: replayed)
        w.unsigned("seq", seq)
        w.string("spot", ifPresent: spot)
        w.double("stay_s", ifPresent: staySeconds)
        w.string("subject", ifPresent: subject)
        w.string("to", ifPresent: to)
        w.string("type", type)
        w.close()
    }
}

extension SpotStatePayload: WireWritable {
    public func write(to w: inout WireWriter) {
        w.open()
        w.bool("checked_in", checkedIn)
        w.unsigned("seq", ifPresent: seq)
        w.string("since", orNull: since)
        w.string("state", state)
        w.close()
    }
}

extension LevelStatePayload: WireWritable {
    public func write(to w: inout WireWriter) {
        w.open()
        w.integer("capacity", capacity)
        w.integer("free", orNull: free)
        w.integer("lane_count", orNull: laneCount)
        w.integer("occupied", orNull: occupied)
        w.string("source", source)
        w.integer("spots_occupied", spotsOccupied)
        w.integer("spots_sensed", spotsSensed)
        w.integer("spots_unknown", spotsUnknown)
        w.integer("unknown", unknown)
        w.close()
    }
}
