/// The delivery promise to the backend, in one place:
///
/// 1. **Every seq arrives or lies in a declared range.** A seq the device gave out is delivered (QoS 1, sent again
///    until the broker acknowledges it) or declared dropped by an `outbox.dropped` event naming its range.
/// 2. **A declared seq never arrives.** A range names exactly the seqs given up — never one that was kept — and a seq
///    is declared only if it was never handed to the broker: an event handed once may arrive whatever happens next,
///    so it is never chosen to make room, and a start declares only seqs no record shows handed or kept.
/// 3. **A seq is never reused** (`SeqCounter`: a seq is given out only under a reservation asked for first, and goes out
///    only once a reservation on disk covers it).
///
/// Residues, which CONTRACT.md states: after a crash while the disk refused the outbox's writes (a storage fault
/// was announced), events that had been sent from memory may lie in a declared range; a stretch of the outbox file
/// destroyed on the disk itself, or the state file lost, is declared whole, so it may cover events delivered long
/// before; and an event given up whose drop record such a stretch took along may be sent again, unless the settled
/// seq had passed it.
///
/// Pure: no I/O, no clock. `DeliveryCore` runs it: it tells it what happened —
/// events accepted or given up, the state file saved, a connection up or lost, an event handed or acknowledged, an
/// announcement acknowledged — and takes the `Action`s it returns (those for the shell become its effects).
///
/// The life of a declaration: `unsaved` (decided, in memory) → `durable` (the state file or the outbox's drop
/// records hold it) → `announcing(seq)` (an `outbox.dropped` event with that seq tells it, same id and seq on every
/// connection until acknowledged) → gone (acknowledged: the outbox may forget its drop records). Only a durable
/// declaration is announced: one announced and then lost in a crash would be announced again differently.
public struct DeliveryLedger: Sendable {
    public struct Declaration: Equatable, Sendable {
        public var seqs: ClosedRange<UInt64>
        public var phase: Phase

        public enum Phase: Equatable, Sendable {
            /// Given up by the outbox while its disk refused the write: its drop records are not on disk, and the
            /// file may still hold the events themselves (a crash now would bring them back, to be sent). Announced
            /// only once a write of the outbox succeeds again (`outboxRecorded()`).
            case unrecorded
            /// Decided and held in memory only: the next save of the state file makes it durable.
            case unsaved
            case durable
            /// Told by the `outbox.dropped` event with this seq; `ready` once that event may be handed (the state file
            /// holds it and the outbox's floor covers its seq, so a restart neither forgets it nor declares its seq).
            case announcing(seq: UInt64, ready: Bool)
        }

        public init(seqs: ClosedRange<UInt64>, phase: Phase) {
            self.seqs = seqs
            self.phase = phase
        }

        var announced: Bool { if case .announcing = phase { true } else { false } }

        /// Joining two unannounced declarations: the result is only as safe as the less safe of them.
        static func weaker(_ a: Phase, _ b: Phase) -> Phase {
            if a == .unrecorded || b == .unrecorded { return .unrecorded }
            if a == .unsaved || b == .unsaved { return .unsaved }
            return a
        }
    }

    public enum Action: Equatable, Sendable {
        /// The declarations changed: write the state file (then call `stateSaved()`).
        case saveState
        /// Stamp an `outbox.dropped` event for exactly these seqs (`dropped` = their count), then call `announcing`.
        case announce(ClosedRange<UInt64>)
        /// The announcement may go out now (saved, its seq under the outbox's floor): hand it to the link.
        case handAnnouncement(seq: UInt64)
        /// Write a floor record of this seq into the outbox and sync it (then call `floorWritten`).
        case writeFloor(UInt64)
        /// The broker has the announcement of these seqs: the outbox may forget their drop records.
        case releaseDropRecords(ClosedRange<UInt64>)
        /// Seqs a start found unaccounted for: drop records of them into the outbox, synced, before anything else is
        /// written there (a floor written first would vouch for them, and a crash before the state file holds their
        /// declaration would leave them silently gone).
        case recordDrops([ClosedRange<UInt64>])
        /// Events loaded at start that are settled (acknowledged or declared) or that an announcement already declared:
        /// removed, never sent.
        case discardPending([UInt64])
    }

    /// Declared ranges at most before the overflow stops choosing among older events and gives up the incoming ones
    /// (which extend the last range): bounds the state file, the drop records and the announcements.
    public static let rangesAtMost = 256

