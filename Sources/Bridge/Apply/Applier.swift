import ParkWiseContract
import ParkWiseLog
import Postgres

/// Applies admitted messages to the database, one transaction per batch, on the database thread.
/// Every write is idempotent or conditional on the device's order, so a batch can be retried after
/// a failure and two bridges can apply the same feed in any interleaving.
final class Applier {
    struct Outcome {
        var applied = 0
        var duplicates = 0
        /// Devices to send `cmd/rebirth` once committed (a gap to heal from their retained states).
        var rebirth: Set<DeviceKey> = []
    }

    let db: PostgresConnection
    private(set) var knownSpots: Set<String> = []
    // Per batch: what the re-assert at its end covers.
    private var touchedSpots: Set<String> = []
    private var touchedDevices: Set<DeviceKey> = []
    private var outcome = Outcome()

    init(db: PostgresConnection) throws(PostgresError) {
        self.db = db
        try refreshSpots()
    }

    func refreshSpots() throws(PostgresError) {
        knownSpots = Set(try db.query(SQL.knownSpots).rows.compactMap { $0[0] })
    }

    /// Applies the batch in one transaction and re-asserts the spots it touched.
    func apply(_ messages: [FeedMessage]) throws(PostgresError) -> Outcome {
        outcome = Outcome()
        touchedSpots = []
        touchedDevices = []
        try db.transaction { _ throws(PostgresError) in
            for message in messages { try apply(message) }
            try reassert(all: false)
        }
        return outcome
    }

    private func apply(_ message: FeedMessage) throws(PostgresError) {
        switch message {
        case .status(let key, let status): try apply(key, status)
        case .event(let key, let event, let json): try apply(key, event, json: json)
        case .spot(let key, let id, let state):
            outcome.applied += 1
            guard try sensorSpot(key, id, state: state.state, since: state.since, checkedIn: state.checkedIn,
                                 seq: state.seq, isEvent: false) else { return }
            // The retained state is the truth after any loss: it completes a check-in or check-out
            // whose event was lost.
            if let since = state.since, state.state == "occupied", state.checkedIn { try checkIn(id, arrival: since) }
            if let since = state.since, state.state == "free" { try checkOut(id, departure: since) }
        case .level(let key, let id, let level):
            outcome.applied += 1
            try db.query(SQL.level, [key.site, key.device, id, String(level.capacity), level.occupied.map(String.init), level.source])
        case .ignored, .malformed:
            break
        }
    }

    private func apply(_ key: DeviceKey, _ status: StatusPayload) throws(PostgresError) {
        outcome.applied += 1
        touchedDevices.insert(key)
        let boot = status.boot ?? 0
        guard status.state == "online" else {
            try db.query(SQL.offline, [key.site, key.device, String(boot)])
            return
        }
        let stored = try db.query(SQL.lockDevice, [key.site, key.device])
        let storedBoot = stored.first.flatMap { $0[0] }.flatMap { UInt64($0) } ?? 0
        // A boot that went down: the device lost its state directory and counts seqs from 1 again.
        let lost = boot < storedBoot
        if lost {
            Log.warn("device restarted its counters, rebuilding from its retained states",
                     ["device": key, "boot": boot, "was": storedBoot])
            try db.query(SQL.resetSpotOrder, [key.site, key.device])
        }
        try db.query(SQL.online, [key.site, key.device, String(boot), status.since, status.mode, lost ? "true" : "false"])
    }

    private func apply(_ key: DeviceKey, _ event: EventPayload, json: String) throws(PostgresError) {
        let inserted = try db.query(SQL.insertEvent, [event.id, key.site, key.device, String(event.seq), String(event.boot),
                                                      event.type, event.at, json])
        guard !inserted.rows.isEmpty else {
            outcome.duplicates += 1
            return
        }
        outcome.applied += 1
        try checkOrder(key, event)
        switch event.type {
        case "spot.occupied", "spot.vacated":
            guard let spot = event.spot else { return }
            _ = try sensorSpot(key, spot, state: event.type == "spot.occupied" ? "occupied" : "free", since: event.at,
                               checkedIn: false, seq: event.seq, isEvent: true)
        case "spot.checkin":
            guard let spot = event.spot else { return }
            let arrival = event.arrival ?? event.at
            _ = try sensorSpot(key, spot, state: "occupied", since: arrival, checkedIn: true, seq: event.seq, isEvent: true)
            guard knownSpots.contains(spot) else { return }
            if try !checkIn(spot, arrival: arrival) {
                try db.query(SQL.telemetry, ["sensor.unreserved_arrival", json, key.site, key.device])
            }
        case "spot.checkout":
            guard let spot = event.spot, knownSpots.contains(spot) else { return }
            try checkOut(spot, departure: event.departure ?? event.at)
        case "sensor.fault":
            let subject = event.subject ?? ""
            try db.query(SQL.insertFault, [event.id, key.site, key.device, subject, event.input, event.reason, event.at])
            if subject.hasPrefix("spot ") {
                _ = try sensorSpot(key, String(subject.dropFirst(5)), state: "unknown", since: event.at, checkedIn: false,
                                   seq: event.seq, isEvent: true)
            }
            try db.query(SQL.telemetry, ["device." + event.type, json, key.site, key.device])
        case "sensor.recovered":
            try db.query(SQL.recoverFault, [key.site, key.device, event.subject ?? "", event.input, event.at])
            try db.query(SQL.telemetry, ["device." + event.type, json, key.site, key.device])
        case "outbox.dropped":
            let first = event.firstSeq ?? 0, last = event.lastSeq ?? 0
            Log.warn("device declared lost events, reconciling from its retained states",
                     ["device": key, "dropped": event.dropped ?? 0, "first_seq": first, "last_seq": last])
            try db.query(SQL.insertGap, [key.site, key.device, String(first), String(last), "true", event.dropped.map(String.init)])
            try db.query(SQL.telemetry, ["device." + event.type, json, key.site, key.device])
            outcome.rebirth.insert(key)
        case "level.drift", "outbox.fault", "outbox.recovered":
            try db.query(SQL.telemetry, ["device." + event.type, json, key.site, key.device])
        default:
            break   // lane passages and types a later contract adds: kept in sensor_events only
        }
    }

