import Glibc
import ParkWiseContract
import ParkWiseCore
import MQTT
import Uplink

/// What the status reports beside the garage's own state, kept as it happens by the event loop:
/// each input's raw changes, the link's connections and losses, each lane's passages, the drops
/// declared. A few counters; updated in the loop, read when someone asks for the status.
struct StatusTracker {
    /// The real monotonic time at start (uptime is real time, even in a fast simulation).
    let startedReal: Int64
    let startedAt: MonotonicInstant
    private(set) var changes: [Int]
    private(set) var lastChange: [MonotonicInstant?]
    private var raw: [Bool]
    private(set) var broker: String?
    private(set) var connectedSince: MonotonicInstant?
    private(set) var reconnects = 0
    private(set) var lastLoss: String?
    /// Another client keeps taking the connection over (see `TakeoverWatch`), while it lasts.
    private(set) var idConflict: String?
    /// Commands dropped unread for their size.
    var oversizedCommands = 0
    private(set) var passages: [String: Int] = [:]
    private(set) var lastPassage: [String: AgentStatus.Passage] = [:]
    var dropsDeclared = 0

    init(initial: [Bool], at start: MonotonicInstant) {
        startedReal = AgentClock.read(CLOCK_MONOTONIC)
        startedAt = start
        changes = Array(repeating: 0, count: initial.count)
        lastChange = Array(repeating: nil, count: initial.count)
        raw = initial
    }

    /// Raw line changes, as they reach the loop (a repeat of the same level is no change).
    mutating func note(_ lineChanges: [LineChange]) {
        for c in lineChanges where c.input >= 0 && c.input < raw.count && raw[c.input] != c.active {
            raw[c.input] = c.active
            changes[c.input] += 1
            lastChange[c.input] = c.at
        }
    }

    /// `now` is read only for a new connection (not for every acknowledgement).
    mutating func note(_ event: LinkEvent, at now: @autoclosure () -> MonotonicInstant) {
        switch event {
        case .connected(let name, _, _):
            broker = name
            connectedSince = now()
        case .disconnected(_, let reason):
            guard broker != nil else { return }
            broker = nil
            connectedSince = nil
            reconnects += 1
            lastLoss = reason
        case .contested(let conflict):
            idConflict = conflict
        case .oversized:
            oversizedCommands += 1
        case .acknowledged, .refused, .message:
            break
        }
    }

    /// Events as they are stamped: lane passages are counted.
    mutating func note(_ entries: [OutboxEntry]) {
        // By index: a loop over the entries would copy each (a dozen strings retained) to read its type.
        for i in entries.indices where entries[i].event.type == "lane.passage" {
            let event = entries[i].event
            guard let lane = event.lane else { continue }
            passages[lane, default: 0] += 1
            lastPassage[lane] = AgentStatus.Passage(at: event.at, from: event.from ?? "?", to: event.to ?? "?")
        }
    }

    var uptimeSeconds: Double { Double(AgentClock.read(CLOCK_MONOTONIC) - startedReal) / 1e9 }
}
