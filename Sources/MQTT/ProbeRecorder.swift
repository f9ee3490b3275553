import Synchronization

/// What a broker probe's connection reports through its callbacks: acknowledgements with their reason
/// codes, messages, and libmosquitto's own error lines (a TLS failure's reason is only there).
final class ProbeRecorder: Sendable {
    struct State {
        var pubacks: [Int32: Int32] = [:]
        var subacks: [Int32: [Int32]] = [:]
        var messages: [(topic: String, payload: [UInt8])] = []
        var log: [String] = []
    }

    let state = Mutex(State())

    func puback(mid: Int32, reason: Int32) { state.withLock { $0.pubacks[mid] = reason } }
    func suback(mid: Int32, granted: [Int32]) { state.withLock { $0.subacks[mid] = granted } }
    /// Messages kept, at most: a broker flooding the probe's subscriptions must not grow doctor until the timeout.
    static let messageLimit = 1000

    func message(topic: String, payload: [UInt8]) {
        state.withLock { if $0.messages.count < ProbeRecorder.messageLimit { $0.messages.append((topic, payload)) } }
    }
    func log(_ line: String) { state.withLock { if $0.log.count < 20 { $0.log.append(line) } } }
}

/// A value a probe's thread and its caller share: a Mutex in a class, so closures capture a reference
/// (a noncopyable Mutex itself is not captured by an escaping closure).
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}
