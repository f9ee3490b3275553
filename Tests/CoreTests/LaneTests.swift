import ParkWiseCore
import Simulation
import Testing

@Suite struct LaneTests {
    // Loops of lane0: a = input 0, b = input 1. Loop filter 50 ms.

    /// A car crossing a then b: a on, b on, a off, b off.
    static func crossing(_ h: inout GarageHarness, forward: Bool = true, at t: Int64) {
        let (first, second) = forward ? (0, 1) : (1, 0)
        h.edge(first, true, at: t)
        h.edge(second, true, at: t + 500)
        h.edge(first, false, at: t + 1500)
        h.edge(second, false, at: t + 2000)
    }

    @Test func forwardIsAPassageInReverseTheOtherWay() {
        var h = GarageHarness(garageConfig(spots: 0))
        let ok1 = h.garage.calibrate(level: "P1", count: 10); #expect(ok1)
        LaneTests.crossing(&h, at: 1000)
        h.advance(to: 5000)
        #expect(h.events.map(\.kind) == [.lanePassage(lane: "lane0", from: "outside", to: "P1")])
        #expect(h.events.map(\.at) == [.milliseconds(3000)])
        h.events.removeAll()
        LaneTests.crossing(&h, forward: false, at: 10_000)
        h.advance(to: 15_000)
        #expect(h.events.map(\.kind) == [.lanePassage(lane: "lane0", from: "P1", to: "outside")])
        #expect(h.garage.level(0).laneCount == 10)
    }

    @Test func backingOutIsAbortedAndNotCounted() {
        var h = GarageHarness(garageConfig(spots: 0))
        let ok2 = h.garage.calibrate(level: "P1", count: 3); #expect(ok2)
        h.edge(0, true, at: 1000)
        h.edge(1, true, at: 1500)
        h.edge(1, false, at: 2500)   // backs off b
        h.edge(0, false, at: 3500)   // and out over a
        h.advance(to: 5000)
        #expect(h.take() == ["lane.aborted@3500"])
        #expect(h.garage.level(0).laneCount == 3)
    }

    @Test func aPedestrianIsIgnored() {
        var h = GarageHarness(garageConfig(spots: 0))
        h.edge(0, true, at: 1000)
        h.edge(1, true, at: 1100)
        h.edge(0, false, at: 1200)
        h.edge(1, false, at: 1300)   // 300 ms in the lane: shorter than min_presence (400 ms)
        h.advance(to: 5000)
        #expect(h.take() == [])
    }

    @Test func tailgatingCountsTwo() {
        var h = GarageHarness(garageConfig(spots: 0))
        let ok3 = h.garage.calibrate(level: "P1", count: 0); #expect(ok3)
        h.edge(0, true, at: 1000)    // car 1 on a
        h.edge(1, true, at: 1500)    // car 1 spans both
        h.edge(0, false, at: 2500)   // car 1 only on b
        h.edge(0, true, at: 2800)    // car 2 on a, nose to tail
        h.edge(1, false, at: 3000)   // car 1 gone: passage
        h.edge(1, true, at: 3300)    // car 2 spans both
        h.edge(0, false, at: 4300)
        h.edge(1, false, at: 4800)   // car 2 gone: passage
        h.advance(to: 6000)
        #expect(h.take() == ["lane.passage@3000", "lane.passage@4800"])
        #expect(h.garage.level(0).laneCount == 2)
    }

    @Test func aLoopHeldTooLongIsAFaultNotTraffic() {
        var h = GarageHarness(garageConfig(spots: 0, maxPresence: "30s"))
        let ok4 = h.garage.calibrate(level: "P1", count: 5); #expect(ok4)
        h.edge(0, true, at: 1000)
        h.advance(to: 60_000)
        #expect(h.events.map(\.kind) == [.sensorFault(subject: "lane lane0", input: "GPIO2", reason: .stuck)])
        #expect(h.events.map(\.at) == [.milliseconds(31_000)])
        #expect(h.garage.level(0).laneCount == nil, "a stuck lane makes the count unknown")
        h.events.removeAll()
        h.edge(0, false, at: 70_000)
        h.advance(to: 71_000)
        #expect(h.events.map(\.kind) == [.sensorRecovered(subject: "lane lane0", input: "GPIO2")])
    }

    @Test func levelCountIsUnknownUntilCalibratedAndClamped() {
        var h = GarageHarness(garageConfig(spots: 0))
        LaneTests.crossing(&h, at: 1000)
        h.advance(to: 5000)
        #expect(h.garage.level(0).laneCount == nil)
        #expect(h.garage.level(0).occupied == nil)
        let ok5 = h.garage.calibrate(level: "P1", count: 0); #expect(ok5)
        let ok6 = h.garage.calibrate(level: "P1", count: 61); #expect(!ok6)
        let ok7 = h.garage.calibrate(level: "P9", count: 1); #expect(!ok7)
        h.events.removeAll()
        LaneTests.crossing(&h, forward: false, at: 10_000)
        h.advance(to: 15_000)
        #expect(h.events.map(\.kind).last == .levelDrift(level: "P1", counted: -1, clampedTo: 0))
        #expect(h.garage.level(0).laneCount == 0)
    }

    /// Random traffic (random lengths, speeds, gaps, directions, nose-to-tail) through one lane:
    /// every passage recovered exactly, in its direction, and nothing else reported.
    @Test(arguments: 1...30)
    func randomValidTrafficIsCountedExactly(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var h = GarageHarness(garageConfig(spots: 0))
        var t: Int64 = 1000
        var expected: [GarageEvent.Kind] = []
        for _ in 0..<Int.random(in: 1...40, using: &random) {
            let forward = Bool.random(using: &random)
            let (first, second) = forward ? (0, 1) : (1, 0)
            let reach = Int64.random(in: 200...900, using: &random)      // front reaches the second loop
            let clear = Int64.random(in: 300...2000, using: &random)     // tail leaves the first loop
            let exit = Int64.random(in: 200...900, using: &random)       // tail leaves the second loop
            h.edge(first, true, at: t)
            h.edge(second, true, at: t + reach)
            h.edge(first, false, at: t + reach + clear)
            h.edge(second, false, at: t + reach + clear + exit)
            expected.append(.lanePassage(lane: "lane0", from: forward ? "outside" : "P1", to: forward ? "P1" : "outside"))
            t += reach + clear + exit + Int64.random(in: 100...5000, using: &random)
        }
        h.advance(to: t + 10_000)
        #expect(h.events.map(\.kind) == expected)
    }

    /// Chatter on one loop (no car crossing both): never a phantom passage.
    @Test(arguments: 1...20)
    func chatterOnOneLoopIsNeverAPassage(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var h = GarageHarness(garageConfig(spots: 0))
        var t: Int64 = 0
        var level = false
        for _ in 0..<200 {
            t += Int64.random(in: 1...3000, using: &random)
            level.toggle()
            h.edge(0, level, at: t)
        }
        h.advance(to: t + 200_000)
        #expect(!h.events.contains { $0.type == "lane.passage" })
    }
}
