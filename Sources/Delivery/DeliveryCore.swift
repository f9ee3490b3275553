/// The delivery half of the agent's loop, pure: the delivery ledger and the session's event window (which events are
/// handed to the link, in flight, acknowledged or refused, which wait for a reservation on disk or for the broker to
/// stop refusing) in one state machine. The shell (the agent's runtime, `Tests/DeliveryTests`' model world) tells it
/// what happened with `handle(_:at:)` and carries out the `Effect`s it queues, one at a time, feeding their outcomes
/// back as inputs: no recursion, one queue, and no order of calls in the glue decides whether the promise holds.
///
/// Why one machine and not two: an event handed to the link is recorded as handed in the same step that hands it, so
/// the overflow can never give up an event that may have reached the broker (issue 32, defect 1: the session handed
/// events inside the outbox's accept, before the ledger heard of them). New events are handed only once the outbox
/// file reported them stored (`stored`).
///
/// Times are CLOCK_MONOTONIC nanoseconds the shell reads (the core has no clock); the one timer here is the backoff
/// before refused events are sent again (`nextDeadline`).
public struct DeliveryCore: Sendable {
    public enum Input: Equatable, Sendable {
        /// The outbox file took a batch (`seqs`, in order) and gave up `dropped` for it; `recorded`: its write succeeded.
        case stored(seqs: [UInt64], dropped: [UInt64], recorded: Bool)
        /// The state file holds the ledger's declarations and announcement as they were when `saveState` ran.
        case stateSaved
        /// An `outbox.dropped` event was stamped with `seq` for these seqs (answer to `stampAnnouncement`).
        case announcementStamped(seqs: ClosedRange<UInt64>, seq: UInt64)
        /// A `writeFloor` reached the disk, or the disk refused it (tried again after `outboxWrites`).
        case floorWritten(UInt64)
        case floorRefused(UInt64)
        /// The outbox file takes writes (again): what it held in memory is on disk.
        case outboxWrites
        /// Events up to this seq may go out (the sequence ledger's reservation on disk covers them).
        case sendable(upTo: UInt64)
        case connected
        case disconnected
        /// The broker's answer to a `send` or `sendAnnouncement` on the current connection.
        case acknowledged(UInt64)
        case announcementAcknowledged(UInt64)
        case refused(UInt64, reason: String)
        case announcementRefused(UInt64, reason: String)
        /// Time passed (a deadline from `nextDeadline`).
        case time
    }

    public enum Effect: Equatable, Sendable {
        /// Write the state file (the ledger's `unannounced` and the announcement), then `stateSaved` if it took it.
        case saveState
        /// Stamp an `outbox.dropped` event for exactly these seqs, then `announcementStamped`.
        case stampAnnouncement(ClosedRange<UInt64>)
        /// Write a floor record of this seq into the outbox file and sync it, then `floorWritten` or `floorRefused`.
        case writeFloor(UInt64)
        /// The broker has the announcement of these seqs: the outbox file may forget their drop records.
        case releaseDropRecords(ClosedRange<UInt64>)
        /// Events loaded at start that are settled or that an announcement already declared: removed from the file, never sent.
        case discard([UInt64])
        /// Seqs a start found unaccounted for: drop records of them into the outbox file, synced, before anything else.
        case recordDrops([ClosedRange<UInt64>])
        /// Publish the event (QoS 1) on the current connection; `replayed`: it was pending when the connection came up.
        case send(UInt64, replayed: Bool)
        case sendAnnouncement(UInt64, replayed: Bool)
        /// The broker acknowledged the event: the outbox file removes it.
        case remove(UInt64)
        /// The broker refused a publish (MQTT 5 reason code 0x80 or more): say so (events wait until `retryAt`).
        case refused(UInt64, reason: String, retryAt: Int64?)
        /// The broker acknowledges again after refusing.
        case refusalEnded
    }

    /// The promise's bookkeeping (declarations, pending, handed, settled).
    public private(set) var ledger: DeliveryLedger
    /// Pending seqs, ascending: what the outbox holds, in the order it is sent.
    public private(set) var queue: [UInt64]
    public let window: Int
    public let capacity: Int

    public private(set) var connected = false
    /// Events handed on this connection and not answered.
    public private(set) var inFlight: Set<UInt64> = []
    /// The highest seq handed on this connection (events go out in seq order).
    private var sentUpTo: UInt64 = 0
    /// Events pending when this connection came up are sent marked `replayed`.
    private var replayUpTo: UInt64 = 0
    /// Events above this seq wait: no reservation on disk covers them yet.
    public private(set) var sendableUpTo: UInt64 = .max
    /// The announcement the ledger let go out, and whether it went out on this connection.
    private var announcement: UInt64?
    private var announcementSent = false
    /// A floor the outbox's disk refused: written again once it writes.
    private var floorWanted: UInt64?

