import SystemIO
import Delivery
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
    /// Which seqs this run gave out and which the disk reserves (pure: `SeqCounter`); its reservations are written here.
    private(set) var counter = SeqCounter(seq: 0, durable: 0, last: DeviceState.lastSeq, block: DeviceState.seqBlock) {
        didSet { if counter.reserved != oldValue.reserved { unsaved = true } }
    }
    /// The last seq given out.
    var seq: UInt64 { counter.seq }
    private(set) var laneCounts: [String: Int] = [:] { didSet { unsaved = true } }
    /// The ledger's entry as the previous run left it (nil: first start, or no ledger).
    private(set) var previousRun: SeqLedger.Entry?
    /// Every seq up to this one is acknowledged or its declaration acknowledged (`DeliveryLedger.settled`); written with
    /// each reservation.
    var settled: UInt64 = 0
    /// The highest seq the next start would count on from: reserved in the ledger or the state file, or held by the
    /// outbox on disk. An event with a higher seq must not be sent yet, or a crash now would have the next run send
    /// that seq again with another event (a disk refusing every write: a read-only remount, EIO). Without a state
    /// directory nothing is on disk and nothing is held back (seqs restart at 1 there anyway).
    var durable: UInt64 { counter.durable }
    private let ledger: SeqLedger?
    /// Seqs reserved per ledger write.
    static let seqBlock: UInt64 = 64
    /// Seqs declared dropped and not yet announced, exact ranges in order (`DeliveryLedger` decides them).
    private(set) var declared: [ClosedRange<UInt64>] = [] { didSet { unsaved = true } }
    /// The event announcing declared seqs, until the broker acknowledges it.
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
        /// The first declared range (the only one an agent before exact ranges wrote, and reads).
        var drops: Drops?
        /// The declared ranges after the first, when there are more (omitted otherwise: one range is written as before).
        var moreDrops: [Drops]?
        var announcement: OutboxEntry?
        enum CodingKeys: String, CodingKey {
            case boot, seq, laneCounts = "lane_counts", drops = "unannounced_drops", moreDrops = "more_unannounced_drops",
                 announcement
        }
    }

    /// 2^53, the largest whole number every JSON reader keeps exact: a `boot` or `seq` at or above it in a state file
    /// or an outbox was damaged or forged, and counting on from it would wrap.
    static let highestCount: UInt64 = 1 << 53

    /// The last seq this agent hands out (2^53 - 2^32): a start refuses a higher one, and a run never reserves beyond
    /// it, so the agent never writes a count it would refuse to read, and the backend's arithmetic on seqs (a gap's
    /// `last_seq + 1`) stays exact. At the device's real rate (a few events a second) it is never reached; a file that
    /// holds more was damaged or forged. A run that reaches it stamps no more events (see `seqsLeft`).
    static let lastSeq: UInt64 = highestCount - (1 << 32)

    /// The last `boot` a start may read: the one it counts stays below 2^53.
    static let lastBoot: UInt64 = highestCount - 2

    /// Seqs this run may still hand out (see `lastSeq`).
    var seqsLeft: UInt64 { counter.seqsLeft }

    /// The state file was lost while the ledger says how far the last run went: both copies unreadable, impossible, or
    /// gone. Its declarations and announcement are lost with it; the delivery ledger's start declares what nothing else
    /// accounts for.
    private(set) var stateLost = false

    /// Loads the state and counts this start. Without a usable directory it keeps it in memory.
    init(directory: String) throws(DeviceStateError) {
        if let problem = DurableFile.makeDirectory(directory) {
            Log.error("state directory unusable, sequence numbers restart at 1", ["dir": directory, "error": problem])
            path = nil
            directoryProblem = "state directory \(directory) unusable (\(problem)): sequence numbers restart at 1 at every start"
        } else {
            path = directory + "/device-state.json"
            // Before anything is read as damage, repaired or written: a newer agent's files are refused as they are.
            if let newer = StateFormat.check(directory: directory) { throw DeviceStateError(code: .newerFormat, message: newer.message) }
        }
        let loaded = try path.map(DeviceState.load)
        let stored = loaded?.stored
        var seq: UInt64 = 0
        if let path, let stored {
            try Self.check(stored.boot, "boot", in: loaded?.path ?? path)
            try Self.check(stored.seq, "seq", in: loaded?.path ?? path)
            boot = stored.boot
            seq = stored.seq
            laneCounts = stored.laneCounts ?? [:]
            declared = ([stored.drops].compactMap { $0 } + (stored.moreDrops ?? [])).map { $0.firstSeq...$0.lastSeq }
            announcement = stored.announcement
        }
        do {
            if path != nil {
                let (opened, last, damaged, problems) = try SeqLedger.open(path: directory + "/seq.ledger")
                if damaged { Log.error("sequence ledger unreadable, device-state.json and the outbox decide", ["path": opened.path]) }
                for problem in problems { Log.error("sequence ledger repaired at start", ["problem": problem]) }
                ledger = opened
                previousRun = last
            } else {
                ledger = nil
            }
        } catch where error.code == .newerFormat {
            throw DeviceStateError(code: .newerFormat, message: error.message)
        } catch {
            Log.error("sequence ledger unusable, sequence numbers kept in device-state.json only", ["error": error.message])
            ledger = nil
        }
        if let previousRun, let ledger {
            try Self.check(previousRun.boot, "boot", in: ledger.path)
            try Self.check(previousRun.reserved, "seq", in: ledger.path)
            if stored == nil && loaded?.lost == true {
                stateLost = true
                Log.error("device state lost, the sequence ledger decides: the last run's unsettled seqs are declared",
                          ["path": path ?? directory, "settled": previousRun.settled, "reserved": previousRun.reserved])
            }
        }
        if previousRun == nil, let stored {
            // The ledger is gone or unreadable (or this is the first start since it exists): the
            // state file's count is all there is to go on, and where it ends nothing is known.
            previousRun = SeqLedger.Entry(boot: stored.boot, reserved: stored.seq, settled: 0, clean: false)
        }
        boot = max(boot, previousRun?.boot ?? 0) + 1
        seq = max(seq, previousRun?.reserved ?? 0)
        counter = SeqCounter(seq: seq, durable: path == nil ? .max : seq, last: Self.lastSeq, block: Self.seqBlock)   // read from disk
        settled = previousRun?.settled ?? 0
        writeLedger(clean: false)
        save()
    }

    /// The newest usable copy of the stored state: the file, else its backup, and which it was. A copy is used only
    /// when it is a regular file of at most `sizeLimit` bytes whose JSON decodes and whose fields are in range and in
    /// order (see `impossibility`); anything else is moved aside (`.corrupt`, or `.not-regular-TIME` for a symbolic
    /// link, a FIFO or a device) and said. `lost`: neither copy was usable though one was there, or neither was there.
    private static func load(_ path: String) throws(DeviceStateError) -> (stored: Stored?, path: String, lost: Bool) {
        for candidate in [path, path + ".bak"] {
            // Both copies, the one not read too: its next save would otherwise wait on a FIFO or write through a link.
            switch DurableFile.setAsideIfNotRegular(candidate) {
            case .success(let done): if let done { Log.error("device state unreadable, kept aside", ["problem": done]) }
            case .failure(let failure): Log.error("device state unreadable", ["path": candidate, "error": failure])
            }
        }
        for candidate in [path, path + ".bak"] {
            let problem: String
            switch DurableFile.readState(path: candidate, limit: sizeLimit) {
            case .absent:
                continue
            case .unreadable(let failure):
                Log.error("device state unreadable", ["path": candidate, "error": failure])
                continue
            case .tooLarge(let failure):
                problem = failure.message
            case .bytes(let bytes):
                guard let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes)) else {
                    problem = "not the JSON of a device state"
                    break
                }
                guard let impossible = impossibility(stored) else { return (stored, candidate, false) }
                problem = impossible
            }
            Log.error("device state unreadable, kept aside", ["path": candidate, "problem": problem])
            _ = rename(candidate, candidate + ".corrupt")
        }
        return (nil, path, true)
    }

    /// A state file holds the lane counts of a few levels, the drops and one announcement: a few KiB. More is not one
    /// the agent wrote, and is not read.
    static let sizeLimit = 1 << 20

    /// Why a state file that decodes cannot be trusted, or nil: each seq range is a range (first at least 1, not after
    /// its last), and no count is past the last seq (a start would crash or count on from nonsense).
    private static func impossibility(_ s: Stored) -> String? {
        for d in [s.drops].compactMap({ $0 }) + (s.moreDrops ?? []) {
            guard d.firstSeq >= 1, d.firstSeq <= d.lastSeq, d.lastSeq <= lastSeq,
                  d.count >= 1, UInt64(d.count) <= d.lastSeq - d.firstSeq + 1 else {
                return "unannounced_drops says \(d.count) dropped in seqs \(d.firstSeq) to \(d.lastSeq), which is no range of seqs"
            }
        }
        if let a = s.announcement?.event {
            let first = a.firstSeq ?? a.seq, last = a.lastSeq ?? a.seq
            guard a.seq >= 1, a.seq <= lastSeq, first >= 1, first <= last, last <= a.seq else {
                return "announcement seq \(a.seq) of seqs \(first) to \(last), which is no range of seqs before it"
            }
        }
        return nil
    }

    /// The next seq, under a reservation written first. Only while `seqsLeft` is above 0: the caller stamps nothing
    /// more after the last seq.
    mutating func nextSeq() -> UInt64 {
        let (seq, reserve) = counter.next()
        if reserve != nil { writeLedger(clean: false) }
        return seq
    }

    /// See `SeqCounter`.
    var reservationDue: Bool { counter.reservationDue }
    var awaitingReservation: Bool { counter.awaitingReservation }
    var reservationRefused: Bool { counter.reservationRefused }

    /// Reserves the next block ahead of need (ledger, then the state file): one reservation per 64 events still. After
    /// a crash the start declares the unused rest as before, up to one and a half blocks now. After a refused write the
    /// same reservation is written again.
    mutating func reserveAhead() {
        guard counter.reserveAhead() != nil else { return }
        writeLedger(clean: false)
        save()
    }

    /// A clean stop: the ledger and the state file then say exactly which seq was the last one.
    mutating func stoppedCleanly() {
        _ = counter.stoppedCleanly()
        writeLedger(clean: true)
        save()
    }

    private mutating func writeLedger(clean: Bool) {
        guard let ledger else { return }
        let reserved = counter.reserved
        do {
            try ledger.write(SeqLedger.Entry(boot: boot, reserved: reserved, settled: min(settled, seq), clean: clean))
        } catch {
            ledgerFailures.occurred(1, ["error": error.message])
            return
        }
        counter.reserved(upTo: reserved)
        ledgerFailures.ended()
    }

    /// Never below what an outbox on disk already holds.
    mutating func atLeast(seq floor: UInt64, from outbox: String) throws(DeviceStateError) {
        try Self.check(floor, "seq", in: outbox)
        counter.atLeast(floor)   // on disk in the outbox
    }

    private static func check(_ count: UInt64, _ name: String, in path: String) throws(DeviceStateError) {
        let last = name == "boot" ? lastBoot : lastSeq
        guard count > last else { return }
        let hint = "\n    hint: the backend orders this device's events by boot and seq; once it has every event, move the "
            + "state directory aside (counts restart at 1)"
        guard count < highestCount else {
            throw DeviceStateError(code: .countExhausted, message: "\(path) holds \(name) \(count), beyond 2^53: the file is damaged "
                          + "or forged, and counting on from it would wrap" + hint)
        }
        throw DeviceStateError(code: .countExhausted, message: "\(path) holds \(name) \(count), beyond \(last), the last \(name) this "
                      + "agent counts to (2^53 less room to count on, so that every count stays an exact JSON number): the "
                      + "file is damaged or forged, or the device has used up its \(name)s" + hint)
    }

    mutating func setLaneCounts(_ counts: [String: Int]) {
        if counts != laneCounts { laneCounts = counts }   // set after every batch: only a change is one to save
    }

    /// What the delivery ledger has declared and not yet seen acknowledged: saved with the next `save()`.
    mutating func setDeclarations(_ ranges: [ClosedRange<UInt64>]) {
        if ranges != declared { declared = ranges }
    }

    /// The announcement of declared seqs, set where it changes (stamped, acknowledged): saved with the next `save()`.
    mutating func setAnnouncement(_ announcement: OutboxEntry?) {
        self.announcement = announcement
    }

    /// Everything the state file holds is on disk (nothing set since the last successful save).
    var isSaved: Bool { !unsaved }

    /// Writes how far everything is settled into the sequence ledger now (it takes writes on a full disk): while the
    /// outbox cannot write, the events it holds in memory are sent and acknowledged with nothing else on disk to say so.
    mutating func recordSettled(_ settled: UInt64) {
        guard settled > self.settled else { return }
        self.settled = settled
        writeLedger(clean: false)
    }

    /// Writes the state if it changed (temp file, fsync, rename).
    mutating func save() {
        guard unsaved else {
            saveProblem = nil   // what is on disk is current
            return
        }
        let ranges = declared.map { Drops(count: Int(clamping: $0.upperBound - $0.lowerBound + 1), firstSeq: $0.lowerBound, lastSeq: $0.upperBound) }
        let stored = Stored(boot: boot, seq: counter.reserved, laneCounts: laneCounts, drops: ranges.first,
                            moreDrops: ranges.count > 1 ? Array(ranges.dropFirst()) : nil, announcement: announcement)
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
            counter.reserved(upTo: stored.seq)
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

/// Why a start cannot go on from its state directory: a count at its end, or a file of a newer format. The agent
/// exits 78 (systemd does not restart into the same wall) and changes nothing on disk.
struct DeviceStateError: Error, CustomStringConvertible {
    enum Code: String { case countExhausted = "count_exhausted", newerFormat = "newer_format" }
    var code: Code
    /// What is wrong and what to do, for a technician.
    var message: String
    var description: String { message }
}
