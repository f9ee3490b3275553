/// A parsed command line: positional arguments, `--option value` pairs and `--flag`s, checked
/// against what the command declares. Layout and exit codes follow swift-argument-parser; the conventions both
/// programs follow are in README.md beside this file.
public struct ParsedArguments {
    public var positionals: [String] = []
    /// Values by the option's name (never by an older spelling it was given as).
    public var options: [String: String] = [:]
    public var flags: Set<String> = []
    /// The older spellings this command line used, in order.
    public var deprecations: [Deprecation] = []

    public init() {}

    public func option(_ name: String) -> String? { options[name] }
    public func flag(_ name: String) -> Bool { flags.contains(name) }
}

/// An option given by an older spelling: accepted as the new one, with one line on stderr saying so.
public struct Deprecation: Sendable, Hashable {
    public var old: String
    public var new: String

    public init(old: String, new: String) {
        self.old = old
        self.new = new
    }

    /// `parkwise-bridge: --spot-list is deprecated, use --spots`
    public var line: String { "\(CommandSpec.program): --\(old) is deprecated, use --\(new)" }
}

public struct CommandSpec: Sendable {
    /// The program name usage lines show; set once in `main` before anything else runs.
    nonisolated(unsafe) public static var program = "parkwise-agent"

    public struct Argument: Sendable {
        public var name: String
        public var help: String
        public var optional = false
        public init(name: String, help: String, optional: Bool = false) {
            self.name = name
            self.help = help
            self.optional = optional
        }
    }
    public struct Option: Sendable {
        public var name: String
        public var value: String?   // nil: a flag
        public var help: String
        public var required = false
        /// Also accepted as the command's argument (`check-config FILE` is `check-config --config FILE`): an alias
        /// kept for good, not deprecated. One option of a command at most, after its declared arguments.
        public var positional = false
        /// Older names still accepted, each with a deprecation line (`spot-list` for `spots`).
        public var deprecated: [String] = []
        public init(name: String, value: String?, help: String, required: Bool = false, positional: Bool = false,
                    deprecated: [String] = []) {
            self.name = name
            self.value = value
            self.help = help
            self.required = required
            self.positional = positional
            self.deprecated = deprecated
        }

        /// `--name <value>`, or `--name` for a flag.
        var text: String { "--\(name)" + (value.map { " <\($0)>" } ?? "") }

        /// `--config <file>`: the config file of a command that reads one, the same name in every command of both
        /// programs.
        public static func config(help: String, required: Bool = false, positional: Bool = false) -> Option {
            Option(name: "config", value: "file", help: help, required: required, positional: positional)
        }
    }

    public var name: String
    public var abstract: String
    public var discussion: String?
    public var arguments: [Argument] = []
    public var options: [Option] = []

