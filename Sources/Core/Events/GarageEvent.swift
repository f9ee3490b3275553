/// A fact about the garage, at the monotonic time the vehicle did it. The uplink gives each one
/// an id, a sequence number and a wall-clock time.
public struct GarageEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case spotOccupied(spot: String, level: String)
        case spotVacated(spot: String, level: String)
        /// The vehicle stayed long enough to count as parked; `arrival` is when occupancy began.
        case spotCheckin(spot: String, level: String, arrival: MonotonicInstant)
        case spotCheckout(spot: String, level: String, arrival: MonotonicInstant)
        case lanePassage(lane: String, from: String, to: String)
        case laneAborted(lane: String)
        case sensorFault(subject: String, input: String, reason: FaultReason)
        case sensorRecovered(subject: String, input: String)
        /// A lane count was clamped: more vehicles left than were counted in, or more came than fit.
        case levelDrift(level: String, counted: Int, clampedTo: Int)
    }

    public var kind: Kind
    public var at: MonotonicInstant

    public init(_ kind: Kind, at: MonotonicInstant) {
        self.kind = kind
        self.at = at
    }

    /// The wire name: `spot.occupied`, `lane.passage`, ...
    public var type: String {
        switch kind {
        case .spotOccupied: return "spot.occupied"
        case .spotVacated: return "spot.vacated"
        case .spotCheckin: return "spot.checkin"
        case .spotCheckout: return "spot.checkout"
        case .lanePassage: return "lane.passage"
        case .laneAborted: return "lane.aborted"
        case .sensorFault: return "sensor.fault"
        case .sensorRecovered: return "sensor.recovered"
        case .levelDrift: return "level.drift"
        }
    }
}

public enum FaultReason: String, Sendable, Hashable {
    /// Held active longer than the limit for its kind.
    case stuck
    /// More changes in a minute than traffic makes: a loose wire, a failing detector.
    case chatter
    /// The input cannot be read any more (its GPIO chip failed or was removed) until a restart.
    case lost
}