    /// Sorted by seq, disjoint; adjacent ones are joined while neither is announced.
    public private(set) var declarations: [Declaration] = []
    /// Seqs accepted into the outbox, not acknowledged, not given up.
    public private(set) var pending: Set<UInt64> = []
    /// The lowest pending seq, kept where `pending` changes (`lowestPendingRemoved`): `settled` is read after every
    /// batch, and a walk of every pending seq there cost each event of an outage as much as the outbox held (issue 37).
    private var lowestPending: UInt64?
    /// Seqs that may have reached the broker and are not acknowledged: handed to the link on any connection (the
    /// outbox hands only what it holds), or loaded at start (the last run may have sent them). Sticky until acknowledged.
    public private(set) var handed: Set<UInt64> = []
    /// The highest seq stamped so far (this run or before).
    public private(set) var stamped: UInt64
    public private(set) var connected = false

    // MARK: - Start

    /// What the disk held at start.
    public struct StartContents: Sendable {
        /// The last run's settled seq (its sequence ledger's; 0 when unknown): every seq up to it was acknowledged or
        /// its declaration acknowledged.
        public var settled: UInt64 = 0
        /// The seq this run counts on from: the highest the ledger, the state file or the outbox names.
        public var top: UInt64 = 0
        /// The state file could not be read (both copies), though the ledger says a run was there.
        public var stateLost = false
        /// The state file's declarations not yet announced.
        public var stateDeclared: [ClosedRange<UInt64>] = []
        /// The state file's announcement: its seq, the seqs it declares, and whether it declares exactly them (an
        /// older agent's range may hold seqs it kept).
        public var announcement: (seq: UInt64, seqs: ClosedRange<UInt64>, exact: Bool)?
        /// What the outbox file held, or nil when it could not be read at all.
        public var outbox: Outbox?

        public struct Outbox: Sendable {
            public var pending: [UInt64] = []
            /// Removal records: the broker acknowledged these.
            public var acknowledged: Set<UInt64> = []
            /// Drop records (given up, declared or to be) and stretches of damage (the seqs they may have held).
            public var dropRecords: [ClosedRange<UInt64>] = []
            /// The highest seq the outbox ever stored (its floor).
            public var highest: UInt64 = 0
            public init() {}
        }

        public init() {}
    }

    /// The ledger a start begins with, and what to do before anything is sent: the seqs found unaccounted for are
    /// declared (`newlyDeclared`, for the log), exactly — never a seq a record shows pending, acknowledged or told.
    public init(start disk: StartContents) {
        stamped = disk.top
        // (Built in one pass: inserting thousands of single seqs one by one would cost a start seconds.)
        var known = SeqRuns(seqs: (disk.outbox?.pending ?? []) + Array(disk.outbox?.acknowledged ?? []))
        if disk.settled > 0 { known.insert(1...disk.settled) }
        // An announcement whose own seq the ledger counts settled was acknowledged (the state file that still names
        // it missed the save that followed): done, not sent again.
        let announcement = disk.announcement.flatMap { $0.seq > disk.settled ? $0 : nil }
        settledAtStart = disk.settled
        var told = SeqRuns()
        if let a = announcement {
            told.insert(a.seqs)
            told.insert(a.seq)
        }
        let stateDeclared = SeqRuns(disk.stateDeclared).subtracting(known).subtracting(told)
        var candidates = SeqRuns()
        let from: UInt64
        if let outbox = disk.outbox {
            candidates = SeqRuns(outbox.dropRecords)
            // Only the outbox's own records say a seq was stored and accounted for: a declaration or an announcement
            // above them says nothing of the seqs below it (a file cut below its floor record, or set aside, holds
            // none of them: they are declared, never lost silently).
            from = disk.stateLost ? disk.settled : max(disk.settled, outbox.highest)
        } else {
            from = disk.settled
        }
        if from < disk.top { candidates.insert((from + 1)...disk.top) }
        let fresh = candidates.subtracting(known).subtracting(told).subtracting(stateDeclared)
        newlyDeclared = fresh.ranges
        for range in stateDeclared.ranges { add(range, .durable) }
        for range in fresh.ranges { add(range, .unsaved) }
        if let a = announcement { add(a.seqs, .announcing(seq: a.seq, ready: false)) }
        var discard: [UInt64] = []
        for seq in disk.outbox?.pending ?? [] {
            // At or below the settled seq, an event was acknowledged or declared by an acknowledged announcement: a file
            // that still holds it lost the record that says which (a cut tail), and sending it could have a declared
            // seq arrive. The backend has it or has its declaration; either way it is not sent.
            if seq <= disk.settled { discard.append(seq); continue }
            if let a = announcement, a.exact, a.seqs.contains(seq) { discard.append(seq) } else { pending.insert(seq) }
        }
        handed = pending
        lowestPending = pending.min()
        floorCovers = disk.outbox?.highest ?? .max
        startActions = discard.isEmpty ? [] : [.discardPending(discard)]
        if !fresh.isEmpty { startActions.insert(.recordDrops(fresh.ranges), at: 0) }
        if let a = announcement, a.seq > floorCovers { startActions.append(.writeFloor(a.seq)) }
        if !fresh.isEmpty || stateDeclared.ranges != SeqRuns(disk.stateDeclared).ranges || !discard.isEmpty
            || (disk.announcement != nil && announcement == nil) {
            startActions.append(.saveState)
        }
    }

