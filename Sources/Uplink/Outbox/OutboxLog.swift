import Delivery
import SystemIO
import FoundationEssentials
import Glibc

/// The outbox's file: an append-only log of records `[length u32 LE][crc32 u32 LE][JSON]`, each
/// either an event added (`{"add": entry}`), one removed (`{"del": seq}`: acknowledged), one given up by the full
/// outbox (`{"drop": seq}`: to be declared), or, last in a compacted file, the highest seq the outbox ever stored
/// (`{"floor": seq}`).
/// After the last record the file holds a reserve of zeros, written and synced ahead of use: a record
/// then overwrites blocks the file already has, and its sync is a data flush only (a file that grew
/// would need a filesystem journal commit too: twice the flushes, and the wear, on an SD card).
/// The records end at the file's last nonzero byte (every record ends in `}`). One owner of the file descriptor.
final class OutboxLog {
    struct Record: Codable {
        var add: OutboxEntry?
        var del: UInt64?
        /// Events the full outbox gave up, seqs `drop` to `dropTo` (or `drop` alone): removed like `del`, and declared
        /// dropped by the next start unless the device state says they were (a crash between this record's sync and
        /// the state file's save loses nothing).
        var drop: UInt64?
        var dropTo: UInt64?
        var floor: UInt64?
        /// The file's format version (see `StateFormat`): version 1 files have no such record; a later one begins with
        /// it. This agent writes none and refuses a file whose version is higher than its own.
        var format: UInt64?

        init(add: OutboxEntry? = nil, del: UInt64? = nil, drop: UInt64? = nil, dropTo: UInt64? = nil, floor: UInt64? = nil,
             format: UInt64? = nil) {
            self.add = add
            self.del = del
            self.drop = drop
            self.dropTo = dropTo
            self.floor = floor
            self.format = format
        }

        init(dropped seqs: ClosedRange<UInt64>) {
            self.init(drop: seqs.lowerBound, dropTo: seqs.count > 1 ? seqs.upperBound : nil)
        }

        /// The book's record as the file writes it (an add carries its event, found among `entries` by seq).
        init(_ record: OutboxBook.Record, entries: ArraySlice<OutboxEntry>) {
            switch record {
            case .add(let seq): self.init(add: entries.index(seq: seq).map { entries[$0] })
            case .del(let seq): self.init(del: seq)
            case .drop(let seqs): self.init(dropped: seqs)
            case .floor(let seq): self.init(floor: seq)
            }
        }

        /// The seq an add or a drop record is about (0 for others).
        var seq: UInt64 { add?.event.seq ?? drop ?? 0 }

        enum CodingKeys: String, CodingKey { case add, del, drop, dropTo = "drop_to", floor, format }
    }

    struct Loaded {
        var entries: [OutboxEntry]
        var records: Int
        /// The highest seq the outbox ever stored (pending or not).
        var highest: UInt64
        /// Seqs a damaged stretch of the file may have held, and events the full outbox gave up (drop records):
        /// declared dropped by the caller.
        var lost: [ClosedRange<UInt64>]
        /// The drop records' seqs (kept through compactions until the device state has them).
        var drops: [ClosedRange<UInt64>]
        /// What was wrong with the file, for the log and a fault event.
        var problems: [String]
        /// Seqs whose removal records the file holds: the broker acknowledged them.
        var acknowledged: Set<UInt64> = []
    }

    let path: String
    private let fd: Int32
    /// The highest seq ever stored in this outbox: kept across compactions by the floor record.
    private(set) var highest: UInt64
    /// Where the records end: the next one is written here, and a failed write is cut back to it.
    private var size: off_t
    /// Where the zeroed reserve after the records ends (the file's size).
    private var reserved: off_t
    /// The disk had no room for a new reserve: appends go without one (not trying again and again to take the
    /// disk's last blocks) until a compaction finds the room.
    private var reserveRefused = false

    /// Zeros written ahead of the records at a time: about a hundred events with their removals, which is
    /// about as many as come between two compactions (each starts a new file with a new reserve).
    static let reserveChunk = 65_536
    private static let zeros = [UInt8](repeating: 0, count: reserveChunk)

    /// The bytes one event takes in the file at most, counted generously: its add record (about 350 bytes for a spot
    /// event, twice that with long ids or a fault's reason), and its del or drop record once removed.
    static let eventBytesBound = 768

    /// The largest file a start reads for an outbox of at most `events` (the most the agent keeps, whatever this run's
    /// capacity: a lowered one still reads the last run's file): the pending events, as many removed ones again (a file
    /// is compacted once its dead records are twice the capacity), and the zeroed reserve. A larger file is not one the
    /// agent wrote, and a start must not read it whole (a symbolic link to /dev/zero never ends).
    static func sizeLimit(events: Int) -> Int { 2 * events * eventBytesBound + 2 * reserveChunk }

