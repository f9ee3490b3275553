import ParkWiseCore
import Uplink

/// Everything that reaches the agent's event loop, in the order it happened.
enum AgentInput: Sendable {
    case lines([LineChange])
    /// A garage timer may be due.
    case tick
    /// Every few seconds: has NTP set the clock?
    case housekeeping
    case uplink(UplinkEvent)
    /// The board can no longer read an input (nil: any of them), and why.
    case inputLost(Int?, String)
    /// A simulation or trace has no more line changes.
    case sourceFinished
    /// SIGTERM or SIGINT: stop gracefully.
    case stop
    /// A graceful stop has waited as long as it may for the broker's acknowledgements.
    case stopGraceElapsed
    /// Someone on the status socket asks for the status (waiting in the runtime's `StatusInbox`).
    case statusRequested
    /// A change of the retained status waited for its turn (`mqtt.status_every`).
    case statusDue
}
