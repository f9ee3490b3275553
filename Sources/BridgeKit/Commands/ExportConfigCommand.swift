import FoundationEssentials
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import Postgres
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// An agent config's `levels:` and `spots:` from ParkWise's own `levels` and `spots` tables (read only), so that no
/// spot id is typed by hand; each spot's input is left `UNSET` for the installer, which check-config refuses as
/// "input not set" until every one is filled in.
enum ExportConfigCommand {
    static let spec = CommandSpec(
        name: "export-config", abstract: "Write an agent config's levels and spots from the backend's spots table.",
        discussion: """
        Reads ParkWise's levels and spots tables (read only; any role that may SELECT them) and writes
        the agent YAML's levels: and spots: sections with every spot id of the level (or of one zone
        of it) as the backend has it. Each spot's input is left UNSET: `parkwise-agent check-config`
        refuses the file ("input not set", with its line) until the installer has written the line
        each sensor is wired to. With --site and --device the file is a whole agent config; without,
        the two sections to paste into one. --spots also writes every spot id the backend knows
        (all levels, one a line) for `parkwise-agent check-config --config FILE --spots LIST`, which refuses
        a spot id the backend does not know. Writes to stdout unless --output; never overwrites a
        file. Exit 0 written, 1 database unreachable or a file not written, 64 a level or zone the
        backend does not have, 78 not ParkWise's database.
        """,
        options: [
            Connections.databaseOption,
            .init(name: "level", value: "code", help: "The level, as the backend's levels.code (e.g. P2).", required: true),
            .init(name: "zone", value: "zone", help: "Only this zone of the level (spots.zone, e.g. A)."),
            .init(name: "site", value: "site", help: "The agent's site: with --device, write a whole config."),
            .init(name: "device", value: "device", help: "The board's device id: with --site, write a whole config."),
            .init(name: "output", value: "file", help: "Write the config here (a new file) instead of stdout."),
            .init(name: "spots", value: "file", help: "Also write every spot id of the backend here (a new file), one a line.",
                  deprecated: ["spot-list"]),
        ])

    struct Spot {
        var id: String
        var zone: String
        var code: String
        var traits: [String]
    }

