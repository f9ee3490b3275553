#if canImport(Glibc)
import Glibc
#endif

/// An errno value, read at once after the call that failed (as swift-system's `Errno`), with one description for
/// every layer: GPIO, files, the config, the status socket, MQTT and the bridge say an errno the same way.
/// Matched by name, never by number: `case .noSpace:`, `error.errno == .interrupted`.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32

    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno now: read it first, before building anything that could change it.
    public static var current: Errno { Errno(errno) }

    /// `strerror`'s text, e.g. "Permission denied".
    public var text: String {
        guard let text = strerror(rawValue) else { return "error \(rawValue)" }
        return String(cString: text)
    }

    /// "Permission denied (errno 13)".
    public var description: String { "\(text) (errno \(rawValue))" }

    /// Permission refused (EACCES, EPERM): a user or group to fix, not a fault of the device.
    public var isPermission: Bool { self == .permissionDenied || self == .notPermitted }

    /// EINTR: a signal interrupted a blocking call (see `retryingOnInterrupt`).
    public static let interrupted = Errno(EINTR)
    /// EAGAIN (EWOULDBLOCK): a non-blocking call found nothing to do now.
    public static let wouldBlock = Errno(EAGAIN)
    /// EACCES.
    public static let permissionDenied = Errno(EACCES)
    /// EPERM.
    public static let notPermitted = Errno(EPERM)
    /// ENOENT: no such file or directory.
    public static let noEntry = Errno(ENOENT)
    /// EEXIST.
    public static let exists = Errno(EEXIST)
    /// ENOSPC: the disk is full.
    public static let noSpace = Errno(ENOSPC)
    /// EDQUOT: the user's disk quota is used up.
    public static let quotaExceeded = Errno(EDQUOT)
    /// EROFS: a read-only file system.
    public static let readOnlyFileSystem = Errno(EROFS)
    /// EIO: the device failed.
    public static let ioError = Errno(EIO)
    /// ELOOP: a symbolic link where none is followed (O_NOFOLLOW).
    public static let tooManySymbolicLinks = Errno(ELOOP)
    /// EBUSY: another holder (a GPIO line another program requested).
    public static let busy = Errno(EBUSY)
    /// ENODEV, ENXIO: the device is gone (a chip unplugged).
    public static let noDevice = Errno(ENODEV)
    public static let noSuchDeviceOrAddress = Errno(ENXIO)
    /// ETIMEDOUT.
    public static let timedOut = Errno(ETIMEDOUT)
    /// ECONNREFUSED: nothing listens there.
    public static let connectionRefused = Errno(ECONNREFUSED)
    /// ECONNRESET.
    public static let connectionReset = Errno(ECONNRESET)
    /// EINPROGRESS: a non-blocking connect under way.
    public static let inProgress = Errno(EINPROGRESS)
    /// ENAMETOOLONG.
    public static let nameTooLong = Errno(ENAMETOOLONG)
}