    /// Events the broker refused on this connection, sent again (first) after the backoff.
    private var refusedSeqs: Set<UInt64> = []
    /// What the broker refuses now, if it does: its words and the first seq it refused.
    public private(set) var refusal: (reason: String, firstSeq: UInt64)?
    /// Events wait for the backoff's end (states and the status are the shell's and still go).
    public private(set) var refusalWaits = false
    private var refusalRetryAt: Int64?
    private var refusalRetryWait = DeliveryCore.firstRetryWait

    public static let firstRetryWait: Int64 = 2_000_000_000
    public static let longestRetryWait: Int64 = 64_000_000_000

    private var effects: [Effect] = []
    private var next = 0

    /// The core a start begins with: what the disk held (`StartContents`), the in-flight `window` and the outbox's
    /// `capacity`. The start's own effects (declarations saved, loaded events discarded, a floor) are queued.
    public init(start disk: DeliveryLedger.StartContents, window: Int, capacity: Int) {
        ledger = DeliveryLedger(start: disk)
        queue = ledger.pending.sorted()
        self.window = max(1, window)
        self.capacity = capacity
        take(ledger.startActions)
    }

    // MARK: - The effect queue

    /// The next effect to carry out, in the order they were decided.
    public mutating func nextEffect() -> Effect? {
        guard next < effects.count else {
            if !effects.isEmpty { effects.removeAll(keepingCapacity: true); next = 0 }
            return nil
        }
        defer { next += 1 }
        return effects[next]
    }

    /// Effects decided and not yet taken.
    public var effectsWaiting: Int { effects.count - next }

    // MARK: - Inputs

    public mutating func handle(_ input: Input, at now: @autoclosure () -> Int64) {
        switch input {
        case .stored(let seqs, let dropped, let recorded):
            let gone = Set(dropped)
            for seq in seqs where !gone.contains(seq) { insert(seq) }
            for seq in dropped { remove(seq) }
            take(ledger.accepted(seqs, dropped: dropped, recorded: recorded))
            pump()
        case .stateSaved:
            take(ledger.stateSaved())
        case .announcementStamped(let seqs, let seq):
            take(ledger.announcing(seqs, seq: seq))
        case .floorWritten(let seq):
            if floorWanted == seq { floorWanted = nil }
            take(ledger.floorWritten(seq))
        case .floorRefused(let seq):
            floorWanted = max(floorWanted ?? 0, seq)
        case .outboxWrites:
            take(ledger.outboxRecorded())
            if let seq = floorWanted {
                floorWanted = nil
                effects.append(.writeFloor(seq))
            }
        case .sendable(let seq):
            let raised = seq > sendableUpTo
            sendableUpTo = seq
            if raised { pump() }
        case .connected:
            forgetConnection()
            connected = true
            replayUpTo = max(queue.last ?? 0, announcement ?? 0)
            take(ledger.linkUp())
            pump()
        case .disconnected:
            forgetConnection()
            connected = false
            ledger.linkDown()
        case .acknowledged(let seq):
            guard inFlight.remove(seq) != nil else { return }
            remove(seq)
            ledger.acknowledged(seq)
            effects.append(.remove(seq))
            endRefusal()
            pump()
        case .announcementAcknowledged(let seq):
            guard announcement == seq else { return }
            announcement = nil
            announcementSent = false
            take(ledger.announcementAcknowledged(seq))
            endRefusal()
            pump()
        case .refused(let seq, let reason):
            guard inFlight.remove(seq) != nil else { return }
            refusedSeqs.insert(seq)
            noteRefusal(reason, seq: seq, at: now())
        case .announcementRefused(let seq, let reason):
            guard announcement == seq, announcementSent else { return }
            announcementSent = false
            noteRefusal(reason, seq: seq, at: now())
        case .time:
            if let due = refusalRetryAt, due <= now() {
                refusalRetryAt = nil
                refusalWaits = false
                pump()
            }
        }
    }

    // MARK: - Reading

    /// Which pending events the outbox may give up to make room for `adding` more: every one but these (the ledger's
    /// `sparing`: never one that may have reached the broker). Empty while there is room (nothing is given up).
    public func sparing(adding count: Int) -> Set<UInt64> {
        queue.count + count > capacity ? ledger.sparing : []
    }

    /// The next instant the core wants a `time` input (nil: none).
    public var nextDeadline: Int64? { refusalRetryAt }

    /// Nothing handed is unanswered, and nothing the outbox holds that may go out waits to (for a graceful stop).
    public var everythingAcknowledged: Bool {
        inFlight.isEmpty && min(queue.last ?? 0, sendableUpTo) <= sentUpTo
            && !(announcement.map { !announcementSent && $0 <= sendableUpTo } ?? false)
    }

