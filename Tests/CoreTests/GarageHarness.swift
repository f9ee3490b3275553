import ParkWiseCore

/// Drives a Garage on a virtual clock: edges at given milliseconds, timers fired as time passes.
struct GarageHarness {
    var garage: Garage
    var now = MonotonicInstant.milliseconds(0)
    var events: [GarageEvent] = []

    init(_ config: AgentConfig, initial: [Bool]? = nil) {
        garage = Garage(config: config)
        garage.start(initial: initial ?? Array(repeating: false, count: garage.inputCount), at: now)
    }

    /// An edge on input `input` at `ms` milliseconds.
    mutating func edge(_ input: Int, _ active: Bool, at ms: Int64) {
        now = .milliseconds(ms)
        garage.handle(LineChange(input: input, active: active, at: now), into: &events)
    }

    mutating func advance(to ms: Int64) {
        now = .milliseconds(ms)
        garage.advance(to: now, into: &events)
    }

    /// Event types so far, with their times in ms, and clears them.
    mutating func take() -> [String] {
        defer { events.removeAll() }
        return events.map { "\($0.type)@\($0.at.nanoseconds / 1_000_000)" }
    }
}

/// A config with `lanes` lanes between outside and P1 (inputs 0,1 / 2,3 ...) and `spots` spots after them.
func garageConfig(lanes: Int = 1, spots: Int = 1, spotOn: String = "5s", spotOff: String = "10s",
                  checkin: String = "2m", loopDelay: String = "50ms", maxPresence: String = "2m",
                  spotChatterLimit: Int = 20, spotStuckAfter: String = "3d") -> AgentConfig {
    var yaml = "site: s\ndevice: d\nboard: simulated\nlevels:\n  - { id: P1, capacity: 60 }\n  - { id: P2, capacity: 48 }\nlanes:\n"
    var gpio = 2
    for l in 0..<lanes {
        yaml += "  - { id: lane\(l), from: outside, to: P1, loops: { a: GPIO\(gpio), b: GPIO\(gpio + 1) }, "
            + "delayed_on: \(loopDelay), delayed_off: \(loopDelay), max_presence: \(maxPresence) }\n"
        gpio += 2
    }
    yaml += "spots:\n"
    for s in 0..<spots {
        yaml += "  - { id: P1-A-\(s < 9 ? "0" : "")\(s + 1), input: GPIO\(gpio), delayed_on: \(spotOn), "
            + "delayed_off: \(spotOff), checkin_after: \(checkin), chatter_limit: \(spotChatterLimit), "
            + "stuck_after: \(spotStuckAfter) }\n"
        gpio += 1
    }
    return try! parse(yaml)
}
