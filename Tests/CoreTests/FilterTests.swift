import ParkWiseCore
import Simulation
import Testing

@Suite struct FilterTests {
    /// Spot input index in a one-lane, one-spot garage.
    let spot = 2

    @Test func occupancyCountsFromTheEdgeNotTheDelay() {
        var h = GarageHarness(garageConfig())
        h.edge(spot, true, at: 1000)
        h.advance(to: 5999)
        #expect(h.take() == [])
        h.advance(to: 6000)
        #expect(h.take() == ["spot.occupied@1000"])
    }

    @Test func aBurstOfBouncesSettlesOnTheFinalLevel() {
        var h = GarageHarness(garageConfig())
        var t: Int64 = 1000
        for i in 0..<25 { h.edge(spot, i % 2 == 0, at: t); t += 7 }   // ends active at 1168
        h.advance(to: 1168 + 4999)
        #expect(h.take() == [])
        h.advance(to: 1168 + 5000)
        #expect(h.take() == ["spot.occupied@1168"])
        #expect(h.garage.spot(0).occupancy == .occupied)
    }

    @Test func aShortPulseNeverSticks() {
        var h = GarageHarness(garageConfig())
        h.edge(spot, true, at: 1000)
        h.edge(spot, false, at: 1200)   // passer-by, shorter than delayed_on
        h.advance(to: 60_000)
        #expect(h.take() == [])
        #expect(h.garage.spot(0).occupancy == .free)
    }

    /// Random edge trains on a spot: whatever the train, the filtered state ends at the last level
    /// that held long enough, and events alternate (never the same state twice).
    @Test(arguments: 1...40)
    func randomTrainsEndAtTheStableLevelWithoutDuplicates(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var h = GarageHarness(garageConfig(spotOn: "300ms", spotOff: "500ms"))
        var t: Int64 = 0
        var level = false
        for _ in 0..<Int.random(in: 1...200, using: &random) {
            t += Int64.random(in: 1...900, using: &random)
            level.toggle()
            h.edge(spot, level, at: t)
        }
        h.advance(to: t + 10_000)
        let types = h.events.map(\.type).filter { $0 == "spot.occupied" || $0 == "spot.vacated" }
        for (a, b) in zip(types, types.dropFirst()) { #expect(a != b) }
        #expect(h.garage.spot(0).occupancy == (level ? .occupied : .free))
        if let last = types.last { #expect(last == (level ? "spot.occupied" : "spot.vacated")) }
        let times = h.events.map(\.at)
        #expect(times == times.sorted())
    }
}

@Suite struct SpotTests {
    let spot = 2

    @Test func checkinCarriesArrivalAndCheckoutTheStay() {
        var h = GarageHarness(garageConfig())
        h.edge(spot, true, at: 10_000)
        h.advance(to: 10_000 + 120_000)
        #expect(h.events.last?.kind == .spotCheckin(spot: "P1-A-01", level: "P1", arrival: .milliseconds(10_000)))
        #expect(h.take() == ["spot.occupied@10000", "spot.checkin@130000"])
        h.edge(spot, false, at: 3_600_000)
        h.advance(to: 3_610_000)
        let events = h.events
        #expect(events.map(\.type) == ["spot.vacated", "spot.checkout"])
        if case .spotCheckout(let id, let level, let arrived) = events[1].kind {
            #expect(id == "P1-A-01")
            #expect(level == "P1")
            #expect(arrived == .milliseconds(10_000))
            #expect(events[1].at == .milliseconds(3_600_000))
        } else { Issue.record("expected a checkout") }
    }

    @Test func aShortStayIsNoCheckin() {
        var h = GarageHarness(garageConfig())
        h.edge(spot, true, at: 0)
        h.edge(spot, false, at: 60_000)
        h.advance(to: 600_000)
        #expect(h.take() == ["spot.occupied@0", "spot.vacated@60000"])
    }

    @Test func aVehiclePresentAtStartIsStateWithoutEvent() {
        var h = GarageHarness(garageConfig(), initial: [false, false, true])
        h.advance(to: 600_000)
        #expect(h.take() == [])
        #expect(h.garage.spot(0).occupancy == .occupied)
        #expect(h.garage.spot(0).since == nil)
        let level = h.garage.level(0)
        #expect(level.spotsOccupied == 1)
    }
}
