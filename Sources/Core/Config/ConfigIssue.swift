/// One thing wrong with a config file: where, what, and how to fix it.
public struct ConfigIssue: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var mark: Mark
    public var message: String
    public var hint: String?

    public init(file: String, mark: Mark, message: String, hint: String? = nil) {
        self.file = file
        self.mark = mark
        self.message = message
        self.hint = hint
    }

    /// `file:line:col: error: message` and an indented hint, as compilers print it.
    public var description: String { text(as: "error") }

    /// The same with another kind in front of the message (`warning`: the config is valid, but not as it reads).
    public func text(as kind: String) -> String {
        var text = "\(file):\(mark.line):\(mark.column): \(kind): \(message)"
        if let hint { text += "\n    hint: \(hint)" }
        return text
    }
}

/// Every issue found in one config file; thrown when a config cannot be used.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public var issues: [ConfigIssue]
    public init(_ issues: [ConfigIssue]) { self.issues = issues }
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}
