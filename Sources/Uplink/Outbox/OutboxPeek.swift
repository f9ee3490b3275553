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

    /// nil when there is no outbox file (nothing was ever stored there).
    public static func read(directory: String) -> OutboxPeek? {
        guard case .bytes(let bytes) = DurableFile.readState(path: directory + "/outbox.log",
                                                             limit: OutboxLog.sizeLimit(events: DurableOutbox.eventsKeptAtMost)) else { return nil }
        let parsed = OutboxLog.parse(bytes)
        return OutboxPeek(depth: parsed.entries.count, oldest: parsed.entries.min { $0.event.seq < $1.event.seq },
                          damaged: parsed.damaged || parsed.goodEnd < parsed.contentEnd)
    }
}