    private init(path: String, fd: Int32, highest: UInt64, size: off_t, reserved: off_t) {
        self.path = path
        self.fd = fd
        self.highest = highest
        self.size = size
        self.reserved = max(size, reserved)
    }

    deinit { close(fd) }

    /// Opens (creating) the log and reads what it holds. A torn last record (power lost while it
    /// was written) is cut off. A damaged record with intact records after it is skipped: reading
    /// resumes at the next record whose length, CRC and JSON hold, so only the damaged stretch is
    /// lost, and the seqs it may have held are returned for declaration. The damaged file is kept
    /// aside whole and a clean one written with everything recovered.
    ///
    /// Only a regular file of at most `sizeLimit` bytes is read (see `sizeLimit(events:)`): anything else in its place
    /// (a symbolic link, a FIFO, a device) is moved aside and a larger file kept aside, and the caller declares the
    /// seqs the last run had not settled, as for a file lost. A file of a newer format (see `StateFormat`) is refused
    /// with `.newerFormat` before anything is changed.
    static func open(path: String, sizeLimit: Int) throws(UplinkError) -> (OutboxLog, Loaded) {
        var problems: [String] = []
        switch DurableFile.setAsideIfNotRegular(path) {
        case .success(let done):
            if let done { problems.append("outbox file damaged: \(done); seqs the last run had not settled declared dropped") }
        case .failure(let failure):
            throw UplinkError(.outbox, "cannot open outbox file: \(failure.message)", errno: failure.errno)
        }
        var bytes: [UInt8]
        switch DurableFile.readState(path: path, limit: sizeLimit) {
        case .absent:
            bytes = []
        case .bytes(let read):
            bytes = read
        case .tooLarge(let failure):
            let aside = path + ".corrupt-\(time(nil))"
            guard rename(path, aside) == 0 else {
                let errno = Errno.current
                throw UplinkError(.outbox, "outbox file \(path) is too large and cannot be moved aside: \(errno)", errno: errno)
            }
            problems.append("outbox file damaged: \(failure.message) (an outbox of at most \(sizeLimit / eventBytesBound) events): "
                            + "kept aside as \(aside), not read; seqs the last run had not settled declared dropped")
            bytes = []
        case .unreadable(let failure):
            // (An I/O error on the disk itself.) Moved aside, never read again: a later start that could read it would
            // send events this one has declared.
            let aside = path + ".unreadable-\(time(nil))"
            guard rename(path, aside) == 0 else {
                throw UplinkError(.outbox, "cannot read outbox file: \(failure.message), and cannot move it aside: "
                                  + Errno.current.description, errno: failure.errno)
            }
            problems.append("outbox file damaged: cannot read it (\(failure.message)): kept aside as \(aside), not read; "
                            + "seqs the last run had not settled declared dropped")
            bytes = []
        }
        let parsed = parse(bytes)
        if let version = parsed.newerFormat { throw StateFormat.newer(path, version: version) }
        let entries = parsed.entries
        var records = parsed.records
        if parsed.damaged {
            let aside = path + ".corrupt-\(time(nil))"
            if rename(path, aside) == 0 {
                let seqs = parsed.lost.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
                problems.append("outbox file damaged: kept aside as \(aside), \(entries.count) events recovered, "
                                + (seqs.isEmpty ? "only removals lost (their events are sent again)" : "seqs \(seqs) declared dropped"))
                bytes = []
            } else {
                throw UplinkError(.outbox, "outbox file \(path) is damaged and cannot be moved aside: \(Errno.current)")
            }
        }
        var reserved = off_t(bytes.count)
        if !parsed.damaged && parsed.goodEnd < parsed.contentEnd {
            problems.append("outbox file ended in a torn record (power lost while writing): "
                            + "\(parsed.contentEnd - parsed.goodEnd) bytes dropped, \(entries.count) events kept")
            // The reserve goes too: it is written again, zeroed, before the next record needs it.
            if truncate(path, off_t(parsed.goodEnd)) != 0 {
                throw UplinkError(.outbox, "cannot repair outbox file \(path): \(Errno.current)")
            }
            reserved = off_t(parsed.goodEnd)
        }
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o640)
        guard fd >= 0 else {
            let failure = FileError.current("cannot open outbox file \(path)")   // errno read before any message is built
            throw UplinkError(.outbox, failure.message, errno: failure.errno)
        }
        let log = OutboxLog(path: path, fd: fd, highest: parsed.highest, size: off_t(parsed.goodEnd), reserved: reserved)
        // What the damage took is kept in the new file as drop records too: the damaged one is aside now, and a crash
        // before the device state saves these seqs must not make them a silent gap.
        let drops = parsed.drops + parsed.lost
        if parsed.damaged {
            // Start the new file with what was recovered from the damaged one, in the book's order.
            var book = OutboxBook(capacity: entries.count, pending: entries.map(\.event.seq), drops: drops,
                                  highest: parsed.highest, deadRecords: 0)
            let rewrite = book.rewriteAll().records.map { Record($0, entries: entries[...]) }
            try log.rewrite(rewrite)
            records = rewrite.count
        }
        DurableFile.syncDirectory(of: path)
        return (log, Loaded(entries: entries, records: records, highest: parsed.highest,
                            lost: drops.sorted { $0.lowerBound < $1.lowerBound }, drops: drops, problems: problems,
                            acknowledged: parsed.acknowledged))
    }

    /// Appends records; with `sync`, they are on disk when this returns.
    func append(_ records: [Record], sync: Bool) throws(UplinkError) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(records.count * 512)   // (an event's record: some 400 bytes; no growth on the way)
        // Adds, drops and floors all say a seq was used: the highest counts (a drop record's `dropTo` is its highest).
        var stored: UInt64 = 0
        for i in records.indices {   // (by index: no copy of each record and the event it carries)
            OutboxLog.frame(records[i], into: &bytes)
            stored = max(stored, records[i].dropTo ?? records[i].seq, records[i].floor ?? 0)
        }
        // The reserve runs out about once between two compactions: a new one, synced with these records.
        let end = size + off_t(bytes.count)
        var grows = end > reserved && !reserveRefused
        var failure = grows ? DurableFile.writeAll(fd, bytes + OutboxLog.zeros, at: size) : DurableFile.writeAll(fd, bytes, at: size)
        if failure != nil && grows {
            // No room for a new reserve (a nearly full disk): the records alone, then.
            _ = ftruncate(fd, size)
            grows = false
            reserveRefused = true
            failure = DurableFile.writeAll(fd, bytes, at: size)
        }
        if let errno = failure {
            // Take back a partial record, so the file ends on a whole one (and with it the reserve).
            _ = ftruncate(fd, size)
            reserved = size
            throw UplinkError(.outbox, "cannot write outbox file \(path): \(errno)", errno: errno)
        }
        reserved = grows ? end + off_t(OutboxLog.reserveChunk) : max(reserved, end)
        size = end
        if sync && fdatasync(fd) != 0 {
            let errno = Errno.current
            throw UplinkError(.outbox, "cannot sync outbox file \(path): \(errno)", errno: errno)
        }
        highest = max(highest, stored)
    }

    /// Replaces the file with these records (temp file, fsync, rename): a compaction, or the end of a degraded spell.
    func rewrite(_ records: [Record]) throws(UplinkError) {
        let top = max(highest, records.map { max($0.dropTo ?? $0.seq, $0.floor ?? 0) }.max() ?? 0)
        var bytes: [UInt8] = []
        for record in records { OutboxLog.frame(record, into: &bytes) }
        // With a fresh reserve; without one if the disk has no room for it.
        var withReserve = true
        if DurableFile.replace(path: path, with: bytes + OutboxLog.zeros) != nil {
            withReserve = false
            if let problem = DurableFile.replace(path: path, with: bytes) {
                throw UplinkError(.outbox, "cannot rewrite outbox file: \(problem)", errno: problem.errno)
            }
        }
        // The descriptor still points at the old file: move it to the new one.
        let fresh = Glibc.open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fresh >= 0 else { throw UplinkError(.outbox, "cannot reopen outbox file \(path): \(Errno.current)") }
        dup2(fresh, fd)
        close(fresh)
        size = off_t(bytes.count)
        reserved = size + (withReserve ? off_t(OutboxLog.reserveChunk) : 0)
        reserveRefused = !withReserve
        highest = top
    }

    /// Appends the record's frame (one per edge: no array of its own for each part).
    static func frame(_ record: Record, into bytes: inout [UInt8]) {
        let json = record.json
        withUnsafeBytes(of: UInt32(json.count).littleEndian) { bytes += $0 }
        withUnsafeBytes(of: CRC32.checksum(json).littleEndian) { bytes += $0 }
        bytes += json
    }

    /// The events the records leave pending, how many records were read, the highest seq stored, where the
    /// readable part ends (a torn tail after it, up to `contentEnd`, where the zeroed reserve begins), and the
    /// seqs damaged stretches may have held: between the last event stored before a stretch and the first one after it.
    static func parse(_ file: [UInt8])
        -> (entries: [OutboxEntry], records: Int, highest: UInt64, goodEnd: Int, contentEnd: Int, damaged: Bool,
            lost: [ClosedRange<UInt64>], drops: [ClosedRange<UInt64>], newerFormat: UInt64?, acknowledged: Set<UInt64>) {
        // The zeroed reserve is not content: every record ends in a `}`.
        let contentEnd = (file.lastIndex { $0 != 0 } ?? -1) + 1
        let bytes = contentEnd == file.count ? file : Array(file[..<contentEnd])
        var pending: [OutboxEntry] = []
        var offset = 0, records = 0
        var highest: UInt64 = 0
        var lost: [ClosedRange<UInt64>] = []
        var damagedAfter: UInt64?   // a damaged stretch follows the event with this seq
        var lastStored: UInt64 = 0  // the seq of the last add or drop record read (not the floor's: a compacted file's
                                    // records all lie below its floor)
        var damaged = false
        var drops: [ClosedRange<UInt64>] = []
        var acknowledged: Set<UInt64> = []   // removal records: the broker acknowledged these
        while offset < bytes.count {
            guard let (record, end) = readRecord(bytes, at: offset) else {
                // Damaged here, or the torn tail of the file: look for the next intact record.
                guard let next = (offset + 1..<bytes.count).first(where: { readRecord(bytes, at: $0) != nil }) else {
                    return (pending, records, highest, offset, contentEnd, damaged, lost, drops, nil, acknowledged)
                }
                damagedAfter = damagedAfter ?? lastStored
                damaged = true
                offset = next
                continue
            }
            if let format = record.format, format > StateFormat.current {
                // Written by a newer agent: nothing more is read (its records may mean what this one cannot know).
                return (pending, records, highest, offset, contentEnd, damaged, lost, drops, format, acknowledged)
            }
            if let floor = record.floor { highest = max(highest, floor) }
            if let entry = record.add {
                if let before = damagedAfter {
                    if entry.event.seq > before, entry.event.seq - before > 1 { lost.append((before + 1)...(entry.event.seq - 1)) }
                    damagedAfter = nil
                }
                pending.append(entry)
                highest = max(highest, entry.event.seq)
                lastStored = entry.event.seq
            }
            if let seq = record.del {
                pending.removeAll { $0.event.seq == seq }
                acknowledged.insert(seq)
            }
            if let first = record.drop, (record.dropTo ?? first) >= first {
                let seqs = first...(record.dropTo ?? first)
                pending.removeAll { seqs.contains($0.event.seq) }
                drops.append(seqs)
                highest = max(highest, seqs.upperBound)
                lastStored = seqs.upperBound
            }
            records += 1
            offset = end
        }
        // (A stretch with only removals in it loses nothing: their events come back and are sent again, same ids.)
        return (pending, records, highest, offset, contentEnd, damaged, lost, drops, nil, acknowledged)
    }

    /// The format version the file's first record says (a later format begins with `{"format": N}`), reading that
    /// record only: nil when it says none, or the file has no intact first record (the full read says the rest).
    static func firstRecordFormat(path: String) -> UInt64? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        var header = [UInt8](repeating: 0, count: 8)
        guard header.withUnsafeMutableBytes({ pread(fd, $0.baseAddress, 8, 0) }) == 8 else { return nil }
        let length = Int(readLE32(header, 0))
        guard length >= 2, length <= 1 << 16 else { return nil }
        var bytes = header + [UInt8](repeating: 0, count: length)
        guard bytes.withUnsafeMutableBytes({ pread(fd, $0.baseAddress! + 8, length, 8) }) == length else { return nil }
        return readRecord(bytes, at: 0)?.0.format
    }

    /// The record at `offset` and where it ends, if its length, CRC and JSON all hold.
    private static func readRecord(_ bytes: [UInt8], at offset: Int) -> (Record, Int)? {
        guard offset + 8 <= bytes.count else { return nil }
        let length = Int(readLE32(bytes, offset)), crc = readLE32(bytes, offset + 4)
        guard length >= 2, length <= bytes.count - offset - 8 else { return nil }
        let json = bytes[(offset + 8)..<(offset + 8 + length)]
        guard json.first == UInt8(ascii: "{"), CRC32.checksum(json) == crc,
              let record = try? JSONDecoder().decode(Record.self, from: Data(json)) else { return nil }
        // Seqs start at 1: a record of seq 0 was never written by an agent, and is read as damage.
        guard record.add?.event.seq != 0, record.drop != 0 else { return nil }
        return (record, offset + 8 + length)
    }

    private static func readLE32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}
