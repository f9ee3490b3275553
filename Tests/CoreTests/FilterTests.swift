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
        // Chatter detection off: this is about the filter alone.
        var h = GarageHarness(garageConfig(spotOn: "300ms", spotOff: "500ms", spotChatterLimit: 10_000))
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

@Suite struct SettleFilterTests {
    @Test func settleReportsAtOnceThenTakesTheLevelItSettledAt() throws {
        let config = try parse("""
            site: s
            device: d
            levels: [ { id: P1, capacity: 5 } ]
            spots: [ { id: P1-A-01, input: GPIO5, settle: 1s } ]
            """)
        var h = GarageHarness(config)
        h.edge(0, true, at: 1000)       // reported at once
        h.edge(0, false, at: 1100)      // ignored while settling...
        h.edge(0, true, at: 1200)
        h.edge(0, false, at: 1300)      // ...but the window ends low: vacated, from the last edge
        h.advance(to: 2000)
        #expect(h.take() == ["spot.occupied@1000", "spot.vacated@1300"])
        h.advance(to: 10_000)
        #expect(h.take() == [])
        h.edge(0, true, at: 20_000)
        h.edge(0, false, at: 20_500)
        h.edge(0, true, at: 20_700)     // ends where it began: nothing more
        h.advance(to: 30_000)
        #expect(h.take() == ["spot.occupied@20000"])
    }

    @Test func settleAndDelaysDoNotMix() {
        let found = issues("site: s\ndevice: d\nlevels: [ { id: P1, capacity: 5 } ]\n"
                           + "spots: [ { id: P1-A-01, input: GPIO5, settle: 1s, delayed_on: 2s } ]\n")
        #expect(found.map(\.message) == ["settle and delayed_on/delayed_off do not go together"])
    }
}

@Suite struct HealthTests {
    let spot = 2

    @Test func aFlappingSpotSensorIsChatterThenRecoversWhenQuiet() {
        var h = GarageHarness(garageConfig(spotOn: "1s", spotOff: "1s"))
        var t: Int64 = 0
        for i in 0..<21 { t = Int64(i) * 2000; h.edge(spot, i % 2 == 0, at: t) }   // every 2 s
        #expect(h.events.map(\.kind).contains(.sensorFault(subject: "spot P1-A-01", input: "GPIO4", reason: .chatter)))
        #expect(h.garage.spot(0).occupancy == .unknown, "never free while it cannot be trusted")
        h.events.removeAll()
        h.advance(to: t + 29_999)
        #expect(h.take() == [])
        h.advance(to: t + 30_000)
        #expect(h.events.map(\.kind) == [.sensorRecovered(subject: "spot P1-A-01", input: "GPIO4")])
        #expect(h.garage.spot(0).occupancy == .occupied)   // the 21st edge left it active
    }

    @Test func contactBounceIsNotChatter() {
        var h = GarageHarness(garageConfig())
        for car in 0..<6 {
            let t = Int64(car) * 40_000
            for i in 0..<9 { h.edge(spot, i % 2 == 0, at: t + Int64(i) * 5) }          // arrives, bouncing
            for i in 0..<9 { h.edge(spot, i % 2 == 1, at: t + 15_000 + Int64(i) * 5) } // leaves, bouncing
        }
        h.advance(to: 300_000)
        #expect(!h.events.contains { $0.type == "sensor.fault" })
        #expect(h.events.filter { $0.type == "spot.occupied" }.count == 6)
    }

