import ParkWiseContract

/// MQTT 3.1.1 acknowledges a publish the broker drops (its ACL denies the topic: a board the broker knows by another
/// name) like a delivery. On such a connection the agent subscribes to its own status topic, and its own status coming
/// back, with this connection's number, is the evidence that the broker takes its publishes: until then the delivery
/// core does not hear of the connection, and events wait in the outbox. With none back, the status is published again
/// after 10 s, doubling up to 64 s, and the wait is said once (log, `status`, `doctor`, the retained status).
/// (An ACL that lets the status through but not the events is not seen this way: MQTT 5, the default, says that too.)
struct EchoCheck {
    let connection: UInt64
    let boot: UInt64
    /// When the status is published again if none came back (CLOCK_MONOTONIC nanoseconds).
    var due: Int64
    var wait: Int64 = EchoCheck.firstWait
    /// The wait was said (one log line per connection).
    var said = false

    static let firstWait: Int64 = 10_000_000_000
    static let longestWait: Int64 = 64_000_000_000

    init(connection: UInt64, boot: UInt64, now: Int64) {
        self.connection = connection
        self.boot = boot
        due = now + Self.firstWait
    }

    /// The status that came back is this connection's own.
    func isOwn(_ payload: [UInt8]) -> Bool {
        guard let status = WireJSON.decode(StatusPayload.self, from: payload) else { return false }
        return status.state == "online" && status.boot == boot && status.connection == connection
    }

    /// None came back by `due`: the next try.
    mutating func retried(now: Int64) {
        said = true
        wait = min(wait * 2, Self.longestWait)
        due = now + wait
    }

    /// What the status says while the wait lasts.
    static let reason = "the broker never returned this device's own status (MQTT 3.1.1 acknowledges a publish it drops): "
        + "it most likely knows this device by another name; events are kept in the outbox"
}
