/// A position in a config file, 1-based like editors and compilers show it.
public struct Mark: Sendable, Hashable {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
}

/// A parsed config document: scalars, sequences and mappings, each with the place it was written.
/// The YAML adapter builds it; the core reads it without knowing about YAML.
public struct ConfigNode: Sendable {
    public enum Value: Sendable {
        case scalar(String, plain: Bool)
        case sequence([ConfigNode])
        case mapping([(key: ConfigNode, value: ConfigNode)])
    }

    public var mark: Mark
    public var value: Value

    public init(_ value: Value, at mark: Mark) {
        self.value = value
        self.mark = mark
    }

    /// The scalar text, or nil for a sequence or mapping.
    public var text: String? {
        if case .scalar(let text, _) = value { return text }
        return nil
    }

    /// A plain (unquoted) `~`, `null` or empty scalar.
    public var isNull: Bool {
        if case .scalar(let text, let plain) = value, plain {
            return text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
        }
        return false
    }

    /// Not a list and not nothing: `list` reported it already, so it is not also "empty".
    var isCollectionOfOtherKind: Bool {
        if isNull { return false }
        if case .sequence = value { return false }
        return true
    }

    var kindName: String {
        switch value {
        case .scalar: return "a single value"
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        }
    }
}