    static func run(_ args: ParsedArguments) -> Int32 {
        let level = args.option("level")!
        let zone = args.option("zone")
        let site = args.option("site"), device = args.option("device")
        guard (site == nil) == (device == nil) else {
            printError(UsageError(command: spec, message: "--site and --device go together (a whole config), or neither").text)
            return ExitCode.usage
        }
        for (path, option) in [(args.option("output"), "output"), (args.option("spots"), "spots")] {
            if let path, access(path, F_OK) == 0 {
                printError("error: --\(option) \(path) exists, nothing was written\n"
                           + "    hint: name a new file (an installer's filled-in config is never overwritten)")
                return ExitCode.failure
            }
        }
        let (db, url): (PostgresConnection, String)
        switch Connections.database(args, command: spec) {
        case .failed(let code): return code
        case .ok(let connection, let text): (db, url) = (connection, text)
        }
        if let code = Connections.checkSchema(db, url: url, needVersion: nil) { return code }
        let levels: [(code: String, name: String?)]
        let spots: [Spot]
        let allIDs: [String]
        do {
            levels = try db.query("SELECT code, name FROM levels ORDER BY sort, code").rows.compactMap { row in
                row[0].map { ($0, row[1]) }
            }
            guard let found = levels.first(where: { $0.code == level }) else {
                printError(UsageError(command: spec, message: "the backend has no level '\(level)' (it has: "
                                      + levels.map(\.code).joined(separator: ", ") + ")").text)
                return ExitCode.usage
            }
            spots = try db.query("""
                SELECT id, coalesce(zone, ''), coalesce(code, ''), is_accessible, is_ev, is_vip FROM spots
                WHERE level_code = $1 ORDER BY zone, code, id
                """, [found.code]).rows.compactMap { row in
                guard let id = row[0] else { return nil }
                let traits = [(row[3], "accessible"), (row[4], "EV"), (row[5], "VIP")].compactMap { $0.0 == "t" ? $0.1 : nil }
                return Spot(id: id, zone: row[1] ?? "", code: row[2] ?? "", traits: traits)
            }
            allIDs = args.option("spots") == nil ? []
                : try db.query("SELECT id FROM spots ORDER BY id").rows.compactMap { $0[0] }
        } catch {
            printError("error: cannot read the backend's levels and spots: \(error)"
                       + (error.sqlState == "42501" ? "\n    hint: the role needs SELECT on levels and spots" : ""))
            return ExitCode.failure
        }
        let zones = Array(Set(spots.map(\.zone))).sorted()
        if let zone, !zones.contains(zone) {
            printError(UsageError(command: spec, message: "level \(level) has no zone '\(zone)' in the backend (it has: "
                                  + zones.joined(separator: ", ") + ")").text)
            return ExitCode.usage
        }
        let chosen = zone.map { z in spots.filter { $0.zone == z } } ?? spots
        guard !chosen.isEmpty else {
            printError("error: level \(level) has no spots in the backend\n    hint: the backend's spots table lists them")
            return ExitCode.failure
        }
        let name = levels.first(where: { $0.code == level })?.name
        let text = yaml(level: level, name: name, zone: zone, levelTotal: spots.count, spots: chosen, site: site, device: device,
                        at: WireTime.format(unixNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9)))
        if let path = args.option("spots") {
            let list = "# Every spot id in ParkWise's spots table (\(allIDs.count)), for parkwise-agent check-config --spots\n"
                + allIDs.joined(separator: "\n") + "\n"
            guard write(list, to: path, what: "spot list") else { return ExitCode.failure }
        }
        if let path = args.option("output") {
            guard write(text, to: path, what: "config") else { return ExitCode.failure }
            say("\(path): \(chosen.count) spots of level \(level)\(zone.map { " zone \($0)" } ?? "") written, "
                       + "their inputs UNSET: set each, then parkwise-agent check-config --config \(path)"
                       + (args.option("spots").map { " --spots \($0)" } ?? ""))
        } else {
            say(text)
        }
        return ExitCode.success
    }

    /// The YAML: a whole config with site and device, else the levels and spots sections alone.
    static func yaml(level: String, name: String?, zone: String?, levelTotal: Int, spots: [Spot], site: String?, device: String?,
                     at: String) -> String {
        var lines = [
            "# From ParkWise's levels and spots tables by parkwise-bridge export-config --level \(level)"
                + (zone.map { " --zone \($0)" } ?? "") + ", \(at).",
            "# The spot ids are the backend's: never retype them. Set each spot's input (UNSET until then: check-config",
            "# refuses the file, \"input not set\", at each one) to the line its sensor is wired to: GPIO22, pin 15 or",
            "# CHIP:LINE (e.g. 1-0020:GPA0 on an MCP23017). Then: parkwise-agent check-config --config FILE --spots SPOT-LIST",
        ]
        if let site, let device {
            lines += [
                "site: \(quoted(site))",
                "device: \(quoted(device))",
                "# mqtt: { brokers: [\"mqtts://BROKER:8883\"], credentials: /etc/parkwise-agent/credentials, tls: { ca: /etc/parkwise-agent/ca.crt } }",
            ]
        }
        let part = zone.map { " (this file: zone \($0), \(spots.count) of them)" } ?? ""
        lines += [
            "levels:",
            "  - { id: \(quoted(level)), capacity: \(levelTotal)\(name.map { ", name: \(quoted($0))" } ?? "") }"
                + "   # \(levelTotal) spots in the backend\(part)",
            "spots:",
        ]
        for spot in spots {
            let onLevel = spot.id.prefix(while: { $0 != "-" }) == level ? "" : ", level: \(quoted(level))"
            let note = ([spot.code.isEmpty ? nil : spot.code] + spot.traits.map(Optional.some)).compactMap { $0 }.joined(separator: " ")
            lines.append("  - { id: \(quoted(spot.id))\(onLevel), input: \(ConfigDefaults.inputNotSet) }" + (note.isEmpty ? "" : "   # \(note)"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A YAML double-quoted scalar.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += "\\x" + (scalar.value < 16 ? "0" : "") + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A new file with `text`, written durably; false (said why) when it could not be.
    private static func write(_ text: String, to path: String, what: String) -> Bool {
        if let failure = DurableFile.replace(path: path, with: Array(text.utf8)) {
            printError("error: cannot write the \(what) \(path): \(failure)")
            return false
        }
        return true
    }
}
