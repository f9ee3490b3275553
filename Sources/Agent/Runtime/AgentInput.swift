import ParkWiseCore
import Uplink

/// Everything that reaches the agent's event loop, in the order it happened.
enum AgentInput: Sendable {
    /// Line changes wait in the line queue (told once until the loop takes them).
    case lines
    /// A garage timer may be due.
    case tick
    /// Feed the systemd watchdog (when it watches) and see whether NTP has set the clock (while it has not).
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
}
