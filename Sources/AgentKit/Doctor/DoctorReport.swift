import FoundationEssentials
import MQTT

/// The doctor's checklist: sections of checks, each ✓ (ok), ✗ (failed: the agent cannot run right) or ! (a warning),
/// with what was found and the exact fix. Printed as text for the technician, or as JSON.
struct DoctorReport: Encodable {
    struct Section: Encodable {
        var name: String
        var checks: [Check]
    }

    struct Check: Encodable {
        var status: String
        var title: String
        var detail: String?
        var fix: String?

        init(_ step: ProbeStep) {
            status = step.status.rawValue
            title = step.title
            detail = step.detail
            fix = step.fix
        }
    }

    var site: String?
    var device: String?
    var config: String
    var sections: [Section] = []
    /// Whether everything needed to run is right (no failed check; warnings allowed).
    var ok: Bool { !sections.contains { $0.checks.contains { $0.status == ProbeStep.Status.failed.rawValue } } }
    /// 78 when the config cannot be used (as `check-config`), 1 when another check failed, 0 otherwise.
    var exitCode: Int32 = 0
    var wallSeconds: Double = 0

    enum CodingKeys: String, CodingKey { case site, device, config, ok, exitCode = "exit_code", sections, wallSeconds = "wall_s" }

    init(config: String) { self.config = config }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(site, forKey: .site)
        try c.encodeIfPresent(device, forKey: .device)
        try c.encode(config, forKey: .config)
        try c.encode(ok, forKey: .ok)
        try c.encode(exitCode, forKey: .exitCode)
        try c.encode(sections, forKey: .sections)
        try c.encode((wallSeconds * 1000).rounded() / 1000, forKey: .wallSeconds)
    }

    mutating func add(_ name: String, _ steps: [ProbeStep]) {
        sections.append(Section(name: name, checks: steps.map(Check.init)))
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// One section as the technician reads it.
    static func text(_ section: Section, symbols: Symbols) -> String {
        var out = "\(section.name)\n"
        for check in section.checks {
            out += "  \(symbols.mark(check.status)) \(check.title)"
            if let detail = check.detail { out += ": \(detail)" }
            out += "\n"
            if let fix = check.fix, check.status != ProbeStep.Status.ok.rawValue { out += "      fix: \(fix)\n" }
        }
        return out
    }

    /// ✓ ✗ ! on a UTF-8 terminal, ok/FAIL/warn where the locale is not UTF-8.
    struct Symbols {
        var unicode: Bool

        static func fromLocale(_ environment: [String: String]) -> Symbols {
            let locale = environment["LC_ALL"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["LC_CTYPE"].flatMap { $0.isEmpty ? nil : $0 }
                ?? environment["LANG"] ?? ""
            let lower = locale.lowercased()
            return Symbols(unicode: lower.contains("utf-8") || lower.contains("utf8"))
        }

        func mark(_ status: String) -> String {
            switch status {
            case ProbeStep.Status.ok.rawValue: return unicode ? "✓" : "ok  "
            case ProbeStep.Status.failed.rawValue: return unicode ? "✗" : "FAIL"
            default: return unicode ? "!" : "warn"
            }
        }
    }
}
