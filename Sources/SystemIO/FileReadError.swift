/// Why `WholeFile` read no bytes: the errno of the call that failed, or what the file is instead of what was asked.
public struct FileReadError: Error, Sendable {
    /// The errno of the call that failed (`.tooManySymbolicLinks` for a symbolic link refused by `WholeFile.read(_:limit:)`;
    /// nil when no call failed: a file of the wrong type or size).
    public let errno: Errno?
    /// `WholeFile.read(_:limit:)` found something other than a regular file: what it is ("a FIFO", "a symbolic link to
    /// /dev/zero").
    public var notRegular: String? = nil
    /// `WholeFile.read(_:limit:)` found a regular file larger than its limit: its size (at least the limit + 1).
    public var tooLarge: Int? = nil

    public init(errno: Errno? = nil, notRegular: String? = nil, tooLarge: Int? = nil) {
        self.errno = errno
        self.notRegular = notRegular
        self.tooLarge = tooLarge
    }
}
