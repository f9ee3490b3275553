import SystemIO
import Glibc
import FoundationEssentials
import ParkWiseLog
import Uplink

/// What must survive a restart beside the outbox: the start counter (`boot`), the last event
/// sequence number (so `seq` only ever increases) and the levels' lane counts (so a restart neither
/// forgets a calibration nor counts a vehicle twice). Saved before the events it covers are sent.
///
/// `boot` and `seq` live in two places: the sequence ledger (blocks of seqs reserved durably before
/// use, writable on a full disk) and `device-state.json`; a start takes the higher of each, so no
/// damage to one of them sends either back. `device-state.json` itself is written twice (the file
/// and `device-state.json.bak`), so one unreadable copy loses neither the drops nor the announcement.
struct DeviceState {
    private(set) var boot: UInt64 = 0 { didSet { unsaved = true } }
    private(set) var seq: UInt64 = 0
    private(set) var laneCounts: [String: Int] = [:] { didSet { unsaved = true } }
    /// The ledger's entry as the previous run left it (nil: first start, or no ledger).
    private(set) var previousRun: SeqLedger.Entry?
    /// Every seq up to this one is acknowledged or declared; written with each reservation.
    var settled: UInt64 = 0
    private var reserved: UInt64 = 0 { didSet { unsaved = true } }
    /// The highest seq the next start would count on from: reserved in the ledger or the state file, or held by the
    /// outbox on disk. An event with a higher seq must not be sent yet, or a crash now would have the next run send
    /// that seq again with another event (a disk refusing every write: a read-only remount, EIO). Without a state
    /// directory nothing is on disk and nothing is held back (seqs restart at 1 there anyway).
    private(set) var durable: UInt64 = 0
    private let ledger: SeqLedger?
    /// Seqs reserved per ledger write.
    static let seqBlock: UInt64 = 64
    /// Events the full outbox gave up and no event has announced yet.
    private(set) var drops: Drops? { didSet { unsaved = true } }
    /// The event announcing earlier drops, until the broker acknowledges it.
    private(set) var announcement: OutboxEntry? { didSet { unsaved = true } }
    private var saved: Stored?
    /// Something the state file holds was set since it was last written (each of those properties says so when set):
    /// `save()` runs after every batch, and this spares it building and comparing the whole state when nothing changed.
    private var unsaved = true
    let path: String?

    struct Drops: Codable, Equatable {
        var count: Int
        var firstSeq: UInt64
        var lastSeq: UInt64
        enum CodingKeys: String, CodingKey { case count, firstSeq = "first_seq", lastSeq = "last_seq" }
    }

    private struct Stored: Codable, Equatable {
        var boot: UInt64
        var seq: UInt64
        var laneCounts: [String: Int]?
        var drops: Drops?
        var announcement: OutboxEntry?
        enum CodingKeys: String, CodingKey {
            case boot, seq, laneCounts = "lane_counts", drops = "unannounced_drops", announcement
        }
    }

    /// The highest `boot` or `seq` a state file or an outbox may hold: 2^53, the largest whole number
    /// every JSON reader keeps exact. A higher one was damaged or forged, and counting on from it would wrap.
    static let highestCount: UInt64 = 1 << 53

    /// A count read from disk that the agent cannot go on from (a start would crash or reuse numbers).
    struct Exhausted: Error, CustomStringConvertible {
        var description: String
    }

    /// Loads the state and counts this start. Without a usable directory it keeps it in memory.
    init(directory: String) throws(Exhausted) {
        if let problem = DurableFile.makeDirectory(directory) {
            Log.error("state directory unusable, sequence numbers restart at 1", ["dir": directory, "error": problem])
            path = nil
            directoryProblem = "state directory \(directory) unusable (\(problem)): sequence numbers restart at 1 at every start"
        } else {
            path = directory + "/device-state.json"
        }
        let stored = path.flatMap(DeviceState.load)
        if let path, let stored {
            try Self.check(stored.boot, "boot", in: path)
            try Self.check(stored.seq, "seq", in: path)
            boot = stored.boot
            seq = stored.seq
            laneCounts = stored.laneCounts ?? [:]
            drops = stored.drops
            announcement = stored.announcement
        }
        do {
            if path != nil {
                let (opened, last, damaged) = try SeqLedger.open(path: directory + "/seq.ledger")
                if damaged { Log.error("sequence ledger unreadable, device-state.json and the outbox decide", ["path": opened.path]) }
                ledger = opened
                previousRun = last
            } else {
                ledger = nil
            }
        } catch {
            Log.error("sequence ledger unusable, sequence numbers kept in device-state.json only", ["error": error.message])
            ledger = nil
        }
        if previousRun == nil, let stored {
            // The ledger is gone or unreadable (or this is the first start since it exists): the
            // state file's count is all there is to go on, and where it ends nothing is known.
            previousRun = SeqLedger.Entry(boot: stored.boot, reserved: stored.seq, settled: 0, clean: false)
        }
        if let previousRun, let ledger {
            try Self.check(previousRun.boot, "boot", in: ledger.path)
            try Self.check(previousRun.reserved, "seq", in: ledger.path)
        }
        boot = max(boot, previousRun?.boot ?? 0) + 1
        seq = max(seq, previousRun?.reserved ?? 0)
        reserved = seq
        durable = path == nil ? .max : seq   // read from disk
        settled = previousRun?.settled ?? 0
        writeLedger(clean: false)
        save()
    }

