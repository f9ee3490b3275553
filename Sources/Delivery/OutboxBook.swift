/// The outbox's book, pure: which events it holds (by seq), and which records its file must get for each change —
/// adds, removals, drop and floor records, appended or the whole file rewritten — in the order that keeps every
/// prefix of the file honest. The file (`Sources/Uplink/Outbox/DurableOutbox.swift` over `OutboxLog`) makes each
/// `Write` it returns and reports `written()` or `failed()`; nothing else decides what the file says.
///
/// The rules the order keeps: adds and drop records in seq order, the floor last in a rewrite, and removal records
/// taken along by the next write of any kind. Whatever tail of the file a disk loses (at any record), the records
/// left run up to the highest seq they hold with none missing below, so the next start declares what lies above.
/// A write that fails leaves the book degraded: the next write, whatever asks for it, rewrites the whole file first.
public struct OutboxBook: Sendable {
    public enum Record: Equatable, Sendable {
        case add(UInt64), del(UInt64), drop(ClosedRange<UInt64>), floor(UInt64)

        /// The highest seq the record says was used (a removal says none).
        var stored: UInt64 {
            switch self {
            case .add(let seq), .floor(let seq): seq
            case .drop(let seqs): seqs.upperBound
            case .del: 0
            }
        }
    }

    /// Records to append (synced or not), or the file's whole new content (`rewrite`: replaced with one sync).
    public struct Write: Equatable, Sendable {
        public var records: [Record]
        public var sync: Bool
        public var rewrite: Bool
    }

    public let capacity: Int
    /// The events held, in seq order.
    public private(set) var pending: [UInt64]
    /// A write failed: some of what the book holds is not in the file, until a rewrite puts it all there.
    public private(set) var degraded = false
    /// Acknowledged events whose removal records wait for the next write (lost in a crash, they only mean events sent
    /// once more, same id and seq).
    private var removalsUnwritten: [UInt64] = []
    /// Events given up whose drop records the file keeps until their announcement is acknowledged: a rewrite writes
    /// them again, so the file alone tells a dropped seq from a delivered one at the next start.
    public private(set) var dropsKept: SeqRuns
    /// The highest seq ever given to this outbox (stored or not): a rewrite's floor.
    public private(set) var acceptedHighest: UInt64
    /// The highest seq a record in the file says was used.
    public private(set) var fileHighest: UInt64
    /// Records in the file that no longer stand for a pending event or a kept drop.
    private var deadRecords: Int
    /// The dead records are as many as the capacity: a rewrite is best made at the next quiet moment.
    public private(set) var compactionDue = false
    /// The write handed out and not yet reported, what it is, and the records it makes dead.
    private var waiting: (write: Write, kind: Kind, dead: Int)?

    private enum Kind { case append, recovery, compaction }

    public init(capacity: Int, pending: [UInt64], drops: [ClosedRange<UInt64>], highest: UInt64, deadRecords: Int) {
        self.capacity = capacity
        self.pending = pending
        dropsKept = SeqRuns(drops)
        acceptedHighest = highest
        fileHighest = highest
        self.deadRecords = deadRecords
    }

    /// Something the file does not have yet: removals waiting for a write, (degraded) events held in memory only, or
    /// a compaction that is due.
    public var hasUnwrittenChanges: Bool { degraded || !removalsUnwritten.isEmpty || compactionDue }

    // MARK: - Changes, and the writes they take

    /// A batch stored (one sync), and the seqs given up for it (older events, or the batch's own: those never added).
    public mutating func append(_ batch: [UInt64], dropped: [UInt64]) -> Write? {
        if dropped.isEmpty {
            // Room for the batch (every paced edge): its adds in seq order, nothing given up, no sets built.
            let adds = batch.indices.dropFirst().allSatisfy({ batch[$0 - 1] < batch[$0] }) ? batch : batch.sorted()
            pending += adds
            acceptedHighest = max(acceptedHighest, adds.last ?? 0)
            let acknowledged = removalsUnwritten.count
            return plan(removalRecords + adds.map { .add($0) }, sync: true, dead: 2 * acknowledged)
        }
        let gone = Set(dropped)
        let batchSeqs = Set(batch)
        pending.removeAll { gone.contains($0) }
        pending += batch.filter { !gone.contains($0) }
        acceptedHighest = max(acceptedHighest, batch.max() ?? 0)
        let removals = dropped.filter { !batchSeqs.contains($0) }
        for seq in dropped { dropsKept.insert(seq) }
        let acknowledged = removalsUnwritten.count
        // Adds and drop records in seq order: whatever prefix of the write a power cut leaves, the seqs it stored run
        // up to the highest one it holds with none missing below.
        let changes = (batch.filter { !gone.contains($0) }.map { ($0, Record.add($0)) } + dropped.map { ($0, Record.drop($0...$0)) })
            .sorted { $0.0 < $1.0 }.map(\.1)
        // Dead: each removed event's add and its del or drop record; a batch event given up at once, its drop record.
        return plan(removalRecords + changes, sync: true, dead: 2 * (removals.count + acknowledged) + dropped.count - removals.count)
    }

