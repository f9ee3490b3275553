import ParkWiseContract
import Uplink

/// Nanoseconds per payload encode on the edge path: the hand-written writer (`WireJSON.encode`) next to JSONEncoder
/// (`WireJSON.encodeWithFoundation`), for the event, spot state and level state payloads an edge publishes and the
/// outbox entry it stores.
func wireBench(count: Int) {
    var arrived = EventPayload(id: "6f1c2a9e-3b7d-4e21-9a5f-0c8d7e6b5a41", seq: 123_456, boot: 17, type: "spot.occupied",
                               at: "2026-11-29T14:03:07.250Z", clock: "synced")
    arrived.spot = "P2-B-07"
    arrived.level = "P2"
    var left = arrived
    left.type = "spot.freed"
    left.arrival = "2026-11-29T12:41:55.125Z"
    left.departure = "2026-11-29T14:03:07.250Z"
    left.staySeconds = 4872.125
    let spot = SpotStatePayload(state: "occupied", since: "2026-11-29T14:03:07.250Z", checkedIn: false, seq: 123_456)
    let level = LevelStatePayload(capacity: 48, occupied: 31, source: "spots", spotsSensed: 48, spotsOccupied: 31,
                                  spotsUnknown: 0, laneCount: 29)
    measure("event (spot.occupied)", count, fast: { WireJSON.encode(arrived) }, slow: { WireJSON.encodeWithFoundation(arrived) })
    measure("event (with stay_s)", count, fast: { WireJSON.encode(left) }, slow: { WireJSON.encodeWithFoundation(left) })
    measure("spot state", count, fast: { WireJSON.encode(spot) }, slow: { WireJSON.encodeWithFoundation(spot) })
    measure("level state", count, fast: { WireJSON.encode(level) }, slow: { WireJSON.encodeWithFoundation(level) })
    // The outbox's `add` record holds this (there slashes are escaped; the event has none).
    let entry = OutboxEntry(event: left, atMonotonic: 5_023_117_250_000_000, arrivalMonotonic: 5_018_245_125_000_000,
                            kernelBoot: "0b3c5e7a-91d2-4f6e-8a1b-2c3d4e5f6a7b")
    measure("outbox entry", count, fast: { WireJSON.encode(entry) }, slow: { WireJSON.encodeWithFoundation(entry) })
}

private func measure(_ name: String, _ count: Int, fast: () -> [UInt8], slow: () -> [UInt8]) {
    func nanosPerCall(_ encode: () -> [UInt8]) -> Double {
        var bytes = 0
        for _ in 0..<count / 10 { bytes &+= encode().count }   // warm up
        let start = now()
        for _ in 0..<count { bytes &+= encode().count }
        let seconds = now() - start
        if bytes == 0 { print("wire: nothing encoded") }   // keeps the loop from being optimized away
        return seconds * 1e9 / Double(count)
    }
    let slowNs = nanosPerCall(slow), fastNs = nanosPerCall(fast)
    print("wire: \(name): JSONEncoder \(Int(slowNs)) ns, hand-written \(Int(fastNs)) ns per encode"
          + " (\(String(format: slowNs / fastNs))x; \(fast() == slow() ? "same bytes" : "BYTES DIFFER"))")
}