    /// The newest readable copy of the stored state: the file, else its backup.
    private static func load(_ path: String) -> Stored? {
        for candidate in [path, path + ".bak"] {
            guard let bytes = DurableFile.read(path: candidate) else { continue }
            if let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes)) { return stored }
            Log.error("device state unreadable, kept aside", ["path": candidate])
            _ = rename(candidate, candidate + ".corrupt")
        }
        return nil
    }

    mutating func nextSeq() -> UInt64 {
        seq += 1
        if seq > reserved {
            reserved = seq + DeviceState.seqBlock - 1
            writeLedger(clean: false)
        }
        return seq
    }

    /// Less than half a block of seqs is reserved on disk: the next block is best reserved now, while no event waits
    /// (its ledger write and the two state-file rewrites with their syncs take tens of milliseconds on an SD card).
    /// Also true while a reservation the disk refused leaves events unsendable.
    var reservationDue: Bool { durable < seq + DeviceState.seqBlock / 2 }

    /// Seqs were given out that no reservation on disk covers: their events wait until one does.
    var awaitingReservation: Bool { seq > durable }

    /// The last reservation was not written: the next try waits (a disk that refuses it is not asked in a loop).
    var reservationRefused: Bool { durable < reserved }

    /// Reserves the next block ahead of need (ledger, then the state file): the reservation grows by one block, so
    /// still one reservation per 64 events. After a crash the start declares the unused rest as before, up to one and
    /// a half blocks now. After a refused write the same reservation is written again.
    mutating func reserveAhead() {
        guard reservationDue else { return }
        if reserved < seq + DeviceState.seqBlock / 2 { reserved = max(reserved, seq) + DeviceState.seqBlock }
        writeLedger(clean: false)
        save()
    }

    /// A clean stop: the ledger and the state file then say exactly which seq was the last one.
    mutating func stoppedCleanly() {
        reserved = seq
        writeLedger(clean: true)
        save()
    }

    private mutating func writeLedger(clean: Bool) {
        guard let ledger else { return }
        do {
            try ledger.write(SeqLedger.Entry(boot: boot, reserved: reserved, settled: min(settled, seq), clean: clean))
        } catch {
            ledgerFailures.occurred(1, ["error": error.message])
            return
        }
        durable = max(durable, reserved)
        ledgerFailures.ended()
    }

    /// Never below what an outbox on disk already holds.
    mutating func atLeast(seq floor: UInt64, from outbox: String) throws(Exhausted) {
        try Self.check(floor, "seq", in: outbox)
        seq = max(seq, floor)
        durable = max(durable, floor)   // on disk in the outbox
    }

    private static func check(_ count: UInt64, _ name: String, in path: String) throws(Exhausted) {
        guard count >= highestCount else { return }
        throw Exhausted(description: "\(path) holds \(name) \(count), beyond 2^53: the file is damaged or forged, "
                        + "and counting on from it would wrap\n    hint: the backend orders this device's events by "
                        + "boot and seq; once it has every event, move the state directory aside (counts restart at 1)")
    }

    mutating func setLaneCounts(_ counts: [String: Int]) {
        if counts != laneCounts { laneCounts = counts }   // set after every batch: only a change is one to save
    }

    mutating func addDrops(_ seqs: [UInt64]) {
        guard let low = seqs.min(), let high = seqs.max() else { return }
        addDrops(low...high, count: seqs.count)
    }

    /// `count` events within `range` were given up (the whole range when it cannot be told which).
    mutating func addDrops(_ range: ClosedRange<UInt64>, count: Int? = nil) {
        let count = count ?? Int(clamping: range.upperBound - range.lowerBound + 1)
        if var d = drops {
            d.count = d.count.addingReportingOverflow(count).overflow ? Int.max : d.count + count
            d.firstSeq = min(d.firstSeq, range.lowerBound)
            d.lastSeq = max(d.lastSeq, range.upperBound)
            // Never more than the range holds (a range declared twice, or merged over kept seqs, counts once).
            d.count = min(d.count, Int(clamping: d.lastSeq - d.firstSeq + 1))
            drops = d
        } else {
            drops = Drops(count: count, firstSeq: range.lowerBound, lastSeq: range.upperBound)
        }
    }

    /// Seqs the previous run may have handed out that nothing accounts for now: not in the outbox
    /// (whose highest seq ever stored is `outboxHighest`), not acknowledged, not declared. After a
    /// crash these are the rest of its last reserved block (never sent: an event is stored before
    /// it is sent) or events the outbox lost; the backend is told of them as dropped, so a gap in
    /// `seq` is always declared. Nil on a first start, or when the previous run kept no ledger.
    func unaccounted(outboxHighest: UInt64) -> ClosedRange<UInt64>? {
        guard let previousRun else { return nil }
        let accounted = [previousRun.settled, outboxHighest, drops?.lastSeq ?? 0,
                         announcement?.event.lastSeq ?? 0, announcement?.event.seq ?? 0].max()!
        // `seq` is where this run starts counting: the higher of the ledger's and the state file's.
        guard accounted < seq else { return nil }
        return (accounted + 1)...seq
    }

    /// The part of seqs lost or given up before this start that the last run had not declared or seen acknowledged
    /// (its `settled`): an outbox's drop record outlives the announcement that told it until the next compaction.
    /// Nil too when the state file's own drops or announcement already cover it (a drop record kept until the next
    /// compaction would otherwise count its drops again at every restart).
    func undeclared(_ range: ClosedRange<UInt64>) -> ClosedRange<UInt64>? {
        let low = max(range.lowerBound, (previousRun?.settled ?? 0) + 1)
        guard low <= range.upperBound else { return nil }
        let said = [drops.map { $0.firstSeq...$0.lastSeq },
                    announcement.map { ($0.event.firstSeq ?? $0.event.seq)...($0.event.lastSeq ?? $0.event.seq) }]
        if said.contains(where: { $0.map { $0.contains(low) && $0.contains(range.upperBound) } ?? false }) { return nil }
        return low...range.upperBound
    }

    /// Seqs of the last run that nothing accounts for, declared dropped (and said).
    mutating func declareUnaccounted(_ range: ClosedRange<UInt64>) {
        Log.warn("seqs of the last run unaccounted for, declared dropped", ["first_seq": range.lowerBound, "last_seq": range.upperBound])
        addDrops(range)
    }

    /// Every seq the last run handed out beyond what it had settled, whatever its drops or announcement say: for an
    /// outbox that cannot be read at all, whose pending events are gone with it.
    func unsettledByLastRun() -> ClosedRange<UInt64>? {
        guard let previousRun else { return nil }
        let low = previousRun.settled + 1
        return low <= seq ? low...seq : nil
    }

    /// Everything the state file holds is on disk (nothing set since the last successful save).
    var isSaved: Bool { !unsaved }

    /// Records how far everything is settled, given the oldest event still in the outbox.
    mutating func settle(oldestPending: UInt64?) {
        var low = (oldestPending ?? seq + 1) - 1
        if let drops { low = min(low, drops.firstSeq - 1) }
        if let announcement { low = min(low, (announcement.event.firstSeq ?? announcement.event.seq) - 1) }
        settled = low
    }

    /// The drops are now told by this event (kept until acknowledged).
    mutating func announce(_ entry: OutboxEntry) {
        announcement = entry
        drops = nil
    }

    mutating func announcementAcknowledged(seq: UInt64) {
        if announcement?.event.seq == seq { announcement = nil }
    }

    /// Writes the state if it changed (temp file, fsync, rename).
    mutating func save() {
        guard unsaved else {
            saveProblem = nil   // what is on disk is current
            return
        }
        let stored = Stored(boot: boot, seq: reserved, laneCounts: laneCounts, drops: drops, announcement: announcement)
        guard let path, stored != saved else {
            unsaved = false
            saveProblem = nil
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let bytes = Array((try? encoder.encode(stored)) ?? Data())
        // Two copies, one after the other: whatever happens to one, the other is whole.
        if let error = DurableFile.replace(path: path, with: bytes) ?? DurableFile.replace(path: path + ".bak", with: bytes) {
            saveFailures.occurred(1, ["path": path, "error": error])
            saveProblem = "cannot save the device state: \(error)"
        } else {
            saved = stored
            unsaved = false
            durable = max(durable, stored.seq)
            saveFailures.ended(["path": path])
            saveProblem = nil
        }
    }

    /// Why the last save of the state file failed (nil: it did not, or what is on disk is current again). The event
    /// loop tries a failed save again, less and less often.
    private(set) var saveProblem: String?
    /// The state directory could not be made at start: nothing is kept across restarts.
    private(set) var directoryProblem: String?

    /// A disk that refuses every write: one log line per streak, not one per event.
    private var saveFailures = LogStreak(.error, "cannot save device state", ended: "device state saved again")
    private var ledgerFailures = LogStreak(.error, "cannot reserve sequence numbers", ended: "sequence numbers reserved again")
}

private func rename(_ from: String, _ to: String) -> Int32 { Glibc.rename(from, to) }
