/// libmosquitto refused a call: what was asked, in words, and the library's code.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var libraryCode: Int32?

    public init(_ message: String, code libraryCode: Int32? = nil) {
        self.message = message
        self.libraryCode = libraryCode
    }

    public var description: String { message + (libraryCode.map { " (code \($0))" } ?? "") }
}
