import ParkWiseContract
import ParkWiseCore
import Testing

/// How a level is reported: from its spots when every space has a sensor (an unknown spot makes the counts
/// bounds), from a lane count otherwise.
@Suite struct LevelStateTests {
    /// The campus's P1: 60 spaces, 60 spot sensors (inputs 8...67 after the four lanes' loops).
    static let p1Spot = 8

    /// Two cars parked on P1 and one spot faulted, with a lane count of 57 left over from an earlier run: the level is
    /// still counted from its 59 sensed spots, 57 known free and 1 unknown, never from the lane count.
    @Test func oneFaultedSpotOfSixtyLeavesTheLevelOnItsSpotsWithOneUnknown() throws {
        let config = try SimulationTests.campus()
        var h = GarageHarness(config)
        #expect(config.levels[0].id == "P1" && config.levels[0].capacity == 60)
        h.edge(LevelStateTests.p1Spot, true, at: 0)
        h.edge(LevelStateTests.p1Spot + 1, true, at: 0)
        h.advance(to: 60_000)
        let calibrated = h.garage.calibrate(level: "P1", count: 57)
        #expect(calibrated)
        #expect(h.garage.level(0).source == "spots" && h.garage.level(0).occupied == 2 && h.garage.level(0).unknown == 0)
        h.garage.inputLost(LevelStateTests.p1Spot + 2, at: .milliseconds(61_000), into: &h.events)

        let level = h.garage.level(0)
        #expect(level.spotsSensed == 60 && level.spotsOccupied == 2 && level.spotsUnknown == 1 && level.laneCount == 57)
        #expect(level.source == "spots")
        #expect(level.occupied == 2)
        #expect(level.free == 57)
        #expect(level.unknown == 1)
    }

    /// Every spot of a fully sensed level unknown (its chip gone): nothing is known, and the lane count is not used.
    @Test func aFullySensedLevelWithEverySpotUnknownIsUnknown() throws {
        let config = try SimulationTests.campus()
        var h = GarageHarness(config)
        let calibrated = h.garage.calibrate(level: "P1", count: 12)
        #expect(calibrated)
        for s in 0..<60 { h.garage.inputLost(LevelStateTests.p1Spot + s, at: .milliseconds(1_000), into: &h.events) }
        let level = h.garage.level(0)
        #expect(level.spotsUnknown == 60)
        #expect(level.source == "unknown" && level.occupied == nil && level.free == nil && level.unknown == 60)
    }

    /// A level only some spaces of which have sensors is counted at its lanes, a faulted spot sensor or not; without
    /// a lane count it is unknown.
    @Test func aPartiallySensedLevelStillUsesItsLaneCount() {
        var h = GarageHarness(garageConfig(spots: 1))
        #expect(h.garage.level(0).source == "unknown" && h.garage.level(0).occupied == nil && h.garage.level(0).unknown == 60)
        let calibrated = h.garage.calibrate(level: "P1", count: 4)
        #expect(calibrated)
        var level = h.garage.level(0)
        #expect(level.source == "lanes" && level.occupied == 4 && level.free == 56 && level.unknown == 0)
        h.garage.inputLost(2, at: .milliseconds(1_000), into: &h.events)
        level = h.garage.level(0)
        #expect(level.spotsSensed == 1 && level.spotsUnknown == 1)
        #expect(level.source == "lanes" && level.occupied == 4 && level.free == 56 && level.unknown == 0)
    }

    /// On the wire: the new `unknown` beside the old fields, and a payload from an agent before it (no `unknown`)
    /// decodes with the value that agent meant.
    @Test func theLevelPayloadCarriesUnknownAndOldPayloadsStillDecode() throws {
        let payload = LevelStatePayload(capacity: 60, occupied: 2, source: "spots", spotsSensed: 60, spotsOccupied: 2,
                                        spotsUnknown: 1, laneCount: 57, unknown: 1)
        let json = String(decoding: WireJSON.encode(payload), as: UTF8.self)
        #expect(json == #"{"capacity":60,"free":57,"lane_count":57,"occupied":2,"source":"spots","spots_occupied":2,"spots_sensed":60,"spots_unknown":1,"unknown":1}"#)
        #expect(WireJSON.encodeWithFoundation(payload) == WireJSON.encode(payload))
        #expect(WireJSON.decode(LevelStatePayload.self, from: Array(json.utf8)) == payload)

        let old = { (source: String, occupied: String) in
            Array(#"{"capacity":48,"free":null,"lane_count":null,"occupied":\#(occupied),"source":"\#(source)","spots_occupied":0,"spots_sensed":48,"spots_unknown":0}"#.utf8)
        }
        #expect(WireJSON.decode(LevelStatePayload.self, from: old("spots", "3"))?.unknown == 0)
        #expect(WireJSON.decode(LevelStatePayload.self, from: old("lanes", "3"))?.unknown == 0)
        #expect(WireJSON.decode(LevelStatePayload.self, from: old("unknown", "null"))?.unknown == 48)
    }
}
