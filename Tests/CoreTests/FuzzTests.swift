import ConfigFile
import ParkWiseCore
import Simulation
import Testing

/// Bounded fuzzing with fixed seeds: mutated configs through the config reader, mutated traces
/// through the trace parser, and what either accepts through the garage. The oracle: no crash (a
/// trap ends the test run), a rejection is a clear issue with a place, and what is accepted runs.
@Suite struct FuzzTests {
    static let configSeeds: [(name: String, text: String)] = [
        ("minimal", minimal),
        ("campus", try! String(contentsOfFile: packageRoot + "/hardware/examples/campus.yaml", encoding: .utf8)),
        ("single-gate", try! String(contentsOfFile: packageRoot + "/hardware/examples/single-gate.yaml", encoding: .utf8)),
    ]

    static let configTokens = ["[", "]", "{", "}", ":", ": ", "- ", ",", "\n", "\n  ", "#", "'", "\"", "!", "!secret x ",
                               "!!str ", "&a ", "*a", "---\n", "...\n", "|\n", "? ", "~", "null", "GPIO41", "GPIO2", "pin 3",
                               "pin 1", "\"1-0020:GPA0\"", "mcp23017:GPB7", "outside", "P1", "P2", ", min_presence: 5m",
                               ", max_presence: 1ms", ", capacity: ten", ", stuck_after: 0", ", settle: 1s",
                               ", chatter_limit: 1", "board: raspberry-pi-5\n", "mqtts://h:0", "mqtt://[::1]:1883"]

    static let traceTokens = ["{", "}", "\"t_ms\": ", "\"value\": ", "\"input\": ", "\"GPIO17\"", "\"pin 13\"", "\"GPIO99\"",
                              "2", "-5", "1e30", "9300000000000", "31536000000", "31536000001", "null", "true", "\n",
                              "{\"parkwise_trace\": 2}", "{\"parkwise_trace\": 1}", ",", "\"x\": [1, 2]"]

    /// Ten years after the kernel booted: instants are large, as on a long-running board.
    static let origin = MonotonicInstant(nanoseconds: 10 * 365 * 86_400 * 1_000_000_000)

    @Test func mutatedConfigsAreReadOrRefusedClearly() {
        var accepted = 0, refused = 0, changesRun = 0
        let cases = fuzzCases(1500)
        for (n, seed) in Self.configSeeds.enumerated() {
            var mutator = FuzzMutator(seed: 0xC0F1_6000 + UInt64(n), tokens: Self.configTokens)
            let original = Array(seed.text.utf8)
            for i in 0..<cases / Self.configSeeds.count {
                let input = mutator.mutate(original)
                do {
                    let config = try ConfigFile.parse(input, file: "fuzz.yaml")
                    accepted += 1
                    changesRun += Self.runGarage(config, seed: UInt64(i))
                } catch {
                    refused += 1
                    #expect(!error.issues.isEmpty, "\(seed.name) case \(i)")
                    let lines = input.count(where: { $0 == 10 }) + 1
                    for issue in error.issues {
                        #expect((1...lines + 1).contains(issue.mark.line) && issue.mark.column >= 1 && !issue.message.isEmpty,
                                "\(seed.name) case \(i): \(issue)")
                    }
                }
            }
        }
        print("fuzz: \(accepted + refused) mutated configs: \(accepted) accepted (\(changesRun) simulated changes run), \(refused) refused")
        #expect(accepted > 0 && refused > 0, "the mutations explore both sides")
    }

    @Test func mutatedTracesAreReadOrRefusedClearly() throws {
        let config = try parse(minimal)
        let trace = """
        {"parkwise_trace": 1, "site": "uniandes", "device": "p2-east"}
        {"t_ms": 0, "input": "GPIO17", "value": 1}
        {"t_ms": 400, "input": "GPIO27", "value": 1}
        {"t_ms": 1200, "input": "GPIO17", "value": 0}
        {"t_ms": 1600, "input": "pin 13", "value": 0}
        {"t_ms": 2000, "input": "GPIO22", "value": 1}
        {"t_ms": 130000, "input": "GPIO22", "value": 0}
        """
        let lines = trace.split(separator: "\n").count
        var accepted = 0, refused = 0
        var mutator = FuzzMutator(seed: 0x7_2ACE, tokens: Self.traceTokens)
        for i in 0..<fuzzCases(1500) {
            let input = mutator.mutate(Array(trace.utf8))
            do {
                let changes = try TraceFile.parse(input, inputs: config.inputs)
                accepted += 1
                #expect(zip(changes, changes.dropFirst()).allSatisfy { $0.offset <= $1.offset }, "case \(i)")
                #expect(changes.allSatisfy { $0.offset >= .zero && $0.offset <= DurationText.longest }, "case \(i)")
                var garage = Garage(config: config)
                var events: [GarageEvent] = []
                garage.start(initial: Array(repeating: false, count: garage.inputCount), at: Self.origin)
                for change in changes { garage.handle(change.lineChange(startingAt: Self.origin), into: &events) }
                garage.advance(to: Self.origin + (changes.last?.offset ?? .zero) + .seconds(86_400), into: &events)
            } catch {
                refused += 1
                #expect(error.line >= 1 && error.line <= lines + 300 && !error.message.isEmpty, "case \(i): \(error)")
            }
        }
        print("fuzz: \(accepted + refused) mutated traces: \(accepted) accepted and replayed through the garage, \(refused) refused")
        #expect(accepted > 0 && refused > 0, "the mutations explore both sides")
    }

    /// Simulated traffic through the garage a config describes, from a late instant; the changes run.
    static func runGarage(_ config: AgentConfig, seed: UInt64) -> Int {
        var simulator = TrafficSimulator(config: config, seed: seed, startMinute: 8 * 60)
        var garage = Garage(config: config)
        var events: [GarageEvent] = []
        garage.start(initial: Array(repeating: false, count: garage.inputCount), at: origin)
        var count = 0
        while count < 200, let change = simulator.next() {
            garage.handle(change.lineChange(startingAt: origin), into: &events)
            count += 1
        }
        garage.advance(to: origin + DurationText.longest, into: &events)
        return count
    }
}
