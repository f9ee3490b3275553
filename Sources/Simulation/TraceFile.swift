import FoundationEssentials
import ParkWiseCore

/// Line-change traces, JSON lines (format v1, documented in hardware/TRACES.md):
///
///     {"parkwise_trace": 1, "site": "uniandes", "device": "p2-east"}     optional header
///     {"t_ms": 1200, "input": "GPIO17", "value": 1}
///
/// `t_ms` counts from the start of the trace and never goes back; `input` is written as in the
/// config (`GPIO17`, `pin 11`, `chip:line`); `value` 1 means the sensor reports presence.
public enum TraceFile {
    public static let version = 1
    /// The longest trace: a year of line changes. Later offsets are a typo (and would overflow the clock).
    public static let longestMilliseconds: Int64 = DurationText.longest.milliseconds

    struct Record: Decodable {
        var t_ms: Int64?
        var input: String?
        var value: Int?
        var parkwise_trace: Int?
    }

    public static func parse(_ bytes: [UInt8], inputs: [InputConfig]) throws(TraceFileError) -> [TimedChange] {
        try parse(bytes, refs: inputs.map(\.ref))
    }

    /// The changes of a trace whose inputs are `refs` (a change's `input` is its index there).
    public static func parse(_ bytes: [UInt8], refs: [InputRef]) throws(TraceFileError) -> [TimedChange] {
        var index: [String: Int] = [:]
        for (i, ref) in refs.enumerated() { index[ref.canonical] = i }
        var changes: [TimedChange] = []
        var last: Int64 = 0
        let decoder = JSONDecoder()
        for (n, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let lineNumber = n + 1
            if line.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 13 }) { continue }
            guard let record = try? decoder.decode(Record.self, from: Data(line)) else {
                throw TraceFileError(line: lineNumber, message: "not a JSON object like {\"t_ms\": 1200, \"input\": \"GPIO17\", \"value\": 1}")
            }
            if let v = record.parkwise_trace {
                guard v == version else { throw TraceFileError(line: lineNumber, message: "trace format \(v) is not supported (this agent reads \(version))") }
                continue
            }
            guard let t = record.t_ms, let name = record.input, let value = record.value else {
                throw TraceFileError(line: lineNumber, message: "needs t_ms, input and value")
            }
            guard t <= longestMilliseconds else {
                throw TraceFileError(line: lineNumber, message: "t_ms \(t) is more than a year (\(longestMilliseconds) ms) after the start")
            }
            guard t >= last else { throw TraceFileError(line: lineNumber, message: "t_ms \(t) goes back in time (previous \(last))") }
            guard value == 0 || value == 1 else { throw TraceFileError(line: lineNumber, message: "value must be 0 or 1") }
            guard let ref = InputRef.parse(name), let i = index[ref.canonical] else {
                throw TraceFileError(line: lineNumber, message: "input '\(name)' is not in the config")
            }
            last = t
            changes.append(TimedChange(offset: .milliseconds(t), input: i, active: value == 1))
        }
        return changes
    }

    /// The lines a trace moves, in the order it first names them (what `walk-test --learn --replay` watches); the
    /// records `parse` would refuse are left to it.
    public static func lines(_ bytes: [UInt8]) -> [InputRef] {
        var seen: Set<String> = [], refs: [InputRef] = []
        let decoder = JSONDecoder()
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            guard let name = (try? decoder.decode(Record.self, from: Data(line)))?.input, let ref = InputRef.parse(name),
                  seen.insert(ref.canonical).inserted else { continue }
            refs.append(ref)
        }
        return refs
    }

    /// One trace line for a change, as `diagnose --record` writes it.
    public static func line(_ change: TimedChange, inputs: [InputConfig]) -> String {
        "{\"t_ms\": \(change.offset.milliseconds), \"input\": \"\(inputs[change.input].ref)\", \"value\": \(change.active ? 1 : 0)}"
    }
}

public struct TraceFileError: Error, Sendable, CustomStringConvertible {
    public var line: Int
    public var message: String
    public var description: String { "line \(line): \(message)" }
}
