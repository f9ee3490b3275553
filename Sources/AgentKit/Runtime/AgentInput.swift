import ParkWiseCore
import MQTT

/// Everything that reaches the agent's event loop, in the order it happened.
enum AgentInput: Sendable {
    /// Line changes wait in the line queue (told once until the loop takes them).
    case lines
    /// A garage timer may be due (the loop's own deadline passed).
    case tick
    /// The watchdog's, the clock check's or the outbox write's deadline passed: feed systemd's watchdog, see whether
    /// NTP set the clock, write down what the outbox's disk does not have yet.
    case housekeeping
    case uplink(LinkEvent)
    /// The board can no longer read an input (nil: any of them), and why.
    case inputLost(Int?, String)
    /// A simulation or trace has no more line changes.
    case sourceFinished
    /// SIGTERM or SIGINT: stop gracefully.
    case stop
    /// Someone on the status socket asks for the status (waiting in the runtime's `StatusInbox`).
    case statusRequested
    /// A change of the retained status waited for its turn (`mqtt.status_every`): its deadline passed.
    case statusDue
}
