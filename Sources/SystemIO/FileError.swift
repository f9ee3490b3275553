#if canImport(Glibc)
import Glibc
#endif

/// What a file operation failed with: the call and the path (`open /var/lib/x.tmp: ...`) and the errno.
public struct FileError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The errno of the call that failed; nil when no call failed (a file of the wrong type or size).
    public var errno: Errno?

    /// `what` failed with `errno`: the message says both, the errno's text included.
    public init(_ what: String, errno: Errno) {
        message = "\(what): \(errno)"
        self.errno = errno
    }

    /// `what` failed with the current errno (read before `what` is built).
    public static func current(_ what: @autoclosure () -> String) -> FileError {
        let errno = Errno.current
        return FileError(what(), errno: errno)
    }

    /// A failure no call's errno describes (a file of the wrong type or size), or one whose message says the errno
    /// already: `message` says it all.
    public init(message: String, errno: Errno? = nil) {
        self.message = message
        self.errno = errno
    }

    public var description: String { message }
}
