import CYAML
import ParkWiseCore

/// Parses YAML text into the core's `ConfigNode` tree with libyaml's event parser, keeping each
/// node's line and column. One owner for the `yaml_parser_t`.
final class YAMLParser {
    private var parser = yaml_parser_t()
    private let bytes: [UInt8]

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    deinit {
        yaml_parser_delete(&parser)
    }

    static func parse(_ bytes: [UInt8], file: String) throws(ConfigIssues) -> ConfigNode {
        let p = YAMLParser(bytes: bytes)
        guard yaml_parser_initialize(&p.parser) == 1 else {
            throw ConfigIssues([ConfigIssue(file: file, mark: Mark(line: 1, column: 1), message: "out of memory reading YAML")])
        }
        // The typed error travels in a Result: Swift 6.0's withUnsafeBufferPointer rethrows untyped
        // (the arm64 cross build uses Debian's swiftlang 6.0.3).
        let result = p.bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(ConfigIssues) -> ConfigNode in
                yaml_parser_set_input_string(&p.parser, buffer.baseAddress, buffer.count)
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
        }
        return try result.get()
    }

    private func syntaxError(file: String) -> ConfigIssues {
        let problem = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        let mark = parser.problem_mark
        var message = "YAML syntax: \(problem)"
        if let context = parser.context.map({ String(cString: $0) }) {
            message += " (\(context) at line \(parser.context_mark.line + 1))"
        }
        let hint = problem.contains("tab") ? "indent with spaces, not tabs"
            : "check indentation and that every `key: value` has a space after the colon"
        return ConfigIssues([ConfigIssue(file: file, mark: Mark(line: mark.line + 1, column: mark.column + 1),
                                         message: message, hint: hint)])
    }
}

/// Assembles nodes from parser events; anchors and aliases are refused (a config should say things once).
private struct TreeBuilder {
    enum Open {
        case sequence(Mark, [ConfigNode])
        case mapping(Mark, [(key: ConfigNode, value: ConfigNode)], pendingKey: ConfigNode?)
    }

    let file: String
    var stack: [Open] = []
    var root: ConfigNode?

    init(file: String) { self.file = file }

    mutating func take(_ event: inout yaml_event_t) throws(ConfigIssues) {
        let mark = Mark(line: event.start_mark.line + 1, column: event.start_mark.column + 1)
        switch event.type {
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
            try add(ConfigNode(.scalar(text, plain: s.style == YAML_PLAIN_SCALAR_STYLE), at: mark))
        case YAML_SEQUENCE_START_EVENT:
            stack.append(.sequence(mark, []))
        case YAML_MAPPING_START_EVENT:
            stack.append(.mapping(mark, [], pendingKey: nil))
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            switch stack.removeLast() {
            case .sequence(let m, let items): try add(ConfigNode(.sequence(items), at: m))
            case .mapping(let m, let pairs, _): try add(ConfigNode(.mapping(pairs), at: m))
            }
        case YAML_ALIAS_EVENT:
            throw ConfigIssues([ConfigIssue(file: file, mark: mark, message: "YAML aliases (*name) are not supported",
                                            hint: "write the value out in full")])
        case YAML_DOCUMENT_START_EVENT:
            if root != nil {
                throw ConfigIssues([ConfigIssue(file: file, mark: mark, message: "more than one YAML document in the file",
                                                hint: "remove the second `---` and everything after it, or merge them")])
            }
        default:
            break
        }
    }

    private mutating func add(_ node: ConfigNode) throws(ConfigIssues) {
        guard let top = stack.popLast() else {
            root = node
            return
        }
        switch top {
        case .sequence(let m, var items):
            items.append(node)
            stack.append(.sequence(m, items))
        case .mapping(let m, var pairs, let key):
            if let key {
                pairs.append((key: key, value: node))
                stack.append(.mapping(m, pairs, pendingKey: nil))
            } else {
                stack.append(.mapping(m, pairs, pendingKey: node))
            }
        }
    }
}
