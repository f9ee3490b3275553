/// A level's vehicle count from lane passages. Unknown until calibrated (never shown as 0);
/// never below 0 or above capacity: a clamp is reported as drift.
struct LevelCounter {
    let id: String
    let capacity: Int
    private(set) var count: Int?

    init(config: LevelConfig) {
        id = config.id
        capacity = config.capacity
    }

    mutating func calibrate(_ value: Int) {
        count = min(max(value, 0), capacity)
    }

    mutating func add(_ delta: Int, at: MonotonicInstant, into events: inout [GarageEvent]) {
        guard let current = count else { return }
        let wanted = current + delta
        let clamped = min(max(wanted, 0), capacity)
        count = clamped
        if clamped != wanted {
            events.append(GarageEvent(.levelDrift(level: id, counted: wanted, clampedTo: clamped), at: at))
        }
    }
}