    /// The ranges the start declared that no file had declared before (for the log).
    public private(set) var newlyDeclared: [ClosedRange<UInt64>] = []
    /// What the start needs done before anything is sent.
    public private(set) var startActions: [Action] = []

    // MARK: - Inputs

    /// Seqs stamped (events, announcements): `settled` never counts past them.
    public mutating func stamped(upTo seq: UInt64) { stamped = max(stamped, seq) }

    /// Which pending events the outbox may give up to make room for a batch: every one but these. Never an event
    /// that may have reached the broker; with `rangesAtMost` ranges declared, none at all (the batch's own then).
    public var sparing: Set<UInt64> { declarations.count >= Self.rangesAtMost ? pending : handed }

    /// The outbox took a batch (`seqs`, in order) and gave up `dropped` for it (older events or the batch's own).
    /// `recorded`: the outbox's drop records of them are on disk (its write succeeded).
    public mutating func accepted(_ seqs: [UInt64], dropped: [UInt64], recorded: Bool) -> [Action] {
        for seq in seqs { stamped = max(stamped, seq) }
        pending.formUnion(seqs)
        if let low = seqs.min(), low < lowestPending ?? .max { lowestPending = low }
        guard !dropped.isEmpty else { return [] }
        for seq in dropped {
            precondition(!handed.contains(seq), "seq \(seq) was handed to the broker: it may arrive, and is never given up")
            pending.remove(seq)
            lowestPendingRemoved(seq)
        }
        for range in SeqRuns(seqs: dropped).ranges { add(range, recorded ? .durable : .unrecorded) }
        return [.saveState] + announcementDue()
    }

    /// The state file now holds every declaration (and the announcement) as they are.
    public mutating func stateSaved() -> [Action] {
        for i in declarations.indices {
            switch declarations[i].phase {
            case .unsaved: declarations[i].phase = .durable
            case .unrecorded, .durable, .announcing: break
            }
        }
        stateHoldsAnnouncement = true
        return announcementDue()
    }

    /// The outbox wrote to its disk again after failing: the drop records it kept in memory are on disk now.
    public mutating func outboxRecorded() -> [Action] {
        guard declarations.contains(where: { $0.phase == .unrecorded }) else { return [] }
        for i in declarations.indices where declarations[i].phase == .unrecorded { declarations[i].phase = .durable }
        return announcementDue()
    }

    private var stateHoldsAnnouncement = true
    /// An `.announce` returned and not yet answered by `announcing`.
    private var announceAsked: ClosedRange<UInt64>?
    private var announcementHanded = false
    private var floorCovers: UInt64 = 0

    /// The outbox's floor covers `seq` on disk.
    public mutating func floorWritten(_ seq: UInt64) -> [Action] {
        floorCovers = max(floorCovers, seq)
        return announcementDue()
    }

    public mutating func linkUp() -> [Action] {
        connected = true
        return announcementDue()
    }

    public mutating func linkDown() { connected = false }

    /// The link took the event (it may reach the broker from now on, whatever happens). Told in whatever order the
    /// adapters learn it: an event handed before its batch's `accepted` is still never given up.
    public mutating func handed(_ seq: UInt64) {
        handed.insert(seq)
    }

    public mutating func acknowledged(_ seq: UInt64) {
        pending.remove(seq)
        lowestPendingRemoved(seq)
        handed.remove(seq)
    }

    /// An announcement was stamped for `seqs` with `seq`.
    public mutating func announcing(_ seqs: ClosedRange<UInt64>, seq: UInt64) -> [Action] {
        stamped = max(stamped, seq)
        announceAsked = nil
        guard let i = declarations.firstIndex(where: { $0.seqs == seqs && !$0.announced }) else { return [] }
        declarations[i].phase = .announcing(seq: seq, ready: false)
        stateHoldsAnnouncement = false
        announcementHanded = false
        return [.saveState, .writeFloor(seq)]
    }

