#if canImport(Glibc)
import Glibc
#endif

/// An errno value, read at once after the call that failed (as swift-system's `Errno`), with one description for
/// every layer: GPIO, files, the config, the status socket, MQTT and the bridge say an errno the same way.
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
    public var isPermission: Bool { rawValue == EACCES || rawValue == EPERM }
}
