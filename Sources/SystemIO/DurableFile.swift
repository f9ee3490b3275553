import Glibc

/// Whole-file writes that survive a power cut: the file holds either the old or the new bytes.
public enum DurableFile {
    /// Writes a temp file, fsyncs it, renames it over `path`, fsyncs the directory. With `keepingOwnerAndMode`, the new
    /// file gets the old one's owner, group and mode (a config root:parkwise 0640 stays so).
    /// `mode`: the new file's, whatever the process's umask (a file another user's daemon reads).
    /// Returns what failed, or nil.
    public static func replace(path: String, with bytes: [UInt8], keepingOwnerAndMode: Bool = false, mode: mode_t? = nil) -> FileError? {
        let temp = path + ".tmp"
        // Neither through a symbolic link nor waiting on a FIFO left at the temp file's name: such a name fails the save.
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o644)
        guard fd >= 0 else { return .current("open \(temp)") }
        var problem: FileError?
        var old = stat()
        if keepingOwnerAndMode && stat(path, &old) == 0 {
            if fchown(fd, old.st_uid, old.st_gid) != 0 { problem = .current("chown \(temp) to \(path)'s owner") }
            if problem == nil && fchmod(fd, old.st_mode & 0o7777) != 0 { problem = .current("chmod \(temp) to \(path)'s mode") }
        }
        if problem == nil, let mode, fchmod(fd, mode) != 0 { problem = .current("chmod \(temp)") }
        if problem == nil { problem = writeAll(fd, bytes).map { FileError("write \(temp)", errno: $0) } }
        if problem == nil && fsync(fd) != 0 { problem = .current("fsync \(temp)") }
        close(fd)
        if let problem {
            unlink(temp)
            return problem
        }
        guard rename(temp, path) == 0 else { return .current("rename \(temp)") }
        syncDirectory(of: path)
        return nil
    }

    /// Writes every byte (a short write is continued, so a full disk shows as its errno).
    /// Returns the errno of the failure, or nil.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Errno? {
        var done = 0
        while done < bytes.count {
            let n = retryingOnInterrupt { bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) } }
            if n < 0 { return .current }
            done += n
        }
        return nil
    }

    /// `writeAll` at `offset`, leaving the file offset alone.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: off_t) -> Errno? {
        var done = 0
        while done < bytes.count {
            let n = retryingOnInterrupt { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, offset + off_t(done)) } }
            if n < 0 { return .current }
            done += n
        }
        return nil
    }

    /// Makes a rename or a new file in the directory durable.
    public static func syncDirectory(of path: String) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

    /// The whole file, or nil when it does not exist or cannot be read.
    public static func read(path: String) -> [UInt8]? {
        try? WholeFile.read(path).get()
    }

    /// What `readState` found.
    public enum StateRead {
        /// Nothing at the path.
        case absent
        case bytes([UInt8])
        /// A regular file larger than the limit: not read.
        case tooLarge(FileError)
        /// Not readable as a regular file (its type, or the errno of the call that failed).
        case unreadable(FileError)
    }

    /// A state file the agent keeps (the outbox, the device state, the sequence ledger), read only when it is a regular
    /// file of at most `limit` bytes (see `WholeFile.read(_:limit:)`); what is wrong is said for a technician (the path,
    /// what it is, the errno).
    public static func readState(path: String, limit: Int) -> StateRead {
        switch WholeFile.read(path, limit: limit) {
        case .success(let bytes):
            return .bytes(bytes)
        case .failure(let failure) where failure.errno == .noEntry:
            return .absent
        case .failure(let failure):
            if let what = failure.notRegular {
                return .unreadable(FileError(message: "\(path) is \(what), not a regular file", errno: failure.errno))
            }
            if let size = failure.tooLarge {
                return .tooLarge(FileError(message: "\(path) holds \(size) bytes or more, more than the \(limit) it can hold"))
            }
            return .unreadable(failure.errno.map { FileError("read \(path)", errno: $0) } ?? FileError(message: "read \(path) failed"))
        }
    }

    /// Something other than a regular file where the agent keeps one of its state files (a symbolic link, a FIFO, a
    /// device, a socket, a directory: it never makes any of them) is moved aside as `PATH.not-regular-TIME`, so that a
    /// start neither follows it, nor waits on it, nor reads it without end, and a new file can take its place (a
    /// directory left there would refuse every save for ever). Returns what was done, for the log (nil: nothing such
    /// there), or the failure of the rename.
    public static func setAsideIfNotRegular(_ path: String) -> Result<String?, FileError> {
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT != S_IFREG, let what = WholeFile.kind(path) else { return .success(nil) }
        let aside = path + ".not-regular-\(time(nil))"
        guard rename(path, aside) == 0 else {
            return .failure(.current("\(path) is \(what), not a regular file, and cannot be moved aside: rename"))
        }
        syncDirectory(of: path)
        return .success("\(path) was \(what), not a regular file: moved aside as \(aside)")
    }

    /// Creates a directory and its parents (mode 0750). Returns what failed, or nil.
    public static func makeDirectory(_ path: String) -> FileError? {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, 0o750) != 0 && Errno.current != .exists { return .current("mkdir \(current)") }
        }
        return nil
    }
}