    public init(name: String, abstract: String, discussion: String? = nil, arguments: [Argument] = [], options: [Option] = []) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.arguments = arguments
        self.options = options
    }

    public var usage: String {
        var parts = [CommandSpec.program, name]
        for o in options { parts.append(o.required ? o.text : "[\(o.text)]") }
        for a in arguments { parts.append(a.optional ? "[<\(a.name)>]" : "<\(a.name)>") }
        return parts.joined(separator: " ")
    }

    public var help: String {
        var text = "OVERVIEW: \(abstract)\n"
        if let discussion { text += "\n\(discussion)\n" }
        text += "\nUSAGE: \(usage)\n"
        let aliases = options.filter(\.positional)
        if !arguments.isEmpty || !aliases.isEmpty {
            text += "\nARGUMENTS:\n"
            for a in arguments { text += row("<\(a.name)>", a.help) }
            for o in aliases { text += row("<\(o.value ?? o.name)>", "The same as --\(o.name) <\(o.value ?? o.name)>.") }
        }
        text += "\nOPTIONS:\n"
        for o in options { text += row(o.text, o.help) }
        text += row("-h, --help", "Show help information.")
        let deprecated = options.flatMap { o in o.deprecated.map { (o, $0) } }
        if !deprecated.isEmpty {
            text += "\nDEPRECATED:\n"
            for (o, old) in deprecated {
                text += row("--\(old)" + (o.value.map { " <\($0)>" } ?? ""), "Use \(o.text); still accepted, with a line on stderr.")
            }
        }
        return text
    }

    public func parse(_ args: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var i = 0
        while i < args.count {
            let arg = args[i]
            if arg.hasPrefix("--") && arg.count > 2 {
                var name = String(arg.dropFirst(2))
                var inline: String?
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                guard let spec = options.first(where: { $0.name == name || $0.deprecated.contains(name) }) else {
                    throw UsageError(command: self, message: "Unknown option '--\(name)'")
                }
                if spec.name != name { parsed.deprecations.append(Deprecation(old: name, new: spec.name)) }
                name = spec.name
                if spec.value != nil {
                    if let inline { parsed.options[name] = inline } else {
                        guard i + 1 < args.count else {
                            throw UsageError(command: self, message: "Missing value for '--\(name) <\(spec.value!)>'")
                        }
                        i += 1
                        parsed.options[name] = args[i]
                    }
                } else {
                    guard inline == nil else { throw UsageError(command: self, message: "'--\(name)' takes no value") }
                    parsed.flags.insert(name)
                }
            } else if arg.hasPrefix("-") && arg.count > 1 {
                throw UsageError(command: self, message: "Unknown option '\(arg)'")
            } else {
                parsed.positionals.append(arg)
            }
            i += 1
        }
        if let alias = options.first(where: \.positional), parsed.positionals.count > arguments.count {
            let value = parsed.positionals.remove(at: arguments.count)
            guard parsed.options[alias.name] == nil else {
                throw UsageError(command: self, message: "'\(value)' and '--\(alias.name)' both name the \(alias.value ?? alias.name): give it once")
            }
            parsed.options[alias.name] = value
        }
        if let missing = options.first(where: { $0.required && parsed.options[$0.name] == nil }) {
            throw UsageError(command: self, message: "Missing expected argument '\(missing.text)'", helpLine: row(missing.text, missing.help))
        }
        let required = arguments.filter { !$0.optional }.count
        if parsed.positionals.count < required {
            let missing = arguments[parsed.positionals.count]
            throw UsageError(command: self, message: "Missing expected argument '<\(missing.name)>'",
                             helpLine: row("<\(missing.name)>", missing.help))
        }
        if parsed.positionals.count > arguments.count {
            throw UsageError(command: self, message: "Unexpected argument '\(parsed.positionals[arguments.count])'")
        }
        return parsed
    }
}

/// `text` followed by spaces up to `width` columns (as is when longer): table columns in CLI output.
public func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

public func row(_ left: String, _ right: String) -> String {
    let pad = left.count < 24 ? String(repeating: " ", count: 24 - left.count) : "\n" + String(repeating: " ", count: 26)
    return "  \(left)\(pad)\(right)\n"
}

/// A command line that cannot be run: printed in swift-argument-parser's layout, exit 64.
public struct UsageError: Error {
    public var command: CommandSpec?
    public var message: String
    public var helpLine: String?

    public init(command: CommandSpec? = nil, message: String, helpLine: String? = nil) {
        self.command = command
        self.message = message
        self.helpLine = helpLine
    }

    public var text: String {
        var text = "Error: \(message)\n"
        if let helpLine { text += "Help: " + helpLine.drop(while: { $0 == " " }) }
        if let command {
            text += "Usage: \(command.usage)\n  See '\(CommandSpec.program) help \(command.name)' for more information.\n"
        } else {
            text += "Usage: \(CommandSpec.program) <subcommand>\n  See '\(CommandSpec.program) --help' for more information.\n"
        }
        return text
    }
}

/// sysexits.h codes, as swift-argument-parser uses them.
public enum ExitCode {
    public static let success: Int32 = 0
    public static let failure: Int32 = 1
    public static let usage: Int32 = 64
    public static let config: Int32 = 78
}
