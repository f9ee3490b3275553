/// A parsed command line: positional arguments, `--option value` pairs and `--flag`s, checked
/// against what the command declares. Layout and exit codes follow swift-argument-parser.
struct ParsedArguments {
    var positionals: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []

    func option(_ name: String) -> String? { options[name] }
    func flag(_ name: String) -> Bool { flags.contains(name) }
}

struct CommandSpec {
    struct Argument {
        var name: String
        var help: String
        var optional = false
    }
    struct Option {
        var name: String
        var value: String?   // nil: a flag
        var help: String
        var required = false
    }

    var name: String
    var abstract: String
    var discussion: String?
    var arguments: [Argument] = []
    var options: [Option] = []

    var usage: String {
        var parts = ["parkwise-agent", name]
        for o in options {
            let text = o.value.map { "--\(o.name) <\($0)>" } ?? "--\(o.name)"
            parts.append(o.required ? text : "[\(text)]")
        }
        for a in arguments { parts.append(a.optional ? "[<\(a.name)>]" : "<\(a.name)>") }
        return parts.joined(separator: " ")
    }

    var help: String {
        var text = "OVERVIEW: \(abstract)\n"
        if let discussion { text += "\n\(discussion)\n" }
        text += "\nUSAGE: \(usage)\n"
        if !arguments.isEmpty {
            text += "\nARGUMENTS:\n"
            for a in arguments { text += row("<\(a.name)>", a.help) }
        }
        text += "\nOPTIONS:\n"
        for o in options { text += row("--\(o.name)" + (o.value.map { " <\($0)>" } ?? ""), o.help) }
        text += row("-h, --help", "Show help information.")
        return text
    }

    func parse(_ args: [String]) throws(UsageError) -> ParsedArguments {
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
                guard let spec = options.first(where: { $0.name == name }) else {
                    throw UsageError(command: self, message: "Unknown option '--\(name)'")
                }
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
        if let missing = options.first(where: { $0.required && parsed.options[$0.name] == nil }) {
            throw UsageError(command: self, message: "Missing expected argument '--\(missing.name) <\(missing.value ?? "")>'",
                             helpLine: row("--\(missing.name) <\(missing.value ?? "")>", missing.help))
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
func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func row(_ left: String, _ right: String) -> String {
    let pad = left.count < 24 ? String(repeating: " ", count: 24 - left.count) : "\n" + String(repeating: " ", count: 26)
    return "  \(left)\(pad)\(right)\n"
}

/// A command line that cannot be run: printed in swift-argument-parser's layout, exit 64.
struct UsageError: Error {
    var command: CommandSpec?
    var message: String
    var helpLine: String?

    var text: String {
        var text = "Error: \(message)\n"
        if let helpLine { text += "Help: " + helpLine.drop(while: { $0 == " " }) }
        if let command {
            text += "Usage: \(command.usage)\n  See 'parkwise-agent help \(command.name)' for more information.\n"
        } else {
            text += "Usage: parkwise-agent <subcommand>\n  See 'parkwise-agent --help' for more information.\n"
        }
        return text
    }
}

/// sysexits.h codes, as swift-argument-parser uses them.
enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
    static let config: Int32 = 78
}
