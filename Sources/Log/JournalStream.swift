#if canImport(Glibc)
import Glibc
#endif

/// Whether stderr is systemd's journal stream. systemd sets `JOURNAL_STREAM=DEV:INODE` for a
/// service whose output goes to the journal; when stderr is that very stream (not a pipe some
/// wrapper put in between), each line gets its syslog priority as a `<N>` prefix, so that
/// `journalctl -p warning` shows the warnings and errors.
enum JournalStream {
    static let isStderr: Bool = {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }()
}
