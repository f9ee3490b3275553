#if canImport(Glibc)
import Glibc
#endif

/// A whole file read with plain system calls (no Foundation, no URL): the bytes, or the errno of the call that failed.
public enum WholeFile {
    public static func read(_ path: String) -> Result<[UInt8], FileReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(FileReadError(errno: .current)) }
        defer { close(fd) }
        return readAll(fd, limit: .max)
    }

    /// A file the agent itself keeps, read only when it is what the agent writes: a regular file (not a symbolic link,
    /// a FIFO, a device or a socket, none of which the agent ever makes; the open neither follows a link nor waits for a
    /// FIFO's writer) of at most `limit` bytes (checked before reading, and while reading for a file that grows or a
    /// size the kernel does not know, as /proc's).
    public static func read(_ path: String, limit: Int) -> Result<[UInt8], FileReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            let errno = Errno.current
            if errno == .tooManySymbolicLinks, let what = kind(path) { return .failure(FileReadError(errno: errno, notRegular: what)) }
            return .failure(FileReadError(errno: errno))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(FileReadError(errno: .current)) }
        guard st.st_mode & S_IFMT == S_IFREG else { return .failure(FileReadError(notRegular: describe(mode: st.st_mode))) }
        guard Int(st.st_size) <= limit else { return .failure(FileReadError(tooLarge: Int(st.st_size))) }
        return readAll(fd, limit: limit)
    }

    /// What is at `path` when it is not a regular file ("a symbolic link to /dev/zero", "a FIFO"), without following
    /// a link; nil for a regular file or nothing at all.
    public static func kind(_ path: String) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT != S_IFREG else { return nil }
        guard st.st_mode & S_IFMT == S_IFLNK else { return describe(mode: st.st_mode) }
        var target = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &target, target.count - 1)
        guard n >= 0 else { return "a symbolic link" }
        return "a symbolic link to " + String(decoding: target[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func describe(mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "not a regular file"
        }
    }

    private static func readAll(_ fd: Int32, limit: Int) -> Result<[UInt8], FileReadError> {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = retryingOnInterrupt { chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }
            guard n > 0 else { return n == 0 ? .success(bytes) : .failure(FileReadError(errno: .current)) }
            guard bytes.count + n <= limit else { return .failure(FileReadError(tooLarge: bytes.count + n)) }
            bytes.append(contentsOf: chunk[..<n])
        }
    }
}
