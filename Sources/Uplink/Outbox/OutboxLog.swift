import FoundationEssentials
import Glibc

/// The outbox's file: an append-only log of records `[length u32 LE][crc32 u32 LE][JSON]`, each
/// either an event added (`{"add": entry}`) or one removed (`{"del": seq}`: acknowledged or dropped).
/// One owner of the file descriptor.
final class OutboxLog {
    struct Record: Codable {
        var add: OutboxEntry?
        var del: UInt64?
    }

    struct Loaded {
        var entries: [OutboxEntry]
        var records: Int
        /// What was wrong with the file, for the log and a fault event.
        var problems: [String]
    }

    let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }

    /// Opens (creating) the log and reads what it holds. A torn last record (power lost while it
    /// was written) is cut off; a damaged record with data after it means the file is corrupt:
    /// it is kept aside whole, and the readable records before the damage are carried over.
    static func open(path: String) throws(UplinkError) -> (OutboxLog, Loaded) {
        var problems: [String] = []
        var bytes = DurableFile.read(path: path) ?? []
        var (entries, records, goodEnd, damaged) = parse(bytes)
        if goodEnd < bytes.count {
            if damaged {
                let aside = path + ".corrupt-\(time(nil))"
                if rename(path, aside) == 0 {
                    problems.append("outbox file damaged at byte \(goodEnd) of \(bytes.count): kept aside as \(aside), "
                                    + "\(entries.count) events before the damage recovered")
                    bytes = []
                } else {
                    throw UplinkError(.outbox, "outbox file \(path) is damaged and cannot be moved aside: \(DurableFile.errnoText())")
                }
            } else {
                problems.append("outbox file ended in a torn record (power lost while writing): "
                                + "\(bytes.count - goodEnd) bytes dropped, \(entries.count) events kept")
                if truncate(path, off_t(goodEnd)) != 0 {
                    throw UplinkError(.outbox, "cannot repair outbox file \(path): \(DurableFile.errnoText())")
                }
            }
        }
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw UplinkError(.outbox, "cannot open outbox file \(path): \(DurableFile.errnoText())") }
        let log = OutboxLog(path: path, fd: fd)
        if bytes.isEmpty && !entries.isEmpty {
            // Start the new file with what was recovered from the damaged one.
            try log.rewrite(entries)
            records = entries.count
        }
        DurableFile.syncDirectory(of: path)
        return (log, Loaded(entries: entries, records: records, problems: problems))
    }

    /// Appends records; with `sync`, they are on disk when this returns.
    func append(_ records: [Record], sync: Bool) throws(UplinkError) {
        var bytes: [UInt8] = []
        for record in records { bytes += OutboxLog.frame(record) }
        let end = lseek(fd, 0, SEEK_END)
        if let code = DurableFile.writeAll(fd, bytes) {
            // Take back a partial record, so the file ends on a whole one.
            if end >= 0 { _ = ftruncate(fd, end) }
            throw UplinkError(.outbox, "cannot write outbox file \(path): \(DurableFile.describe(code))", code: code)
        }
        if sync && fdatasync(fd) != 0 {
            throw UplinkError(.outbox, "cannot sync outbox file \(path): \(DurableFile.errnoText())", code: errno)
        }
    }

    /// Replaces the file with just these events (temp file, fsync, rename): compaction.
    func rewrite(_ entries: [OutboxEntry]) throws(UplinkError) {
        var bytes: [UInt8] = []
        for entry in entries { bytes += OutboxLog.frame(Record(add: entry)) }
        if let problem = DurableFile.replace(path: path, with: bytes) {
            throw UplinkError(.outbox, "cannot rewrite outbox file: \(problem)", code: errno)
        }
        // The descriptor still points at the old file: move it to the new one.
        let fresh = Glibc.open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fresh >= 0 else { throw UplinkError(.outbox, "cannot reopen outbox file \(path): \(DurableFile.errnoText())") }
        dup2(fresh, fd)
        close(fresh)
    }

    static func frame(_ record: Record) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = Array((try? encoder.encode(record)) ?? Data())
        return le32(UInt32(json.count)) + le32(CRC32.checksum(json)) + json
    }

    /// The events the records leave pending, how many records were read, where the readable
    /// part ends, and whether a damaged record has data after it.
    static func parse(_ bytes: [UInt8]) -> (entries: [OutboxEntry], records: Int, goodEnd: Int, damaged: Bool) {
        var pending: [OutboxEntry] = []
        var offset = 0, records = 0
        let decoder = JSONDecoder()
        while offset < bytes.count {
            guard offset + 8 <= bytes.count else { return (pending, records, offset, false) }
            let length = Int(readLE32(bytes, offset)), crc = readLE32(bytes, offset + 4)
            let end = offset + 8 + length
            guard end <= bytes.count else { return (pending, records, offset, false) }
            let json = bytes[(offset + 8)..<end]
            guard CRC32.checksum(json) == crc, let record = try? decoder.decode(Record.self, from: Data(json)) else {
                return (pending, records, offset, end < bytes.count)
            }
            if let entry = record.add { pending.append(entry) }
            if let seq = record.del { pending.removeAll { $0.event.seq == seq } }
            records += 1
            offset = end
        }
        return (pending, records, offset, false)
    }

    private static func le32(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)] }

    private static func readLE32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}
