import SystemIO
/// What an outbox directory holds, read without opening (or repairing, or locking) it: for `doctor`
/// while the agent is stopped.
public struct OutboxPeek: Sendable {
    /// Events stored and not yet acknowledged.
    public var depth: Int
    /// The oldest of them.
    public var oldest: OutboxEntry?
    /// The file has damaged records or a torn end (the agent repairs it at its next start).
    public var damaged: Bool

    /// nil when there is no outbox file (nothing was ever stored there) or it cannot be read.
    public static func read(directory: String) -> OutboxPeek? {
        if case .found(let peek) = look(directory: directory) { return peek }
        return nil
    }

    /// What a reader finds: the file's contents, no file (nothing was ever stored), or a file (or directory) this
    /// process may not read, which says nothing of what waits there.
    public enum Look: Sendable {
        case found(OutboxPeek)
        case absent
        /// What stopped the read, and its errno (EACCES: another user's directory).
        case unreadable(String, errno: Errno?)
    }

    public static func look(directory: String) -> Look {
        switch DurableFile.readState(path: directory + "/outbox.log", limit: OutboxLog.sizeLimit(events: DurableOutbox.eventsKeptAtMost)) {
        case .bytes(let bytes):
            let parsed = OutboxLog.parse(bytes)
            return .found(OutboxPeek(depth: parsed.entries.count, oldest: parsed.entries.min { $0.event.seq < $1.event.seq },
                                     damaged: parsed.damaged || parsed.goodEnd < parsed.contentEnd))
        case .absent:
            return .absent
        case .unreadable(let failure), .tooLarge(let failure):
            return .unreadable(failure.message, errno: failure.errno)
        }
    }
}
