import Foundation
import Simulation
import Testing
import TestSupport
@testable import Uplink

@Suite struct OverflowPolicyTests {
    /// The one-pass choice a start makes when it finds more events than the capacity takes what `victim`, called once per
    /// event, would take, in the same order: over seeded random outboxes of spot changes (superseded or not), faults,
    /// recoveries and passages (never superseded).
    @Test func victimsInOnePassAreTheOnesVictimTakesOneByOne() {
        var random = SeededRandom(seed: 0x0F_F10)
        let kinds: [(type: String, spot: String?, lane: String?)] = [
            ("spot.occupied", "A", nil), ("spot.vacated", "A", nil), ("spot.occupied", "B", nil), ("spot.vacated", "C", nil),
            ("lane.passage", nil, "ramp"), ("spot.checkout", "A", nil), ("lane.aborted", nil, "ramp"),
        ]
        for round in 0..<500 {
            let n = 1 + Int(random.next() % 40)
            let events = (0..<n).map { i in
                let kind = kinds[Int(random.next() % UInt64(kinds.count))]
                return entry(UInt64(i + 1), type: kind.type, spot: kind.spot, lane: kind.lane)
            }
            let count = Int(random.next() % UInt64(n + 1))
            var left = events
            var oneByOne: [UInt64] = []
            for _ in 0..<count { oneByOne.append(left.remove(at: OverflowPolicy.victim(in: left)).event.seq) }
            #expect(OverflowPolicy.victims(in: events, count: count).map { events[$0].event.seq } == oneByOne, "round \(round)")
        }
    }

    /// A capacity lowered from the largest allowed: the start keeps the newest events it can hold and declares the rest.
    @Test func aFullLargeOutboxReopenedWithASmallCapacityKeepsItsNewestAndDeclaresTheRest() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 20_000)
            let batch = (1...20_000).map { entry(UInt64($0), type: "lane.passage", spot: nil, lane: "ramp") }
            #expect(outbox.append(batch, sparing: []).failure == nil)
        }
        let (small, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(small.pending.map(\.event.seq) == Array(19_801...20_000))
        #expect(small.lostAtOpen.reduce(0) { $0 + $1.count } == 19_800)
        #expect(problems.contains { $0.contains("outbox held 20000 events for a capacity of 200: 19800 dropped and declared") }, "\(problems)")
    }
}
