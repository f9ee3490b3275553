import SystemIO
import FoundationEssentials
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore

/// The walk-test's hand-over report: every step with its verdict (`untested` when not walked yet), as JSON
/// (read back to resume) and as text. Saved after every verdict, so a walk cut short loses nothing.
struct WalkReport: Codable {
    struct Step: Codable {
        var id: String
        var kind: WalkStep.Kind
        /// A `WalkResult.Verdict`, or `untested`.
        var verdict: String
        var inputs: [String]
        var edges: Int?
        var other: String?
        var otherInput: String?
        var detail: String?
    }

    var parkwiseWalkTest = 1
    var site: String
    var device: String
    var config: String
    /// Wall-clock time of the last save, ISO-8601 UTC.
    var updated: String
    var steps: [Step]
    /// How many steps have each verdict (and `untested`).
    var counts: [String: Int]

    enum CodingKeys: String, CodingKey {
        case parkwiseWalkTest = "parkwise_walk_test", site, device, config, updated, steps, counts
    }

    init(walk: WalkTest, config: AgentConfig, configPath: String, wallNanoseconds: Int64) {
        site = config.site
        device = config.device
        self.config = configPath
        updated = WireTime.format(unixNanoseconds: wallNanoseconds)
        steps = walk.steps.map { step in
            let inputs = step.inputs.map { config.inputs[$0].ref.description }
            guard let r = walk.results[step.id] else {
                return Step(id: step.id, kind: step.kind, verdict: "untested", inputs: inputs)
            }
            return Step(id: step.id, kind: step.kind, verdict: r.verdict.rawValue, inputs: r.inputs, edges: r.edges,
                        other: r.other, otherInput: r.otherInput, detail: r.detail)
        }
        counts = Dictionary(steps.map { ($0.verdict, 1) }, uniquingKeysWith: +)
    }

    /// The results of a saved report, to resume from.
    var results: [WalkResult] {
        steps.compactMap { s in
            WalkResult.Verdict(rawValue: s.verdict).map {
                WalkResult(step: s.id, verdict: $0, inputs: s.inputs, edges: s.edges, other: s.other,
                           otherInput: s.otherInput, detail: s.detail ?? "")
            }
        }
    }

    var allConfirmed: Bool { steps.allSatisfy { $0.verdict == WalkResult.Verdict.confirmed.rawValue } }

    static func load(path: String) -> Result<WalkReport?, WalkReportError> {
        guard let bytes = DurableFile.read(path: path) else { return .success(nil) }
        guard let report = try? JSONDecoder().decode(WalkReport.self, from: Data(bytes)) else {
            return .failure(WalkReportError(message: "\(path) is not a walk-test report",
                                            hint: "move it away, or give --report another path"))
        }
        return .success(report)
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    var text: String {
        var out = "Wiring walk-test of \(site)/\(device) (config \(config)), \(updated)\n\n"
        for step in steps {
            out += "\(WalkReport.symbol(step.verdict)) \(padded(step.id, 14)) \(padded(step.verdict, 14)) \(step.inputs.joined(separator: ", "))\n"
            if let detail = step.detail, step.verdict != WalkResult.Verdict.confirmed.rawValue { out += "    \(detail)\n" }
        }
        out += "\n" + counts.keys.sorted().map { "\(counts[$0]!) \($0)" }.joined(separator: ", ") + "\n"
        return out
    }

    static func symbol(_ verdict: String) -> String {
        switch verdict {
        case WalkResult.Verdict.confirmed.rawValue: return "✓"
        case WalkResult.Verdict.skipped.rawValue, "untested": return "!"
        default: return "✗"
        }
    }

    /// Writes the JSON to `path` and the text beside it (`.txt` instead of `.json`), each replaced whole.
    func save(path: String) -> String? {
        (DurableFile.replace(path: path, with: Array((json + "\n").utf8))
            ?? DurableFile.replace(path: WalkReport.textPath(path), with: Array(text.utf8)))?.message
    }

    /// Whether `save` can write there (its temporary file is created and removed), asked before the first step:
    /// a walk whose report cannot be saved would be lost whole.
    static func probe(path: String) -> String? {
        let temp = path + ".tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return "open \(temp): \(Errno.current)" }
        close(fd)
        unlink(temp)
        return nil
    }

    static func textPath(_ path: String) -> String {
        (path.hasSuffix(".json") ? String(path.dropLast(5)) : path) + ".txt"
    }
}

struct WalkReportError: Error {
    var message: String
    var hint: String
}
