import FoundationEssentials
import ParkWiseContract
import Testing
import Uplink

@Suite struct OutboxEntryTests {
    func entry(clock: String, kernelBoot: String = "k1", type: String = "spot.checkout") -> OutboxEntry {
        var event = EventPayload(id: "e1", seq: 4, boot: 2, type: type, at: "1970-01-01T00:00:10.000Z", clock: clock)
        event.arrival = "1970-01-01T00:00:01.000Z"
        event.departure = event.at
        return OutboxEntry(event: event, atMonotonic: 10_000_000_000, arrivalMonotonic: 1_000_000_000, kernelBoot: kernelBoot)
    }

    /// NTP set the clock 20 minutes ahead of what the board believed.
    let wall: (Int64) -> String = { WireTime.format(unixNanoseconds: 1_800_000_000_000_000_000 + $0) }

    @Test func unsyncedTimesAreRecomputedFromMonotonicInstants() {
        let fixed = entry(clock: "unsynced").corrected(kernelBoot: "k1", wallTime: wall)
        #expect(fixed.event.clock == "corrected")
        #expect(fixed.event.at == "2027-01-15T08:00:10.000Z")
        #expect(fixed.event.arrival == "2027-01-15T08:00:01.000Z")
        #expect(fixed.event.departure == fixed.event.at)
        #expect(fixed.event.id == "e1")
        #expect(fixed.event.seq == 4)
        #expect(fixed.wire == WireJSON.encode(fixed.event), "the bytes it is published with are the corrected event's")
    }

    /// The published bytes are encoded once, and follow the event: built, changed, and read back from the outbox file.
    @Test func theWireBytesAreTheEventsOwn() throws {
        var e = entry(clock: "synced")
        #expect(e.wire == WireJSON.encode(e.event))
        e.event.reason = "a/b"
        #expect(e.wire == WireJSON.encode(e.event))
        let read = try JSONDecoder().decode(OutboxEntry.self, from: Data(WireJSON.encode(e)))
        #expect(read == e)
        #expect(read.wire == WireJSON.encode(e.event))
        e.event.staySeconds = .nan
        #expect(!e.encodable && e.wire == Array("{}".utf8), "what JSON cannot hold is refused, as JSONEncoder throws")
    }

    @Test func syncedOrOtherBootEventsAreLeftAlone() {
        #expect(entry(clock: "synced").corrected(kernelBoot: "k1", wallTime: wall) == entry(clock: "synced"))
        let otherBoot = entry(clock: "unsynced", kernelBoot: "k0")
        #expect(otherBoot.corrected(kernelBoot: "k1", wallTime: wall) == otherBoot)
    }
}
