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
    private var entries: [OutboxEntry]
    private let log: OutboxLog
    /// Records in the file that no longer stand for a pending event.
    private var deadRecords: Int
    /// A write failed: some events are in memory only, until a rewrite puts them all on disk.
    private var degraded = false
    /// Acknowledged events whose removal records are not in the file yet: they go with the next write (an
    /// append's, a compaction, or `writeChanges()`), so an acknowledgement costs no write of its own. Lost in a
    /// crash, they only mean those events are sent once more, same id and seq.
    private var removalsUnwritten: [UInt64] = []
    /// Seqs the file lost before this start (damage, or more events than the capacity) or gave up (its drop records):
    /// the caller declares them dropped.
    public private(set) var lostAtOpen: [ClosedRange<UInt64>] = []
    /// Seqs the file held removal records of at this start: the broker acknowledged them (until a compaction, the only
    /// proof left of a delivery).
    public private(set) var acknowledgedAtOpen: Set<UInt64> = []
    /// Events given up whose drop records the file holds until the broker acknowledges their announcement: a rewrite of
    /// the file writes them again, so the outbox alone tells a dropped seq from a delivered one at the next start,
    /// whatever happened to the state file. Exact ranges (the delivery ledger bounds how many).
    private var dropsKept = SeqRuns()
    /// The highest seq ever given to this outbox (stored or not): a compaction's floor, so that events sent from
    /// memory while the disk failed, and acknowledged since, are never taken for seqs nothing accounts for.
    private var acceptedHighest: UInt64 = 0
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
            throw UplinkError(.outbox, "cannot create outbox directory: \(problem)", code: problem.code)
        }
        let (log, loaded) = try OutboxLog.open(path: directory + "/outbox.log",
                                               sizeLimit: OutboxLog.sizeLimit(events: max(capacity, eventsKept)))
        let outbox = DurableOutbox(capacity: capacity, entries: loaded.entries, log: log,
                                   deadRecords: loaded.records - loaded.entries.count)
        var problems = loaded.problems
        outbox.lostAtOpen = loaded.lost
        outbox.dropsKept = SeqRuns(loaded.drops)
        outbox.acknowledgedAtOpen = loaded.acknowledged
        outbox.acceptedHighest = loaded.highest
        if outbox.entries.count > capacity {
            // (A smaller capacity than the last run's.) Kept: the last run may have sent them, and an event that may
            // arrive is never given up. New events make room among themselves until acknowledgements bring it down.
            problems.append("outbox holds \(outbox.entries.count) events for a capacity of \(capacity): kept until the broker "
                            + "has them")
        }
        return (outbox, problems)
    }

    private init(capacity: Int, entries: [OutboxEntry], log: OutboxLog, deadRecords: Int) {
        self.capacity = capacity
        self.entries = entries
        self.log = log
        self.deadRecords = deadRecords
    }

    public var count: Int { entries.count }
    public var pending: [OutboxEntry] { entries }

    /// Group commit: the whole batch and the removals it forces reach the disk in one write with one
    /// sync, so the file holds no more than `capacity` pending events once it is synced (a write torn
    /// in between may leave more: the next start gives them up as a full outbox would, and declares
    /// them). An event of the batch that is given up at once is not added: its drop record is all.
    public func append(_ batch: [OutboxEntry], sparing: Set<UInt64>) -> (dropped: [OutboxEntry], failure: UplinkError?) {
        let dropped = OverflowPolicy.admit(batch, into: &entries, capacity: capacity, sparing: sparing)
        acceptedHighest = max(acceptedHighest, batch.last?.event.seq ?? 0)
        var removals: [OutboxEntry] = []
        var records = removalRecords
        if dropped.isEmpty {
            records += batch.map { OutboxLog.Record(add: $0) }
        } else {
            let batchSeqs = Set(batch.map(\.event.seq)), droppedSeqs = Set(dropped.map(\.event.seq))
            removals = dropped.filter { !batchSeqs.contains($0.event.seq) }
            // Drop records, not removals: with them on disk in the same sync, a crash before the device state saves
            // these drops still has the next start declare them. (An event of the batch given up at once is never
            // added: its drop record is all the file says of it.)
            // Adds and drop records in seq order: whatever prefix of the write a power cut leaves, the seqs it stored
            // run up to the highest one it holds with none missing below (a drop record after a higher add, torn off,
            // would leave that seq neither pending nor declared), and the next start declares what lies above.
            let adds = batch.filter { !droppedSeqs.contains($0.event.seq) }.map { OutboxLog.Record(add: $0) }
            records += (adds + dropped.map { OutboxLog.Record(drop: $0.event.seq) }).sorted { $0.seq < $1.seq }
            keep(dropped: dropped.map(\.event.seq))
        }
        guard !records.isEmpty else { return (dropped, nil) }
        let acknowledged = removalsUnwritten.count
        let outcome = write { (log) throws(UplinkError) in try log.append(records, sync: true) }
        // Dead: each removed event's add and its del or drop record; a batch event given up at once, its drop record.
        return (dropped, finish(outcome, dead: 2 * (removals.count + acknowledged) + dropped.count - removals.count))
    }

    /// The event leaves; its removal record waits for the next write (see `removalsUnwritten`). While degraded
    /// nothing is kept for it: the rewrite that ends that state writes only what is still pending.
    public func remove(seq: UInt64) {
        guard let i = entries.firstIndex(where: { $0.event.seq == seq }) else { return }
        entries.remove(at: i)
        if !degraded { removalsUnwritten.append(seq) }
    }

    public var hasUnwrittenChanges: Bool { degraded || !removalsUnwritten.isEmpty || compactionDue }

    /// The broker has the announcement of these seqs: their drop records need not outlive the next compaction.
    public func dropsAnnounced(_ seqs: ClosedRange<UInt64>) { dropsKept = dropsKept.subtracting(SeqRuns([seqs])) }

    private func keep(dropped seqs: [UInt64]) {
        for seq in seqs { dropsKept.insert(seq) }
    }

    public func recordFloor(_ seq: UInt64) -> UplinkError? {
        acceptedHighest = max(acceptedHighest, seq)
        guard seq > log.highest else { return nil }
        // The removals waiting for a write go with it: `finish` forgets them once the write is done.
        let removals = removalRecords
        let records = removals + [OutboxLog.Record(floor: seq)]
        return finish(write { (log) throws(UplinkError) in try log.append(records, sync: true) }, dead: 1 + 2 * removals.count)
    }

    /// The waiting removals as records, for the next write to carry (see `removalsUnwritten`).
    private var removalRecords: [OutboxLog.Record] { removalsUnwritten.map { OutboxLog.Record(del: $0) } }

    public func discard(_ seqs: [UInt64]) -> UplinkError? {
        guard !seqs.isEmpty else { return nil }
        let gone = Set(seqs)
        entries.removeAll { gone.contains($0.event.seq) }
        keep(dropped: seqs)
        let removals = removalRecords
        let records = removals + SeqRuns(seqs: seqs).ranges.map { OutboxLog.Record(dropped: $0) }
        return finish(write { (log) throws(UplinkError) in try log.append(records, sync: true) },
                      dead: 2 * seqs.count + 2 * removals.count)
    }

    public func recordDrops(_ ranges: [ClosedRange<UInt64>]) -> UplinkError? {
        guard !ranges.isEmpty else { return nil }
        for range in ranges {
            dropsKept.insert(range)
            acceptedHighest = max(acceptedHighest, range.upperBound)
        }
        let removals = removalRecords
        let records = removals + ranges.map { OutboxLog.Record(dropped: $0) }
        return finish(write { (log) throws(UplinkError) in try log.append(records, sync: true) }, dead: 2 * removals.count)
    }

    /// The removed events' records are as many as the capacity: the file is to be compacted by `writeChanges()`,
    /// called when the loop has nothing else to do, so that no event waits behind the rewrite and its syncs (on an
    /// SD card, several times an event's own). At twice the capacity it is compacted at once, whatever comes next.
    public private(set) var compactionDue = false

    /// Writes the removals waiting for a write, alone (not synced: lost in a crash they only mean events sent
    /// once more), or, degraded, tries to put everything on disk again. For a quiet moment after
    /// acknowledgements, a retry after a failed write, and the stop.
    public func writeChanges() -> UplinkError? {
        guard hasUnwrittenChanges else { return nil }
        // A compaction writes what is pending, and so the removals too.
        if compactionDue && !degraded { return compactNow() }
        let records = removalRecords
        return finish(write { (log) throws(UplinkError) in try log.append(records, sync: false) }, dead: 2 * records.count)
    }

    public func replaceAll(_ replacement: [OutboxEntry]) -> UplinkError? {
        entries = replacement
        let outcome = write { (log) throws(UplinkError) in try log.rewrite(replacement, drops: dropsKept.ranges, floor: acceptedHighest) }
        let dead = -deadRecords   // the old file's records, all gone with it
        return finish(outcome, dead: dead)
    }

    private enum Write {
        case wrote
        /// Degraded until now: the whole file was rewritten instead (the write's own records are in it, and no
        /// dead record is left).
        case rewroteAll
        case failed(UplinkError)
    }

    /// Runs a write; on failure the outbox is degraded (memory holds what the disk misses).
    private func write(_ body: (OutboxLog) throws(UplinkError) -> Void) -> Write {
        if degraded {
            // Put everything on disk again before anything else.
            do { try log.rewrite(entries, drops: dropsKept.ranges, floor: acceptedHighest) } catch { return .failed(error) }
            degraded = false
            deadRecords = 0
            removalsUnwritten = []
            compactionDue = false
            return .rewroteAll
        }
        do { try body(log) } catch {
            degraded = true
            return .failed(error)
        }
        return .wrote
    }

    /// After a write: what failed, or, once the write's records (the waiting removals among them) are in the file,
    /// the records it made dead counted.
    private func finish(_ outcome: Write, dead: Int) -> UplinkError? {
        switch outcome {
        case .failed(let failure):
            return failure
        case .rewroteAll:
            return nil
        case .wrote:
            removalsUnwritten = []
            return countDead(dead)
        }
    }

    /// Counts records made dead by a successful write, and compacts when they are many.
    private func countDead(_ dead: Int) -> UplinkError? {
        deadRecords += dead
        if deadRecords >= 2 * capacity { return compactNow() }
        if deadRecords >= capacity { compactionDue = true }
        return nil
    }

    private func compactNow() -> UplinkError? {
        do { try compact() } catch {
            degraded = true
            compactionDue = false   // the rewrite that ends the degraded state compacts too
            return error
        }
        return nil
    }

    private func compact() throws(UplinkError) {
        try log.rewrite(entries, drops: dropsKept.ranges, floor: acceptedHighest)
        deadRecords = 0
        removalsUnwritten = []
        compactionDue = false
    }
}