    /// The broker acknowledged the event: it leaves; its removal record waits for the next write (degraded: nothing
    /// waits, the rewrite that ends it writes only what is still held).
    public mutating func remove(_ seq: UInt64) {
        guard let i = pending.firstIndex(of: seq) else { return }
        pending.remove(at: i)
        if !degraded { removalsUnwritten.append(seq) }
    }

    /// The broker has the announcement of these seqs: their drop records need not outlive the next rewrite.
    public mutating func dropsAnnounced(_ seqs: ClosedRange<UInt64>) { dropsKept = dropsKept.subtracting(SeqRuns([seqs])) }

    /// Seqs up to `seq` were used (an announcement's, which the outbox never holds): a floor record, synced.
    public mutating func recordFloor(_ seq: UInt64) -> Write? {
        acceptedHighest = max(acceptedHighest, seq)
        guard seq > fileHighest else { return nil }
        let removals = removalRecords
        return plan(removals + [.floor(seq)], sync: true, dead: 1 + 2 * removals.count)
    }

    /// Events loaded at start that are settled or already declared: drop records of them, synced, never sent.
    public mutating func discard(_ seqs: [UInt64]) -> Write? {
        guard !seqs.isEmpty else { return nil }
        let gone = Set(seqs)
        pending.removeAll { gone.contains($0) }
        for seq in seqs { dropsKept.insert(seq) }
        let removals = removalRecords
        return plan(removals + SeqRuns(seqs: seqs).ranges.map { .drop($0) }, sync: true, dead: 2 * seqs.count + 2 * removals.count)
    }

    /// Seqs a start found unaccounted for, given up: drop records, synced, kept like the overflow's.
    public mutating func recordDrops(_ ranges: [ClosedRange<UInt64>]) -> Write? {
        guard !ranges.isEmpty else { return nil }
        for range in ranges {
            dropsKept.insert(range)
            acceptedHighest = max(acceptedHighest, range.upperBound)
        }
        let removals = removalRecords
        return plan(removals + ranges.map { .drop($0) }, sync: true, dead: 2 * removals.count)
    }

    /// What `hasUnwrittenChanges` says waits: the removals alone (not synced), a compaction, or (degraded) everything.
    public mutating func writeChanges() -> Write? {
        guard hasUnwrittenChanges else { return nil }
        if compactionDue && !degraded { return compaction() }
        let records = removalRecords
        return plan(records, sync: false, dead: 2 * records.count)
    }

    /// The whole file written again from what the book holds (the same events, e.g. with corrected times).
    public mutating func rewriteAll() -> Write { compaction() }

    // MARK: - Outcomes

    /// The write went through. Returns a compaction due at once (the dead records are twice the capacity), if any:
    /// the file makes it and reports it like any other.
    public mutating func written() -> Write? {
        guard let (write, kind, dead) = waiting else { return nil }
        waiting = nil
        fileHighest = max(fileHighest, write.records.map(\.stored).max() ?? 0)
        switch kind {
        case .recovery, .compaction:
            degraded = false
            deadRecords = 0
            removalsUnwritten = []
            compactionDue = false
            return nil
        case .append:
            removalsUnwritten = []
            deadRecords += dead
            if deadRecords >= 2 * capacity { return compaction() }
            if deadRecords >= capacity { compactionDue = true }
            return nil
        }
    }

    /// The write failed: degraded until a rewrite goes through (a compaction that fails is not due any more: the
    /// rewrite that ends the degraded state compacts too).
    public mutating func failed() {
        guard let (_, kind, _) = waiting else { return }
        waiting = nil
        degraded = true
        if kind == .compaction { compactionDue = false }
    }

    // MARK: - Rules

    private var removalRecords: [Record] { removalsUnwritten.map { .del($0) } }

    /// The write a change takes: degraded, the whole file first instead (its records include this change's).
    private mutating func plan(_ records: [Record], sync: Bool, dead: Int) -> Write? {
        if degraded {
            let write = Write(records: contents, sync: true, rewrite: true)
            waiting = (write, .recovery, 0)
            return write
        }
        guard !records.isEmpty else { return nil }
        let write = Write(records: records, sync: sync, rewrite: false)
        waiting = (write, .append, dead)
        return write
    }

    private mutating func compaction() -> Write {
        let write = Write(records: contents, sync: true, rewrite: true)
        waiting = (write, degraded ? .recovery : .compaction, 0)
        return write
    }

    /// The file as a rewrite leaves it: drops and adds in seq order, the floor last (it vouches for every seq below
    /// it, so a lost tail takes it along with the records it vouched for).
    private var contents: [Record] {
        let top = max(fileHighest, acceptedHighest, pending.max() ?? 0, dropsKept.highest ?? 0)
        let records = dropsKept.ranges.map { ($0.lowerBound, Record.drop($0)) } + pending.map { ($0, Record.add($0)) }
        return records.sorted { $0.0 < $1.0 }.map(\.1) + [.floor(top)]
    }
}
