#if canImport(Glibc)
import Glibc
#endif

/// A condition that repeats — an outbox dropping event after event through an outage, a disk that
/// refuses every save — is one line when it starts, at most one a minute while it lasts (with how
/// many occurrences since the last line), and one when it ends with the total: a streak, not a line
/// per occurrence.
///     warn outbox full, events dropped count=1 seqs=4
///     warn outbox full, events dropped count=5120 streak=5121 streak_s=60
///     info outbox no longer full streak=9000 streak_s=95
/// Owned by one caller (not shared between threads).
public struct LogStreak: Sendable {
    private let level: Log.Level
    private let message: StaticString
    private let endMessage: StaticString
    private let interval: Double
    /// Occurrences since the streak began (0: no streak).
    public private(set) var total = 0
    private var unreported = 0
    private var began = 0.0
    private var lastLine = 0.0

    /// `interval`: seconds between the lines of a streak that goes on.
    public init(_ level: Log.Level, _ message: StaticString, ended endMessage: StaticString, interval: Double = 60) {
        self.level = level
        self.message = message
        self.endMessage = endMessage
        self.interval = interval
    }

    /// `count` more occurrences; `fields` describe this one (they are written only if a line is).
    public mutating func occurred(_ count: Int = 1, _ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        guard count > 0 else { return }
        let now = Self.now()
        total += count
        if total == count {
            began = now
            lastLine = now
            Log.write(level, message, fields, then: [("count", "\(count)")])
            return
        }
        unreported += count
        guard now - lastLine >= interval else { return }
        lastLine = now
        Log.write(level, message, fields, then: [("count", "\(unreported)"), ("streak", "\(total)"),
                                                 ("streak_s", "\(Int(now - began))")])
        unreported = 0
    }

    /// The condition is over: one line with the streak's total, if there was one.
    public mutating func ended(_ fields: KeyValuePairs<String, any CustomStringConvertible> = [:]) {
        guard total > 0 else { return }
        Log.write(.info, endMessage, fields, then: [("streak", "\(total)"), ("streak_s", "\(Int(Self.now() - began))")])
        total = 0
        unreported = 0
    }

    private static func now() -> Double { monotonicSeconds() }
}
