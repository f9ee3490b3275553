import Synchronization

/// The last error said on stderr, in one line: what a service that is about to fail tells its service manager
/// (`STATUS=`), so `systemctl status` shows why beside "exited, status=78" while the journal's lines may have
/// scrolled out of its short excerpt.
public enum LastError {
    private static let line = Mutex<String?>(nil)

    /// The last recorded error line, nil when there was none.
    public static var text: String? { line.withLock { $0 } }

    /// Keeps the first non-empty line of `text` (at most 200 characters) as the last error.
    public static func record(_ text: String) {
        guard let first = text.split(separator: "\n").first(where: { !$0.allSatisfy(\.isWhitespace) }) else { return }
        let trimmed = String(first.drop(while: \.isWhitespace).prefix(200))
        line.withLock { $0 = trimmed }
    }
}
