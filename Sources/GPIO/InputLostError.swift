/// An input (or all of them) that can no longer be watched after start-up: its chip was removed or failed.
public struct InputLostError: Error, Sendable, CustomStringConvertible {
    /// The index of the input (same order as the config's inputs), or nil when no input is watched any more.
    public var input: Int?
    /// What happened and what to do about it.
    public var message: String

    public init(input: Int?, message: String) {
        self.input = input
        self.message = message
    }

    public var description: String { message }
}
