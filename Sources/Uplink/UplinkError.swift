import SystemIO

/// An outbox failure a technician can act on, with the errno when there is one.
public struct UplinkError: Error, Sendable, CustomStringConvertible {
    /// `newerFormat`: a state file written by a newer agent (see `StateFormat`): refused, never repaired.
    public enum Code: String, Sendable { case outbox, newerFormat = "newer_format" }
    public var code: Code
    public var message: String
    /// The errno of the call that failed, when one did.
    public var errno: Errno?

    public init(_ code: Code, _ message: String, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    public var description: String { message + (errno.map { " (code \($0.rawValue))" } ?? "") }
}
