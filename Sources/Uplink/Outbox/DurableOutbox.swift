import Delivery
import SystemIO

/// The outbox on disk (`outbox.log` in the outbox directory): an event is written and synced
/// before it counts as accepted, and leaves the file only after the broker's PUBACK. At most
/// `capacity` events are pending on disk at any moment; removed events' records are compacted
/// away once they are as many as the capacity (at the next idle moment, see `compactionDue`). If the
/// disk fails (full, read-only), events stay
/// in memory and the failure is reported; nothing already accepted is lost while the agent runs.
public final class DurableOutbox: Outbox {
    public let capacity: Int
    /// The pending events, in the book's order (the book has their seqs; these carry their bytes).
    private var entries: PendingEvents
    /// Which records the file gets for each change (pure: `Sources/Delivery/OutboxBook.swift`); this class makes them.
    private var book: OutboxBook
    private let log: OutboxLog
    /// Seqs the file lost before this start (damage, or more events than the capacity) or gave up (its drop records):
    /// the caller declares them dropped.
    public private(set) var lostAtOpen: [ClosedRange<UInt64>] = []
    /// Seqs the file held removal records of at this start: the broker acknowledged them (until a compaction, the only
    /// proof left of a delivery).
    public private(set) var acknowledgedAtOpen: Set<UInt64> = []
    /// The most events an outbox keeps, whatever its configuration asks (`ConfigDefaults.outboxCapacityLimit`: the
    /// core's, which this module does not depend on).
    public static let eventsKeptAtMost = 20_000
    /// The highest seq this outbox ever stored, pending or not.
    public var highestSeq: UInt64 { log.highest }

    /// Opens the outbox in `directory`. `problems` tells what had to be repaired at start. `eventsKept` is the most events
    /// any run keeps (the configuration's limit for `outbox.capacity`): the file is read only up to what that many take
    /// (`OutboxLog.sizeLimit`). A file of a newer format throws `.newerFormat`, and nothing is changed.
    public static func open(directory: String, capacity: Int, eventsKept: Int = eventsKeptAtMost) throws(UplinkError)
        -> (DurableOutbox, problems: [String]) {
        if let problem = DurableFile.makeDirectory(directory) {
            throw UplinkError(.outbox, "cannot create outbox directory: \(problem)", errno: problem.errno)
        }
        let (log, loaded) = try OutboxLog.open(path: directory + "/outbox.log",
                                               sizeLimit: OutboxLog.sizeLimit(events: max(capacity, eventsKept)))
        let book = OutboxBook(capacity: capacity, pending: loaded.entries.map(\.event.seq), drops: loaded.drops,
                              highest: loaded.highest, deadRecords: loaded.records - loaded.entries.count)
        let outbox = DurableOutbox(capacity: capacity, entries: loaded.entries, book: book, log: log)
        var problems = loaded.problems
        outbox.lostAtOpen = loaded.lost
        outbox.acknowledgedAtOpen = loaded.acknowledged
        if outbox.count > capacity {
            // (A smaller capacity than the last run's.) Kept: the last run may have sent them, and an event that may
            // arrive is never given up. New events make room among themselves until acknowledgements bring it down.
            problems.append("outbox holds \(outbox.count) events for a capacity of \(capacity): kept until the broker "
                            + "has them")
        }
        return (outbox, problems)
    }

    private init(capacity: Int, entries: [OutboxEntry], book: OutboxBook, log: OutboxLog) {
        self.capacity = capacity
        self.entries = PendingEvents(entries)
        self.book = book
        self.log = log
    }

    public var count: Int { entries.count }
    public var pending: ArraySlice<OutboxEntry> { entries.all }

    /// Group commit: the whole batch and the removals it forces reach the disk in one write with one sync, so the file
    /// holds no more than `capacity` pending events once it is synced (a write torn in between may leave more: the next
    /// start gives them up as a full outbox would, and declares them). An event of the batch that is given up at once
    /// is not added: its drop record is all.
    public func append(_ batch: [OutboxEntry], sparing: Set<UInt64>) -> (dropped: [OutboxEntry], failure: UplinkError?) {
        let dropped = entries.admit(batch, capacity: capacity, sparing: sparing)
        return (dropped, make(book.append(batch.map(\.event.seq), dropped: dropped.map(\.event.seq))))
    }

    /// The event leaves; its removal record waits for the next write.
    public func remove(seq: UInt64) {
        guard entries.remove(seq: seq) else { return }
        book.remove(seq)
    }

    public var hasUnwrittenChanges: Bool { book.hasUnwrittenChanges }

    /// The broker has the announcement of these seqs: their drop records need not outlive the next compaction.
    public func dropsAnnounced(_ seqs: ClosedRange<UInt64>) { book.dropsAnnounced(seqs) }

    public func recordFloor(_ seq: UInt64) -> UplinkError? { make(book.recordFloor(seq)) }

    public func discard(_ seqs: [UInt64]) -> UplinkError? {
        entries.removeAll(seqs: Set(seqs))
        return make(book.discard(seqs))
    }

    public func recordDrops(_ ranges: [ClosedRange<UInt64>]) -> UplinkError? { make(book.recordDrops(ranges)) }

    /// The removed events' records are as many as the capacity: the file is to be compacted by `writeChanges()`,
    /// called when the loop has nothing else to do, so that no event waits behind the rewrite and its syncs (on an
    /// SD card, several times an event's own). At twice the capacity it is compacted at once, whatever comes next.
    public var compactionDue: Bool { book.compactionDue }

    /// Writes the removals waiting for a write, alone (not synced: lost in a crash they only mean events sent once
    /// more), or, degraded, tries to put everything on disk again. For a quiet moment after acknowledgements, a retry
    /// after a failed write, and the stop.
    public func writeChanges() -> UplinkError? { make(book.writeChanges()) }

    public func replaceAll(_ replacement: [OutboxEntry]) -> UplinkError? {
        entries.replace(with: replacement)
        return make(book.rewriteAll())
    }

    /// Makes the book's write, and the compaction its outcome may call for; what failed, if anything did.
    private func make(_ first: OutboxBook.Write?) -> UplinkError? {
        var next = first
        while let write = next {
            let records = write.records.map { OutboxLog.Record($0, entries: entries.all) }
            do {
                if write.rewrite {
                    try log.rewrite(records)
                } else {
                    try log.append(records, sync: write.sync)
                }
            } catch {
                book.failed()
                return error
            }
            next = book.written()
        }
        return nil
    }
}