    /// Events waiting for a seq reservation on disk, the announcement among them, and the lowest of their seqs.
    public var held: (count: Int, firstSeq: UInt64?) {
        var seqs = queue.filter { $0 > sendableUpTo }
        if let announcement, !announcementSent, announcement > sendableUpTo { seqs.append(announcement) }
        return (seqs.count, seqs.min())
    }

    public var settled: UInt64 { ledger.settled }

    /// Something waits for the outbox file to take writes again (`outboxWrites`): a floor, or drops it gave up unrecorded.
    public var waitsForOutbox: Bool {
        floorWanted != nil || ledger.declarations.contains { $0.phase == .unrecorded }
    }

    // MARK: - Rules

    /// Carries out the ledger's actions: its own (hand the announcement) here, the rest queued for the shell.
    private mutating func take(_ actions: [DeliveryLedger.Action]) {
        for action in actions {
            switch action {
            case .saveState: effects.append(.saveState)
            case .announce(let seqs): effects.append(.stampAnnouncement(seqs))
            case .writeFloor(let seq): effects.append(.writeFloor(seq))
            case .releaseDropRecords(let seqs): effects.append(.releaseDropRecords(seqs))
            case .recordDrops(let ranges): effects.append(.recordDrops(ranges))
            case .discardPending(let seqs):
                for seq in seqs { remove(seq) }
                effects.append(.discard(seqs))
            case .handAnnouncement(let seq):
                announcement = seq
                announcementSent = false
                pump()
            }
        }
    }

    /// Hands the link the next events in seq order (the announcement in its place): refused ones first once the
    /// backoff ended, at most `window` unanswered, none above `sendableUpTo`.
    private mutating func pump() {
        guard connected, !refusalWaits else { return }
        if !refusedSeqs.isEmpty {
            for seq in queue where refusedSeqs.contains(seq) {
                guard inFlight.count < window else { return }
                refusedSeqs.remove(seq)
                hand(seq)
            }
            refusedSeqs.removeAll()   // (those no longer pending)
        }
        var i = firstIndex(above: sentUpTo)
        while i < queue.count {
            let seq = queue[i]
            if let announcement, !announcementSent, announcement < seq, announcement <= sendableUpTo { sendAnnouncement() }
            guard seq <= sendableUpTo, inFlight.count < window else { return }
            sentUpTo = seq
            hand(seq)
            i += 1
        }
        if let announcement, !announcementSent, announcement <= sendableUpTo { sendAnnouncement() }
    }

    /// Handed and recorded as handed in one step: from now on it may arrive, whatever happens.
    private mutating func hand(_ seq: UInt64) {
        inFlight.insert(seq)
        ledger.handed(seq)
        effects.append(.send(seq, replayed: seq <= replayUpTo))
    }

    private mutating func sendAnnouncement() {
        guard let announcement else { return }
        announcementSent = true
        effects.append(.sendAnnouncement(announcement, replayed: announcement <= replayUpTo))
    }

    private mutating func noteRefusal(_ reason: String, seq: UInt64, at now: Int64) {
        if refusal == nil { refusal = (reason, seq) }
        refusalWaits = true
        if refusalRetryAt == nil {
            refusalRetryAt = now + refusalRetryWait
            refusalRetryWait = min(refusalRetryWait * 2, Self.longestRetryWait)
        }
        effects.append(.refused(seq, reason: reason, retryAt: refusalRetryAt))
    }

    private mutating func endRefusal() {
        guard refusal != nil || refusalRetryWait != Self.firstRetryWait else { return }
        refusalRetryWait = Self.firstRetryWait
        guard refusal != nil else { return }
        refusal = nil
        effects.append(.refusalEnded)
    }

    /// A new connection, or none: nothing handed on the old one counts (the ledger's `handed` stays: it may arrive).
    private mutating func forgetConnection() {
        inFlight.removeAll()
        refusedSeqs.removeAll()
        refusalWaits = false
        refusalRetryAt = nil
        sentUpTo = 0
        replayUpTo = 0
        announcementSent = false
    }

    private mutating func insert(_ seq: UInt64) {
        if let last = queue.last, last > seq {
            queue.insert(seq, at: firstIndex(above: seq))
        } else {
            queue.append(seq)
        }
    }

    private mutating func remove(_ seq: UInt64) {
        guard seq > 0 else { return }
        let i = firstIndex(above: seq - 1)
        if i < queue.count, queue[i] == seq { queue.remove(at: i) }
    }

    /// The index of the first pending seq above `seq` (binary search: `queue` is ascending).
    private func firstIndex(above seq: UInt64) -> Int {
        var low = 0, high = queue.count
        while low < high {
            let mid = (low + high) / 2
            if queue[mid] <= seq { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