    @Test func aSpotHeldForDaysIsStuck() {
        var h = GarageHarness(garageConfig(spotStuckAfter: "1h"))
        h.edge(spot, true, at: 0)
        h.advance(to: 3_600_000)
        #expect(h.events.map(\.kind).last == .sensorFault(subject: "spot P1-A-01", input: "GPIO4", reason: .stuck))
        #expect(h.events.last?.at == .milliseconds(3_600_000))
        #expect(h.garage.spot(0).occupancy == .unknown)
        h.events.removeAll()
        h.edge(spot, false, at: 4_000_000)
        h.advance(to: 4_100_000)
        // The stay the events opened (occupied, checked in after 2m) is closed when the sensor comes back free.
        #expect(h.events.map(\.kind) == [.sensorRecovered(subject: "spot P1-A-01", input: "GPIO4"),
                                         .spotVacated(spot: "P1-A-01", level: "P1"),
                                         .spotCheckout(spot: "P1-A-01", level: "P1", arrival: .milliseconds(0))])
        #expect(h.events.allSatisfy { $0.at == .milliseconds(4_000_000) })
        #expect(h.garage.spot(0).occupancy == .free)
    }

    @Test func aChatteringSpotThatComesBackFreeClosesTheStay() {
        var h = GarageHarness(garageConfig(spotOn: "1s", spotOff: "1s", checkin: "10s"))
        h.edge(spot, true, at: 0)
        h.advance(to: 20_000)
        #expect(h.take() == ["spot.occupied@0", "spot.checkin@10000"])
        for i in 0..<21 { h.edge(spot, i % 2 == 1, at: 30_000 + Int64(i) * 100) }   // flaps, ends inactive
        #expect(h.garage.spot(0).occupancy == .unknown)
        h.advance(to: 200_000)
        #expect(h.take() == ["sensor.fault@31900", "sensor.recovered@62000", "spot.vacated@62000", "spot.checkout@62000"])
        #expect(h.garage.spot(0).occupancy == .free)
    }

    @Test func aChatteringSpotThatComesBackOccupiedKeepsTheStayOpen() {
        var h = GarageHarness(garageConfig(spotOn: "1s", spotOff: "1s", checkin: "10s"))
        h.edge(spot, true, at: 0)
        h.advance(to: 20_000)
        h.events.removeAll()
        for i in 0..<22 { h.edge(spot, i % 2 == 1, at: 30_000 + Int64(i) * 100) }   // flaps, ends active
        h.advance(to: 200_000)
        #expect(h.take() == ["sensor.fault@31900", "sensor.recovered@62100"])
        h.edge(spot, false, at: 300_000)
        h.advance(to: 302_000)
        #expect(h.events.map(\.kind) == [.spotVacated(spot: "P1-A-01", level: "P1"),
                                         .spotCheckout(spot: "P1-A-01", level: "P1", arrival: .milliseconds(0))])
    }

    @Test func aSpotFreeWhenItFaultedRecoversWithoutEvents() {
        var h = GarageHarness(garageConfig(spotOn: "1s", spotOff: "1s"))
        for i in 0..<22 { h.edge(spot, i % 2 == 0, at: Int64(i) * 100) }
        h.advance(to: 100_000)
        #expect(h.events.map(\.type) == ["sensor.fault", "sensor.recovered"])
        #expect(!h.events.contains { $0.type.hasPrefix("spot.") })
        #expect(h.garage.spot(0).occupancy == .free)
    }

    @Test func aChatteringLoopMakesItsLevelsUnknownAndCountsNoPhantoms() {
        var h = GarageHarness(garageConfig(spots: 0))
        let ok = h.garage.calibrate(level: "P1", count: 4)
        #expect(ok)
        for i in 0..<400 { h.edge(0, i % 2 == 0, at: Int64(i) * 150) }
        h.advance(to: 400 * 150 + 60_000)
        #expect(h.events.first?.kind == .sensorFault(subject: "lane lane0", input: "GPIO2", reason: .chatter))
        #expect(!h.events.contains { $0.type == "lane.passage" })
        #expect(h.garage.level(0).laneCount == nil)
        #expect(h.events.last?.kind == .sensorRecovered(subject: "lane lane0", input: "GPIO2"))
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

@Suite struct LostInputTests {
    @Test func aLostInputMakesItsSpotUnknownForGood() {
        var h = GarageHarness(garageConfig())
        h.edge(2, true, at: 0)
        h.advance(to: 10_000)
        h.events.removeAll()
        h.garage.inputLost(2, at: .milliseconds(20_000), into: &h.events)
        #expect(h.events.map(\.kind) == [.sensorFault(subject: "spot P1-A-01", input: "GPIO4", reason: .lost)])
        #expect(h.garage.spot(0).occupancy == .unknown)
        h.events.removeAll()
        h.edge(2, false, at: 30_000)
        h.advance(to: 3_600_000)
        h.garage.inputLost(2, at: .milliseconds(3_600_000), into: &h.events)
        #expect(h.events.isEmpty, "no recovery, no second fault")
        #expect(h.garage.spot(0).occupancy == .unknown)
    }

    /// A line busy at start is lost until the board gets it: then its level is the spot's state, and edges count again.
    @Test func aRegainedInputIsReadAgainFromItsLevelThen() {
        var h = GarageHarness(garageConfig())
        h.garage.inputLost(2, at: .milliseconds(0), into: &h.events)
        h.edge(2, true, at: 5_000)
        h.events.removeAll()
        h.garage.inputRegained(2, active: true, at: .milliseconds(10_000), into: &h.events)
        #expect(h.events.map(\.kind) == [.sensorRecovered(subject: "spot P1-A-01", input: "GPIO4")])
        #expect(h.garage.spot(0).occupancy == .occupied)
        #expect(!h.garage.everyInputLost && h.garage.faultedInputCount == 0)
        h.events.removeAll()
        h.edge(2, false, at: 20_000)
        h.advance(to: 60_000)
        #expect(h.events.contains { if case .spotVacated = $0.kind { true } else { false } }, "\(h.events)")
        #expect(h.garage.spot(0).occupancy == .free)
        h.events.removeAll()
        h.garage.inputRegained(2, active: true, at: .milliseconds(70_000), into: &h.events)
        #expect(h.events.isEmpty, "an input that is not lost is not regained")
        #expect(h.garage.spot(0).occupancy == .free)
    }

    /// Under load the line queue keeps only each input's last change: one that supersedes the regained change keeps the
    /// mark, so the garage regains the input at the later level instead of dropping it for an input still lost.
    @Test func aChangeSupersedingARegainedOneRegainsTheInputAtItsLevel() {
        let regained = LineChange(input: 2, active: true, at: .milliseconds(10_000), regained: true)
        let later = LineChange(input: 2, active: false, at: .milliseconds(10_050))
        #expect(later.superseding(regained).regained)
        #expect(!later.superseding(nil).regained && !later.superseding(later).regained)
        for marked in [true, false] {
            var h = GarageHarness(garageConfig())
            h.edge(2, true, at: 0)
            h.advance(to: 10_000)
            h.garage.inputLost(2, at: .milliseconds(1_000), into: &h.events)
            h.events.removeAll()
            h.garage.handle(marked ? later.superseding(regained) : later, into: &h.events)
            if marked {
                #expect(h.events.map(\.kind).contains(.sensorRecovered(subject: "spot P1-A-01", input: "GPIO4")), "\(h.events)")
                #expect(h.garage.spot(0).occupancy == .free)
            } else {
                #expect(h.events.isEmpty, "without the mark the change of a lost input is dropped: \(h.events)")
                #expect(h.garage.spot(0).occupancy == .unknown)
            }
        }
    }

    @Test func everyInputLostOnlyWhenTheLastOneGoes() {
        var h = GarageHarness(garageConfig(spots: 2))
        for input in 0..<3 {
            h.garage.inputLost(input, at: .milliseconds(1000), into: &h.events)
            #expect(!h.garage.everyInputLost, "input \(input + 1) of 4 lost")
        }
        h.garage.inputLost(3, at: .milliseconds(2000), into: &h.events)
        #expect(h.garage.everyInputLost)
    }

    @Test func losingTheWholeBoardFaultsEveryInput() {
        var h = GarageHarness(garageConfig(spots: 2))
        h.garage.inputLost(nil, at: .milliseconds(1000), into: &h.events)
        #expect(h.events.count == 4)
        #expect(h.events.allSatisfy { if case .sensorFault(_, _, .lost) = $0.kind { true } else { false } })
        #expect(h.garage.everyInputLost)
    }
}
