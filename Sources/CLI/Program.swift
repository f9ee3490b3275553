import ParkWiseCore

/// A program's subcommands and the conventions both ParkWise programs follow (README.md beside this file): `help`,
/// `--help`, `version` and `--version` (one line), swift-argument-parser's layout, a suggestion for a mistyped
/// subcommand, exit 64, the deprecation line of an older option spelling.
public struct Program: Sendable {
    /// What to do with a command line.
    public enum Resolution {
        case run(CommandSpec, ParsedArguments)
        case exit(Int32)
    }

    /// The first lines of the overview (what the program does), without "OVERVIEW: ".
    public var summary: String
    public var version: String
    /// The wire contract the program speaks (`parkwise/v1`), said with its version.
    public var contract: String
    /// The subcommands in the order `help` lists them; `version` and `help` are added at the end.
    public var commands: [CommandSpec]
    /// What to run first on site, in order (command, what it tells): shown at the top of the overview.
    public var onSite: [(command: String, tells: String)]

    public static let versionSpec = CommandSpec(name: "version", abstract: "Print the version (the line --version prints).")
    public static let helpSpec = CommandSpec(name: "help", abstract: "Show help for a subcommand.",
                                             arguments: [.init(name: "subcommand", help: "The subcommand to explain.", optional: true)])

    public init(summary: String, version: String, contract: String, commands: [CommandSpec],
                onSite: [(command: String, tells: String)] = []) {
        self.summary = summary
        self.version = version
        self.contract = contract
        self.commands = commands + [Program.versionSpec, Program.helpSpec]
        self.onSite = onSite
    }

    /// What `version` and `--version` print, the same in both programs: `parkwise-bridge 0.2.0 (wire contract
    /// parkwise/v1)`. The program's name and version come first (the packaging reads the second word).
    public var versionLine: String { "\(CommandSpec.program) \(version) (wire contract \(contract))" }

    public var overview: String {
        var text = "OVERVIEW: \(summary)\n\n"
        if !onSite.isEmpty {
            text += "ON SITE (in this order):\n"
            for (number, step) in onSite.enumerated() { text += row("\(number + 1). \(step.command)", step.tells) }
            text += "\n"
        }
        text += "USAGE: \(CommandSpec.program) <subcommand>\n\nOPTIONS:\n"
        text += row("--version", "Show the version (as the version subcommand).")
        text += row("-h, --help", "Show help information.")
        text += "\nSUBCOMMANDS:\n"
        for spec in commands { text += row(spec.name, spec.abstract) }
        text += "\nCONVENTIONS:\n"
        text += row("--config <file>", "The config file, in every subcommand that reads one (check-config also takes it as its argument).")
        text += row("version, --version", "Print one line, the program, its version and its wire contract: \(versionLine).")
        text += row("older spellings", "Still accepted, with a line on stderr naming the new one (each subcommand's DEPRECATED list).")
        text += "\n  See '\(CommandSpec.program) help <subcommand>' for detailed help.\n"
        return text
    }

    /// Handles help, version and usage errors itself (printing them); otherwise the command to run.
    public func resolve(_ args: [String]) -> Resolution {
        guard let first = args.first else {
            printError(UsageError(message: "Missing expected subcommand").text + "\n" + overview)
            return .exit(ExitCode.usage)
        }
        if first == "-h" || first == "--help" { say(overview); return .exit(ExitCode.success) }
        if first == "--version" { say(versionLine); return .exit(ExitCode.success) }
        let rest = Array(args.dropFirst())
        if first == "help" {
            guard let name = rest.first else { say(overview); return .exit(ExitCode.success) }
            guard let spec = commands.first(where: { $0.name == name }) else {
                printError(UsageError(command: Program.helpSpec, message: "Unknown subcommand '\(name)'").text)
                return .exit(ExitCode.usage)
            }
            say(spec.help)
            return .exit(ExitCode.success)
        }
        guard let spec = commands.first(where: { $0.name == first }) else {
            var message = "Unknown subcommand '\(first)'"
            if let close = suggestion(for: first, among: commands.map(\.name)) { message += " (did you mean '\(close)'?)" }
            printError(UsageError(message: message).text)
            return .exit(ExitCode.usage)
        }
        if rest.contains("-h") || rest.contains("--help") { say(spec.help); return .exit(ExitCode.success) }
        let parsed: ParsedArguments
        do { parsed = try spec.parse(rest) } catch {
            printError(error.text)
            return .exit(ExitCode.usage)
        }
        for deprecation in parsed.deprecations { printError(deprecation.line) }
        if spec.name == Program.versionSpec.name { say(versionLine); return .exit(ExitCode.success) }
        return .run(spec, parsed)
    }
}
