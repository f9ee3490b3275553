import SystemIO
import Glibc

/// The device's counters that must never go back: the start counter (`boot`) and the highest event
/// sequence number that may have been handed out (`reserved`). Sequence numbers are reserved in
/// blocks, durably, before any of them is used, so a restart after any crash continues above every
/// seq the last run could have sent — one small write per block, not one per event.
///
/// The file (`seq.ledger` beside the outbox) is allocated once, at its first start, and afterwards
/// only overwritten in place: it keeps working on a full disk. It holds two slots written in turn,
/// each with a generation and a CRC-32, so a write torn by a power cut or a damaged sector leaves
/// the other slot: at most the last reservation is lost, and a reservation is only used once written.
public final class SeqLedger {
    public struct Entry: Equatable, Sendable {
        public var boot: UInt64
        /// No seq above this was handed out.
        public var reserved: UInt64
        /// Every seq up to this one was acknowledged or declared dropped when the entry was written.
        public var settled: UInt64
        /// The run stopped cleanly: `reserved` is exactly the last seq handed out.
        public var clean: Bool

        public init(boot: UInt64, reserved: UInt64, settled: UInt64, clean: Bool) {
            self.boot = boot
            self.reserved = reserved
            self.settled = settled
            self.clean = clean
        }
    }

    public let path: String
    private let fd: Int32
    private var generation: UInt64

    static let slotSize = 512
    static let magic: [UInt8] = Array("PWSEQ1\0\0".utf8)

    private init(path: String, fd: Int32, generation: UInt64) {
        self.path = path
        self.fd = fd
        self.generation = generation
    }

    deinit { close(fd) }

    /// Opens (creating and allocating) the ledger and reads its newest intact slot: nil when the
    /// file is new, or when neither slot is intact (`damaged` then says so). `problems` says what was repaired: something
    /// other than a regular file in its place (a symbolic link, a FIFO: moved aside, a new ledger made), or a slot whose
    /// `settled` is above its `reserved` (which no agent writes: its `settled` is not trusted, the older slot's is used,
    /// or 0). A ledger of a newer format (see `StateFormat`) throws `.newerFormat`, and nothing is changed.
    public static func open(path: String) throws(UplinkError) -> (SeqLedger, last: Entry?, damaged: Bool, problems: [String]) {
        var problems: [String] = []
        switch DurableFile.setAsideIfNotRegular(path) {
        case .success(let done): if let done { problems.append(done) }
        case .failure(let failure): throw UplinkError(.outbox, "cannot open sequence ledger: \(failure.message)", errno: failure.errno)
        }
        // Neither through a link nor waiting on a FIFO put there since; anything but a regular file is refused.
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o640)
        guard fd >= 0 else {
            let errno = Errno.current
            throw UplinkError(.outbox, "cannot open sequence ledger \(path): \(errno)", errno: errno)
        }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw UplinkError(.outbox, "cannot open sequence ledger \(path): not a regular file")
        }
        var bytes = [UInt8](repeating: 0, count: 2 * slotSize)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        let raw = [0, 1].compactMap { i in n >= (i + 1) * slotSize ? Array(bytes[(i * slotSize)..<((i + 1) * slotSize)]) : nil }
        if let version = raw.compactMap(formatVersion).max(), version > StateFormat.current {
            close(fd)
            throw StateFormat.newer(path, version: version)
        }
        let slots = raw.compactMap(decode)
        var newest = slots.max { $0.0 < $1.0 }
        if let (generation, entry) = newest, entry.settled > entry.reserved {
            // Settled beyond what was reserved: that `settled` would hide the unused rest of the reservation (nothing
            // would be declared). The older slot's, when it holds, is a lower bound of the truth; else nothing is.
            let older = slots.first { $0.0 != generation && $0.1.settled <= $0.1.reserved }?.1.settled ?? 0
            var repaired = entry
            repaired.settled = min(older, entry.reserved)
            newest = (generation, repaired)
            problems.append("\(path) says seqs up to \(entry.settled) settled of \(entry.reserved) reserved, which no agent "
                            + "writes: settled taken as \(repaired.settled), and every seq above it that nothing accounts for declared")
        }
        if n < 2 * slotSize {
            // New (or cut short): allocate both slots now, while there is room.
            let rc = posix_fallocate(fd, 0, off_t(2 * slotSize))
            if rc != 0 {
                close(fd)
                throw UplinkError(.outbox, "cannot allocate sequence ledger \(path): \(Errno(rc))", errno: Errno(rc))
            }
            DurableFile.syncDirectory(of: path)
        }
        let ledger = SeqLedger(path: path, fd: fd, generation: newest?.0 ?? 0)
        return (ledger, newest?.1, newest == nil && bytes[0..<max(0, n)].contains { $0 != 0 }, problems)
    }

    /// The format version a slot's magic says (`PWSEQ1`: version 1), counted only in a slot whose checksum holds: nil
    /// for zeros or damage. A flipped bit in a stale slot is damage, not a newer agent's slot (which would have the
    /// board refuse to start for ever while the other slot is intact). Every format keeps this frame: the magic,
    /// five 64-bit fields, and the CRC-32 of those 48 bytes after them.
    static func formatVersion(_ slot: [UInt8]) -> UInt64? {
        guard slot.count >= frameSize, Array(slot[0..<5]) == Array(magic[0..<5]), slot[6] == 0, slot[7] == 0,
              (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(slot[5]), checksumHolds(slot) else { return nil }
        return UInt64(slot[5] - UInt8(ascii: "0"))
    }

    /// The magic and the five fields the CRC covers, and the CRC.
    static let bodySize = magic.count + 5 * 8
    static let frameSize = bodySize + 4

    static func checksumHolds(_ slot: [UInt8]) -> Bool {
        guard slot.count >= frameSize else { return false }
        let crc = (0..<4).reduce(UInt32(0)) { $0 | UInt32(slot[bodySize + $1]) << (8 * $1) }
        return CRC32.checksum(slot[0..<bodySize]) == crc
    }

    /// Writes `entry` into the older slot and waits until it is on disk.
    public func write(_ entry: Entry) throws(UplinkError) {
        let next = generation &+ 1
        let slot = SeqLedger.encode(generation: next, entry)
        let offset = off_t(Int(next % 2) * SeqLedger.slotSize)
        let n = slot.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, offset) }
        guard n == slot.count else {
            let errno = n < 0 ? Errno.current : .ioError
            throw UplinkError(.outbox, "cannot write sequence ledger \(path): \(errno)", errno: errno)
        }
        guard fdatasync(fd) == 0 else {
            let errno = Errno.current
            throw UplinkError(.outbox, "cannot sync sequence ledger \(path): \(errno)", errno: errno)
        }
        generation = next
    }

    static func encode(generation: UInt64, _ e: Entry) -> [UInt8] {
        var body = magic
        for value in [generation, e.boot, e.reserved, e.settled, e.clean ? 1 : 0] {
            withUnsafeBytes(of: value.littleEndian) { body += $0 }
        }
        withUnsafeBytes(of: CRC32.checksum(body).littleEndian) { body += $0 }
        return body + [UInt8](repeating: 0, count: slotSize - body.count)
    }

    static func decode(_ slot: [UInt8]) -> (UInt64, Entry)? {
        guard Array(slot.prefix(magic.count)) == magic, checksumHolds(slot) else { return nil }
        func u64(_ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(slot[magic.count + 8 * i + $1]) << (8 * $1) } }
        return (u64(0), Entry(boot: u64(1), reserved: u64(2), settled: u64(3), clean: u64(4) == 1))
    }
}