    /// Tracks the device's highest seq; a jump over missing seqs is a detected gap, healed by a rebirth.
    private func checkOrder(_ key: DeviceKey, _ event: EventPayload) throws(PostgresError) {
        var stored = try db.query(SQL.lockDevice, [key.site, key.device])
        if stored.rows.isEmpty {
            try db.query(SQL.ensureDevice, [key.site, key.device, String(event.boot)])
            stored = try db.query(SQL.lockDevice, [key.site, key.device])
        }
        let previous = stored.first.flatMap { $0[1] }.flatMap { UInt64($0) } ?? 0
        if previous > 0 && event.seq > previous + 1 {
            Log.warn("events missing, reconciling from the device's retained states",
                     ["device": key, "after_seq": previous, "got_seq": event.seq])
            try db.query(SQL.insertGap, [key.site, key.device, String(previous + 1), String(event.seq - 1), "false", nil])
            outcome.rebirth.insert(key)
        }
        try db.query(SQL.advanceSeq, [key.site, key.device, String(event.seq), String(event.boot)])
    }

    /// Records the sensor's view of a spot; false when the spot is unknown or the view is older.
    private func sensorSpot(_ key: DeviceKey, _ spot: String, state: String, since: String?, checkedIn: Bool,
                            seq: UInt64?, isEvent: Bool) throws(PostgresError) -> Bool {
        guard knownSpots.contains(spot) else {
            Log.warn("spot unknown to ParkWise, recorded, not applied", ["device": key, "spot": spot])
            try db.query(SQL.unknownSpot, [key.site, key.device, spot])
            return false
        }
        guard ["free", "occupied", "unknown"].contains(state) else { return false }
        let rows = try db.query(SQL.sensorSpot, [spot, key.site, key.device, state, since, checkedIn ? "true" : "false",
                                                 seq.map { String($0) }, isEvent ? "true" : "false"])
        guard !rows.rows.isEmpty else { return false }
        touchedSpots.insert(spot)
        return true
    }

    @discardableResult
    private func checkIn(_ spot: String, arrival: String) throws(PostgresError) -> Bool {
        !(try db.query(SQL.checkIn, [spot, arrival]).rows.isEmpty)
    }

    private func checkOut(_ spot: String, departure: String) throws(PostgresError) {
        try db.query(SQL.checkOut, [spot, departure])
    }

    /// Brings `spots` in line with the sensors' view: the batch's spots, or all of them.
    @discardableResult
    func reassert(all: Bool) throws(PostgresError) -> Int {
        guard all || !touchedSpots.isEmpty || !touchedDevices.isEmpty else { return 0 }
        let devices = Array(touchedDevices)
        return try db.query(SQL.reassert, [textArray(touchedSpots), textArray(devices.map(\.site)),
                                           textArray(devices.map(\.device)), all ? "true" : "false"]).rows.count
    }

    /// Devices offline past `seconds` leave the free count; returns them.
    func markStale(after seconds: Double) throws(PostgresError) -> [DeviceKey] {
        try db.query(SQL.markStale, [String(seconds)]).rows.compactMap { row in
            guard let site = row[0], let device = row[1] else { return nil }
            return DeviceKey(site: site, device: device)
        }
    }

    /// One snapshot per level for the current slot (nothing when this slot is already written).
    func snapshot(slotSeconds: Double) throws(PostgresError) -> Int {
        try db.query(SQL.snapshot, [String(slotSeconds)]).rows.count
    }
}
