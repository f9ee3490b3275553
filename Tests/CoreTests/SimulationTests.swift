import ConfigFile
import ParkWiseCore
import Simulation
import Testing

@Suite struct SimulationTests {
    static func campus() throws -> AgentConfig {
        try ConfigFile.load(path: packageRoot + "/hardware/examples/campus.yaml")
    }

    /// Three simulated hours from 06:30 through the real garage model: the levels fill towards the
    /// morning profile and lane counts agree with what the spots see.
    @Test func aMorningFillsTheGarageFollowingTheProfile() throws {
        let config = try SimulationTests.campus()
        var sim = TrafficSimulator(config: config, seed: 7, startMinute: 6 * 60 + 30)
        var h = GarageHarness(config)
        for l in config.levels.indices { let ok1 = h.garage.calibrate(level: config.levels[l].id, count: 0); #expect(ok1) }
        let end = MonotonicInstant.milliseconds(3 * 3600 * 1000)
        var changes = 0
        while let change = sim.next() {
            let line = change.lineChange(startingAt: .milliseconds(0))
            if line.at > end { break }
            h.garage.handle(line, into: &h.events)
            changes += 1
        }
        h.garage.advance(to: end, into: &h.events)
        #expect(changes > 1000)
        #expect(!h.events.contains { $0.type == "sensor.fault" || $0.type == "lane.aborted" || $0.type == "level.drift" })
        // 09:30: target 0.95 × level factor.
        let p1 = h.garage.level(0)
        #expect(p1.spotsOccupied >= 45, "P1 at 09:30 has \(p1.spotsOccupied)/60")
        let p3 = h.garage.level(2)
        #expect(p3.spotsOccupied >= 30, "P3 at 09:30 has \(p3.spotsOccupied)/48")
        #expect(h.events.contains { $0.type == "spot.checkin" })
        // Lane counts: P1's count includes cars driving through to P2/P3 only while they are on it.
        let total = (0..<3).map { h.garage.level($0).laneCount ?? -1 }.reduce(0, +)
        let parked = (0..<3).map { h.garage.level($0).spotsOccupied }.reduce(0, +)
        #expect(abs(total - parked) <= 12, "lanes count \(total), spots see \(parked)")
    }

    @Test func theSameSeedGivesTheSameTraffic() throws {
        let config = try SimulationTests.campus()
        var a = TrafficSimulator(config: config, seed: 3, startMinute: 480)
        var b = TrafficSimulator(config: config, seed: 3, startMinute: 480)
        for _ in 0..<2000 { #expect(a.next() == b.next()) }
    }

    @Test func tracesParseAndRejectWithLineNumbers() throws {
        let config = try parse(minimal)
        let trace = """
        {"parkwise_trace": 1}
        {"t_ms": 0, "input": "GPIO17", "value": 1}

        {"t_ms": 1200, "input": "pin 13", "value": 1}
        """
        let changes = try TraceFile.parse(Array(trace.utf8), inputs: config.inputs)
        #expect(changes == [TimedChange(offset: .zero, input: 0, active: true),
                            TimedChange(offset: .milliseconds(1200), input: 1, active: true)])
        #expect(TraceFile.line(changes[1], inputs: config.inputs) == "{\"t_ms\": 1200, \"input\": \"GPIO27\", \"value\": 1}")
        do {
            _ = try TraceFile.parse(Array("{\"t_ms\": 5, \"input\": \"GPIO17\", \"value\": 1}\n{\"t_ms\": 4, \"input\": \"GPIO5\", \"value\": 1}".utf8),
                                    inputs: config.inputs)
            Issue.record("expected failure")
        } catch {
            #expect(error.line == 2)
        }
    }
}

extension SimulationTests {
    /// One sensed spot on a 48-space level: its vehicle never leaves and nobody else can park; the
    /// simulation ends instead of planning empty minutes forever (it hung `run --simulate`; found by fuzzing).
    @Test func aGarageWhoseTrafficStallsEndsTheSimulation() throws {
        let config = try parse(minimal.replacingOccurrences(of: "  - { id: P2-ramp, from: outside, to: P2, loops: { a: GPIO17, b: GPIO27 } }\n", with: "")
            .replacingOccurrences(of: "lanes:\n", with: ""))
        var simulator = TrafficSimulator(config: config, seed: 7, startMinute: 8 * 60)
        var changes: [TimedChange] = []
        while changes.count < 1000, let change = simulator.next() { changes.append(change) }
        #expect(!changes.isEmpty && changes.count < 1000)
        #expect(simulator.next() == nil)
    }
}