    /// The broker acknowledged the announcement with this seq.
    public mutating func announcementAcknowledged(_ seq: UInt64) -> [Action] {
        guard let i = declarations.firstIndex(where: {
            if case .announcing(seq, _) = $0.phase { true } else { false }
        }) else { return [] }
        let told = declarations.remove(at: i).seqs
        return [.releaseDropRecords(told), .saveState] + announcementDue()
    }

    /// Once the lowest pending seq leaves, the next one up: among many, the next seq as a rule (events are acknowledged
    /// in order), found by a short look; past it (a gap of declared drops), and among a few, by a walk.
    private mutating func lowestPendingRemoved(_ seq: UInt64) {
        guard seq == lowestPending else { return }
        guard pending.count > 64 else {   // (a walk of so few costs no more than the look)
            lowestPending = pending.min()
            return
        }
        var next = seq
        for _ in 0..<64 {
            guard next < .max else { break }
            next += 1
            if pending.contains(next) {
                lowestPending = next
                return
            }
        }
        lowestPending = pending.min()
    }

    // MARK: - Reading

    /// Every seq up to this one was acknowledged or told by an acknowledged announcement (for the sequence ledger).
    public var settled: UInt64 {
        // (Never below the start's: everything up to it was settled then, whatever a stale file says.)
        var low = stamped
        if let oldest = lowestPending { low = min(low, oldest - 1) }
        if let first = declarations.first { low = min(low, first.seqs.lowerBound - 1) }
        for d in declarations { if case .announcing(let seq, _) = d.phase { low = min(low, seq - 1) } }
        return max(low, min(settledAtStart, stamped))
    }

    /// The sequence ledger's settled seq at start.
    private var settledAtStart: UInt64 = 0

    /// The announcement under way, if any: its seq and the seqs it tells.
    public var announcement: (seq: UInt64, seqs: ClosedRange<UInt64>)? {
        for d in declarations { if case .announcing(let seq, _) = d.phase { return (seq, d.seqs) } }
        return nil
    }

    /// Declared and not yet announced (for the state file), in order.
    public var unannounced: [ClosedRange<UInt64>] { declarations.filter { !$0.announced }.map(\.seqs) }
    /// Whether `unannounced` has any (read before every save; no arrays built for none).
    public var hasUnannounced: Bool { declarations.contains { !$0.announced } }

    public var declaredSeqCount: UInt64 { declarations.reduce(0) { $0 + UInt64($1.seqs.count) } }

    // MARK: - Rules

    /// One announcement at a time, of the first durable declaration, only while connected; and once it is saved and
    /// its seq is under the floor, it may be handed.
    private mutating func announcementDue() -> [Action] {
        for i in declarations.indices {
            if case .announcing(let seq, let ready) = declarations[i].phase {
                if !ready {
                    guard stateHoldsAnnouncement, floorCovers >= seq else { return [] }
                    declarations[i].phase = .announcing(seq: seq, ready: true)
                }
                // Handed once: the link's session sends it again, same id and seq, on every connection until acknowledged.
                guard connected, !announcementHanded else { return [] }
                announcementHanded = true
                return [.handAnnouncement(seq: seq)]
            }
        }
        // Asked once: an action list performed after a nested one must not stamp a second announcement.
        guard connected, announceAsked == nil, let first = declarations.first(where: { $0.phase == .durable }) else { return [] }
        announceAsked = first.seqs
        return [.announce(first.seqs)]
    }

    /// Adds a declaration, joining an unannounced neighbour it touches (the result is unsaved if either part is).
    private mutating func add(_ seqs: ClosedRange<UInt64>, _ phase: Declaration.Phase) {
        var new = Declaration(seqs: seqs, phase: phase)
        var i = declarations.firstIndex { $0.seqs.lowerBound > seqs.lowerBound } ?? declarations.count
        if !new.announced, i > 0, !declarations[i - 1].announced, declarations[i - 1].seqs.upperBound + 1 >= new.seqs.lowerBound {
            let before = declarations.remove(at: i - 1)
            i -= 1
            new = Declaration(seqs: min(before.seqs.lowerBound, new.seqs.lowerBound)...max(before.seqs.upperBound, new.seqs.upperBound),
                              phase: Declaration.weaker(before.phase, new.phase))
        }
        if !new.announced, i < declarations.count, !declarations[i].announced, new.seqs.upperBound + 1 >= declarations[i].seqs.lowerBound {
            let after = declarations.remove(at: i)
            new = Declaration(seqs: new.seqs.lowerBound...max(new.seqs.upperBound, after.seqs.upperBound),
                              phase: Declaration.weaker(after.phase, new.phase))
        }
        declarations.insert(new, at: i)
    }
}
