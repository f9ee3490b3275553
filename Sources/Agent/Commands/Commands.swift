import Glibc
import ParkWiseCore

/// The subcommands, in the order `help` lists them.
enum Commands {
    static let all: [CommandSpec] = [RunCommand.spec, CheckConfigCommand.spec, LinesCommand.spec, DiagnoseCommand.spec,
                                     MonitorCommand.spec,
                                     VersionCommand.spec, helpSpec]

    static let helpSpec = CommandSpec(name: "help", abstract: "Show help for a subcommand.",
                                      arguments: [.init(name: "subcommand", help: "The subcommand to explain.", optional: true)])

    static var overview: String {
        var text = """
        OVERVIEW: ParkWise gate & sensor agent: reads a garage's lane loops and spot sensors and
        publishes occupancy, passages, check-ins and faults over MQTT.

        USAGE: parkwise-agent <subcommand>

        OPTIONS:

        """
        text += row("--version", "Show the version.")
        text += row("-h, --help", "Show help information.")
        text += "\nSUBCOMMANDS:\n"
        for spec in all { text += row(spec.name, spec.abstract) }
        text += "\n  See 'parkwise-agent help <subcommand>' for detailed help.\n"
        return text
    }

    /// Runs the command line; returns the exit code.
    static func main(_ args: [String]) async -> Int32 {
        guard let first = args.first else {
            printError(UsageError(message: "Missing expected subcommand").text + "\n" + overview)
            return ExitCode.usage
        }
        if first == "-h" || first == "--help" { say(overview); return ExitCode.success }
        if first == "--version" { say(AgentVersion.current); return ExitCode.success }
        let rest = Array(args.dropFirst())
        if first == "help" {
            guard let name = rest.first else { say(overview); return ExitCode.success }
            guard let spec = all.first(where: { $0.name == name }) else {
                printError(UsageError(command: helpSpec, message: "Unknown subcommand '\(name)'").text)
                return ExitCode.usage
            }
            say(spec.help)
            return ExitCode.success
        }
        guard let spec = all.first(where: { $0.name == first }) else {
            var message = "Unknown subcommand '\(first)'"
            if let close = suggestion(for: first, among: all.map(\.name)) { message += " (did you mean '\(close)'?)" }
            printError(UsageError(message: message).text)
            return ExitCode.usage
        }
        if rest.contains("-h") || rest.contains("--help") { say(spec.help); return ExitCode.success }
        let parsed: ParsedArguments
        do { parsed = try spec.parse(rest) } catch {
            printError(error.text)
            return ExitCode.usage
        }
        switch spec.name {
        case RunCommand.spec.name: return await RunCommand.run(parsed)
        case CheckConfigCommand.spec.name: return CheckConfigCommand.run(parsed)
        case LinesCommand.spec.name: return LinesCommand.run(parsed)
        case DiagnoseCommand.spec.name: return await DiagnoseCommand.run(parsed)
        case MonitorCommand.spec.name: return await MonitorCommand.run(parsed)
        case VersionCommand.spec.name: return VersionCommand.run(parsed)
        default: return ExitCode.usage
        }
    }
}

/// Writes a line to stdout at once (unbuffered, so pipes and journald see it as it happens).
func say(_ text: String) {
    var bytes = Array((text.hasSuffix("\n") ? text : text + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress, $0.count) }
}

/// Writes to stderr in one piece.
func printError(_ text: String) {
    var stream = StandardError()
    print(text, terminator: text.hasSuffix("\n") ? "" : "\n", to: &stream)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        var bytes = Array(string.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
