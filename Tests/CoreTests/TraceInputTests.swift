import ParkWiseCore
import Simulation
import Testing

/// Traces from outside (a technician's file, a damaged copy): a clear problem, never a crash; and
/// what `diagnose --record` writes is always a trace `run --replay` reads.
@Suite struct TraceInputTests {
    let inputs = garageConfig().inputs

    func problem(_ trace: String) -> TraceFileError? {
        do {
            _ = try TraceFile.parse(Array(trace.utf8), inputs: inputs)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [Int64(9_300_000_000_000), Int64.max, TraceFile.longestMilliseconds + 1])
    func aTimeTooFarAheadIsAProblem(t: Int64) {
        let p = problem("{\"t_ms\": 5, \"input\": \"GPIO2\", \"value\": 1}\n{\"t_ms\": \(t), \"input\": \"GPIO2\", \"value\": 0}")
        #expect(p?.line == 2)
        #expect(p?.message == "t_ms \(t) is more than a year (31536000000 ms) after the start")
    }

    @Test func aYearIsTheLongestTrace() throws {
        let changes = try TraceFile.parse(Array("{\"t_ms\": \(TraceFile.longestMilliseconds), \"input\": \"GPIO2\", \"value\": 1}".utf8),
                                          inputs: inputs)
        #expect(changes.map(\.offset) == [DurationText.longest])
    }

    @Test(arguments: ["{\"t_ms\": 1e30, \"input\": \"GPIO2\", \"value\": 1}", "{\"t_ms\": 1, \"input\": \"GPIO2\", \"value\": 99999999999999999999}",
                      "{\"t_ms\": " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}"])
    func anUnreadableNumberOrDeepNestingIsAProblem(line: String) {
        #expect(problem(line)?.message.hasPrefix("not a JSON object") == true)
    }

    @Test func edgesBeforeTheStartAreRecordedAtZeroAndNeverGoBack() throws {
        var recording = TraceRecording(start: .milliseconds(10_000))
        let recorded = [9_000, 12_000, 11_500, 13_000].enumerated().map { i, ms in
            recording.record(LineChange(input: i % 2, active: i % 2 == 0, at: .milliseconds(Int64(ms))))
        }
        #expect(recorded.map(\.offset) == [.zero, .seconds(2), .seconds(2), .seconds(3)])
        let text = recorded.map { TraceFile.line($0, inputs: inputs) }.joined(separator: "\n")
        #expect(!text.contains("-"))
        #expect(try TraceFile.parse(Array(text.utf8), inputs: inputs) == recorded)
    }
}
