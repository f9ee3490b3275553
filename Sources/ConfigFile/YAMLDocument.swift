import CYAML
import ParkWiseCore

/// Parses YAML text into the core's `ConfigNode` tree with libyaml's event parser, keeping each
/// node's line and column. One owner for the `yaml_parser_t` and the input it reads from.
final class YAMLParser {
    private var parser = yaml_parser_t()
    /// The text, at an address that stays put while libyaml reads it.
    private let input: UnsafeMutableBufferPointer<UInt8>

    private init(bytes: [UInt8]) {
        input = .allocate(capacity: max(bytes.count, 1))
        _ = input.initialize(from: bytes)
    }

    deinit {
        yaml_parser_delete(&parser)
        input.deallocate()
    }

    static func parse(_ bytes: [UInt8], file: String) throws(ConfigError) -> ConfigNode {
        let p = YAMLParser(bytes: bytes)
        guard yaml_parser_initialize(&p.parser) == 1 else {
            throw ConfigError([ConfigIssue(file: file, mark: Mark(line: 1, column: 1), message: "out of memory reading YAML")])
        }
        yaml_parser_set_input_string(&p.parser, p.input.baseAddress, bytes.count)
        var builder = TreeBuilder(file: file)
        while true {
            var event = yaml_event_t()
            guard yaml_parser_parse(&p.parser, &event) == 1 else { throw p.syntaxError(file: file) }
            defer { yaml_event_delete(&event) }
            if event.type == YAML_STREAM_END_EVENT { break }
            try builder.take(&event)
        }
        return builder.root ?? ConfigNode(.mapping([]), at: Mark(line: 1, column: 1))
    }

    private func syntaxError(file: String) -> ConfigError {
        let problem = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        let mark = parser.problem_mark
        var message = "YAML syntax: \(problem)"
        if let context = parser.context.map({ String(cString: $0) }) {
            message += " (\(context) at line \(parser.context_mark.line + 1))"
        }
        let hint = problem.contains("tab") ? "indent with spaces, not tabs"
            : "check indentation and that every `key: value` has a space after the colon"
        return ConfigError([ConfigIssue(file: file, mark: Mark(line: mark.line + 1, column: mark.column + 1),
                                         message: message, hint: hint)])
    }
}

/// Assembles nodes from parser events; anchors and aliases are refused (a config should say things once),
/// and so are tags (`!secret`) and nesting deeper than any config needs.
private struct TreeBuilder {
    /// A config nests five levels at most; a file nested deeper is not a config (and would exhaust the stack).
    static let maxDepth = 32

    /// A sequence or mapping being read. A struct mutated where it lies in `stack` (`stack[last].items.append`):
    /// taking it out of the stack to append and putting it back copied its whole array at every item, O(n²) in a
    /// list's length (a 60,000-spot list took 49 s).
    struct Open {
        var mark: Mark
        var isMapping: Bool
        var items: [ConfigNode] = []
        var pairs: [(key: ConfigNode, value: ConfigNode)] = []
        var pendingKey: ConfigNode?
    }

    let file: String
    var stack: [Open] = []
    var root: ConfigNode?

    init(file: String) { self.file = file }

    mutating func take(_ event: inout yaml_event_t) throws(ConfigError) {
        let mark = Mark(line: event.start_mark.line + 1, column: event.start_mark.column + 1)
        switch event.type {
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            try refuse(tag: s.tag, at: mark)
            let text = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
            add(ConfigNode(.scalar(text, plain: s.style == YAML_PLAIN_SCALAR_STYLE), at: mark))
        case YAML_SEQUENCE_START_EVENT:
            try refuse(tag: event.data.sequence_start.tag, at: mark)
            try open(Open(mark: mark, isMapping: false), at: mark)
        case YAML_MAPPING_START_EVENT:
            try refuse(tag: event.data.mapping_start.tag, at: mark)
            try open(Open(mark: mark, isMapping: true), at: mark)
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            let done = stack.removeLast()
            add(ConfigNode(done.isMapping ? .mapping(done.pairs) : .sequence(done.items), at: done.mark))
        case YAML_ALIAS_EVENT:
            throw ConfigError([ConfigIssue(file: file, mark: mark, message: "YAML aliases (*name) are not supported",
                                            hint: "write the value out in full")])
        case YAML_DOCUMENT_START_EVENT:
            if root != nil {
                throw ConfigError([ConfigIssue(file: file, mark: mark, message: "more than one YAML document in the file",
                                                hint: "remove the second `---` and everything after it, or merge them")])
            }
        default:
            break
        }
    }

    private mutating func open(_ collection: Open, at mark: Mark) throws(ConfigError) {
        guard stack.count < Self.maxDepth else {
            throw ConfigError([ConfigIssue(file: file, mark: mark, message: "YAML nested more than \(Self.maxDepth) levels deep",
                                            hint: "a config nests a few levels at most; check the brackets and indentation")])
        }
        stack.append(collection)
    }

    /// `!secret name`, `!include file`: a tag would silently change nothing, so the value would be the tag's argument.
    private func refuse(tag: UnsafeMutablePointer<yaml_char_t>?, at mark: Mark) throws(ConfigError) {
        guard let tag else { return }
        let name = String(cString: tag)
        guard !name.hasPrefix("tag:yaml.org,2002:") else { return }   // !!str, !!int: plain YAML types
        throw ConfigError([ConfigIssue(file: file, mark: mark, message: "YAML tag '\(name)' is not supported",
                                        hint: name == "!secret"
                                            ? "write the value itself; keep MQTT secrets in the file mqtt.credentials names"
                                            : "remove the tag and write the value itself")])
    }

    private mutating func add(_ node: ConfigNode) {
        guard !stack.isEmpty else {
            root = node
            return
        }
        let top = stack.count - 1
        if !stack[top].isMapping {
            stack[top].items.append(node)
        } else if let key = stack[top].pendingKey {
            stack[top].pairs.append((key: key, value: node))
            stack[top].pendingKey = nil
        } else {
            stack[top].pendingKey = node
        }
    }
}
