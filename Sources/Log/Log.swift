#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// One line per event on stderr: a fixed message, then key=value fields. journald adds time and unit.
///     warn broker unreachable broker=mqtt://10.0.0.5:1883 retry_in=4s outbox=12
public enum Log {
    public enum Level: Int, Comparable, Sendable {
        case debug, info, warn, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public var word: String { ["debug", "info", "warn", "error"][rawValue] }
        /// The syslog priority journald reads from a `<N>` prefix: debug 7, info 6, warning 4, error 3.
        var syslogPriority: Int { [7, 6, 4, 3][rawValue] }

        /// `debug`, `info`, `warn` or `error`.
        public init?(word: String) {
            guard let i = ["debug", "info", "warn", "error"].firstIndex(of: word) else { return nil }
            self.init(rawValue: i)
        }
    }

    /// Set at start-up (from PARKWISE_LOG or --verbose); `cmd/loglevel` changes it while running,
    /// from any thread.
    public static var threshold: Level {
        get { Level(rawValue: level.load(ordering: .relaxed)) ?? .info }
        set { level.store(newValue.rawValue, ordering: .relaxed) }
    }
    private static let level = Atomic<Int>(Level.info.rawValue)

    /// The fields are built only when debug lines are written: some are said on every edge.
    public static func debug(_ message: StaticString,
                             _ fields: @autoclosure () -> KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        guard threshold == .debug else { return }
        write(.debug, message, fields())
    }

    public static func info(_ message: StaticString, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        write(.info, message, fields)
    }

    public static func warn(_ message: StaticString, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        write(.warn, message, fields)
    }

    public static func error(_ message: StaticString, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        write(.error, message, fields)
    }

    /// A line at a level chosen at run time.
    public static func log(_ level: Level, _ message: StaticString, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        write(level, message, fields)
    }

    static func write(_ level: Level, _ message: StaticString, _ fields: KeyValuePairs<String, any CustomStringConvertible>,
                      then more: [(String, String)] = []) {
        guard level >= threshold else { return }
        var text = "\(level.word) \(message)"
        for (key, value) in fields {
            text += " \(key)=\(quoted(value.description))"
        }
        for (key, value) in more {
            text += " \(key)=\(quoted(value))"
        }
        if level == .error { LastError.record(text) }
        let line = (JournalStream.isStderr ? "<\(level.syslogPriority)>" : "") + text + "\n"
        // One write(2) per line, so lines from different threads never interleave.
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    static func quoted(_ value: String) -> String {
        if !value.isEmpty && !value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\n" }) { return value }
        return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
