@testable import AgentKit
import Testing

/// What doctor draws from the running service's readings: a lane loop held far longer than a vehicle takes to cross
/// it, or a spot that never changed in a day, is evidence of wiring; a vehicle now is not (issue 22, item 2).
@Suite struct DoctorEvidenceTests {
    typealias Reading = BoardChecks.Reading

    @Test func aLaneLoopHeldActiveIsSuspectAndOneAVehicleIsCrossingIsNot() {
        let held = BoardChecks.occupancy([Reading(name: "lane P1-ramp loop a (GPIO20)", lane: true, active: true, heldSeconds: 45, changes: 1),
                                          Reading(name: "spot P1-A-01 (GPIO4)", lane: false, active: true, heldSeconds: 45, changes: 1)],
                                         all: 3, uptime: 600, emptyGarage: false)
        #expect(held.count == 2)
        #expect(held[0].status == .warning && held[0].title.hasPrefix("1 lane loop held active") && held[0].fix?.contains("active_low") == true,
                "\(held)")
        #expect(held[1].status == .ok && held[1].detail?.hasPrefix("spot P1-A-01 (GPIO4)") == true, "\(held)")

        let crossing = BoardChecks.occupancy([Reading(name: "lane P1-ramp loop a (GPIO20)", lane: true, active: true, heldSeconds: 2, changes: 7)],
                                             all: 3, uptime: 600, emptyGarage: false)
        #expect(crossing.count == 1 && crossing[0].status == .ok && crossing[0].fix == nil, "\(crossing)")
    }

    @Test func aSpotThatNeverChangedInADayIsSuspect() {
        let day = BoardChecks.occupancy([Reading(name: "spot P1-A-01 (GPIO4)", lane: false, active: true, heldSeconds: 90_000, changes: 0)],
                                        all: 1, uptime: 90_000, emptyGarage: false)
        #expect(day.count == 1 && day[0].status == .warning && day[0].fix?.contains("active_low") == true, "\(day)")
        // An hour after a start with a car on it: a parked car.
        let hour = BoardChecks.occupancy([Reading(name: "spot P1-A-01 (GPIO4)", lane: false, active: true, heldSeconds: 3600, changes: 0)],
                                         all: 1, uptime: 3600, emptyGarage: false)
        #expect(hour.count == 1 && hour[0].status == .ok, "\(hour)")
    }
}
