import Foundation
import Simulation
import Testing
import TestSupport
@testable import Uplink

@Suite struct OverflowPolicyTests {
    /// The outbox never gives up an event it is told to spare (the delivery ledger's: every event that may have reached
    /// the broker) while another is there, over seeded random outboxes of spot changes (superseded or not), faults,
    /// recoveries and passages: at worst the newest, which is never spared.
    @Test func aSparedEventIsNeverTheVictim() {
        var random = SeededRandom(seed: 0x0F_F10)
        let kinds: [(type: String, spot: String?, lane: String?)] = [
            ("spot.occupied", "A", nil), ("spot.vacated", "A", nil), ("spot.occupied", "B", nil), ("spot.vacated", "C", nil),
            ("lane.passage", nil, "ramp"), ("spot.checkout", "A", nil), ("lane.aborted", nil, "ramp"),
        ]
        for round in 0..<500 {
            let n = 2 + Int(random.next() % 40)
            let events = (0..<n).map { i in
                let kind = kinds[Int(random.next() % UInt64(kinds.count))]
                return entry(UInt64(i + 1), type: kind.type, spot: kind.spot, lane: kind.lane)
            }
            let sparing = Set(events.dropLast().map(\.event.seq).filter { _ in random.next() % 3 != 0 })
            let victim = OverflowPolicy.victim(in: events, sparing: sparing)
            #expect(victim.map { !sparing.contains(events[$0].event.seq) } == true, "round \(round)")
        }
    }

    /// A capacity lowered from the largest allowed: the start keeps every event (the last run may have sent them, and an
    /// event that may arrive is never given up), says so, and new events make room among themselves.
    @Test func aFullLargeOutboxReopenedWithASmallCapacityKeepsEveryEventItMayHaveSent() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 20_000)
            let batch = (1...20_000).map { entry(UInt64($0), type: "lane.passage", spot: nil, lane: "ramp") }
            #expect(outbox.append(batch, sparing: []).failure == nil)
        }
        let (small, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(small.pending.map(\.event.seq) == Array(1...20_000))
        #expect(small.lostAtOpen.isEmpty)
        #expect(problems.contains { $0.contains("outbox holds 20000 events for a capacity of 200: kept until the broker has them") },
                "\(problems)")
        let loaded = Set(small.pending.map(\.event.seq))
        let result = small.append([entry(20_001, type: "lane.passage", spot: nil, lane: "ramp")], sparing: loaded)
        #expect(result.dropped.map(\.event.seq) == [20_001], "the new event makes room, no loaded one")
        #expect(small.count == 20_000)
    }
}
