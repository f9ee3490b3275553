#if canImport(Glibc)
import Glibc
#endif

/// A whole file read with plain system calls (no Foundation, no URL): the bytes, or the errno of the call that failed.
public enum WholeFile {
    public struct Failure: Error, Sendable {
        /// The errno of the call that failed (ELOOP for a symbolic link refused by `read(_:limit:)`; 0 when no call
        /// failed: a file of the wrong type or size).
        public let errno: Int32
        /// `read(_:limit:)` found something other than a regular file: what it is ("a FIFO", "a symbolic link to
        /// /dev/zero").
        public var notRegular: String? = nil
        /// `read(_:limit:)` found a regular file larger than its limit: its size (at least the limit + 1).
        public var tooLarge: Int? = nil

        public init(errno: Int32, notRegular: String? = nil, tooLarge: Int? = nil) {
            self.errno = errno
            self.notRegular = notRegular
            self.tooLarge = tooLarge
        }
    }

    public static func read(_ path: String) -> Result<[UInt8], Failure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Failure(errno: errno)) }
        defer { close(fd) }
        return readAll(fd, limit: .max)
    }

    /// A file the agent itself keeps, read only when it is what the agent writes: a regular file (not a symbolic link,
    /// a FIFO, a device or a socket, none of which the agent ever makes; the open neither follows a link nor waits for a
    /// FIFO's writer) of at most `limit` bytes (checked before reading, and while reading for a file that grows or a
    /// size the kernel does not know, as /proc's).
    public static func read(_ path: String, limit: Int) -> Result<[UInt8], Failure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP, let what = kind(path) { return .failure(Failure(errno: code, notRegular: what)) }
            return .failure(Failure(errno: code))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(Failure(errno: errno)) }
        guard st.st_mode & S_IFMT == S_IFREG else { return .failure(Failure(errno: 0, notRegular: describe(mode: st.st_mode))) }
        guard Int(st.st_size) <= limit else { return .failure(Failure(errno: 0, tooLarge: Int(st.st_size))) }
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

    private static func readAll(_ fd: Int32, limit: Int) -> Result<[UInt8], Failure> {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? .success(bytes) : .failure(Failure(errno: errno)) }
            guard bytes.count + n <= limit else { return .failure(Failure(errno: 0, tooLarge: bytes.count + n)) }
            bytes.append(contentsOf: chunk[..<n])
        }
    }
}
