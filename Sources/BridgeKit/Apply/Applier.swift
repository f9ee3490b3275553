import ParkWiseContract
import ParkWiseLog
import Postgres

/// Applies admitted messages to the database, one transaction per batch, on the database thread.
/// A batch costs a handful of statements whatever its size: events are deduplicated in one insert,
/// devices locked and updated once, spot and level states written in one statement each; only
/// arrivals and reservations, faults and gaps take a statement of their own. Every write is idempotent
/// or conditional on the device's order, so a batch can be retried after a failure and two bridges
/// can apply the same feed in any interleaving.
final class Applier {
    struct Outcome {
        var applied = 0
        /// Of those applied, the events (not statuses, states or register entries).
        var events = 0
        var duplicates = 0
        /// Messages of revoked devices, and spot reports from a device that does not own the spot: not applied.
        var ignored = 0
        /// Devices to send `cmd/rebirth` once committed (a gap to heal from their retained states).
        var rebirth: Set<DeviceKey> = []
    }

    let db: any Database
    let spotOwners: SpotOwners
    private(set) var knownSpots: Set<String> = []
    /// Unknown spot ids already logged (each is still counted in sensor_unknown_spots).
    private var reportedUnknown: Set<String> = []
    /// Revoked devices whose messages were said ignored (once per device and run).
    private var reportedRevoked: Set<DeviceKey> = []
    /// `device spot` pairs whose reports are refused now (logged at a streak's first, forgotten at an accepted one).
    private var refusedStreaks: Set<String> = []
    /// Batches whose spots the backend's own rules refused (logged once per streak).
    private var spotsRefused = LogStreak(.error, "spots not updated: the backend's database refused the sensors' view",
                                         ended: "spots updated again")
    // Per batch.
    /// What the batch has to say, logged once it commits: a batch rolled back (then retried, or skipped) says nothing
    /// it did not do, and a retry does not say it twice.
    private var saidOnCommit: [() -> Void] = []
    private var cursors: [DeviceKey: DeviceCursor] = [:]
    /// The registered owners of the batch's spots (`spot_owners: registered`), kept current by its register entries.
    private var owners: [String: DeviceKey] = [:]
    private var spots = SpotWrites()
    private var levels: [String: (DeviceKey, String, LevelStatePayload)] = [:]
    private var touchedSpots: Set<String> = []
    private var touchedDevices: Set<DeviceKey> = []
    private var outcome = Outcome()

    init(db: any Database, spotOwners: SpotOwners) throws(PostgresError) {
        self.db = db
        self.spotOwners = spotOwners
        try refreshSpots()
    }

    func refreshSpots() throws(PostgresError) {
        knownSpots = Set(try db.query(SQL.knownSpots).rows.compactMap { $0[0] })
    }

    /// Applies the batch in one transaction and re-asserts the spots it touched. A failure names the whole-batch
    /// statement that raised it, if one did: its data error is no message's (see `WholeStatement`).
    func apply(_ messages: [FeedMessage]) throws(ApplyError) -> Outcome {
        outcome = Outcome()
        touchedSpots = []
        touchedDevices = []
        spots.removeAll()
        levels = [:]
        saidOnCommit = []
        var whole: WholeStatement?
        do {
            try transaction(messages, whole: &whole)
        } catch {
            throw ApplyError(error, statement: whole)
        }
        for line in saidOnCommit { line() }
        saidOnCommit = []
        return outcome
    }

    /// The batch's transaction; `whole` is set while a whole-batch statement runs (and for the commit).
    /// insertEvents, ensureDevices, the spot and level upserts carry each message's own values (times, ids, counts)
    /// in one statement: a data error there is a message's, found by applying them one at a time.
    private func transaction(_ messages: [FeedMessage], whole: inout WholeStatement?) throws(PostgresError) {
        try db.query("BEGIN")
        do {
            // Devices first (every bridge locks them before anything else): a revoked one's messages go no further.
            let revoked = try lockDevices(messages)
            let messages = withoutRevoked(messages, revoked: revoked)
            try loadOwners(spotsOf(messages))
            let fresh = try insertEvents(messages)
            var seen: Set<String> = []
            for message in messages {
                switch message {
                case .status(let key, let status): try apply(key, status)
                case .register(let key, let entry): try register(key, entry)
                case .event(let key, let event, let json):
                    if fresh.contains(event.id.lowercased()) && seen.insert(event.id.lowercased()).inserted {
                        try checkReuse(key, event)
                        try apply(key, event)
                    } else {
                        outcome.duplicates += 1
                        // A declaration seen before still asks for a rebirth: the first one's request may have been
                        // lost (a commit whose reply never came, then retried; a broker away). One more is harmless.
                        if event.type == "outbox.dropped" { outcome.rebirth.insert(key) }
                        if event.clock == "corrected" {
                            // Its unsynced copy may be in this batch, its spot write not flushed yet: flushed first,
                            // so the re-dating below finds the times it corrects.
                            try flushSpots()
                            try correct(key, event, json: json)
                        }
                    }
                case .spot(let key, let id, let state):
                    outcome.applied += 1
                    try sensed(key, id, state: state.state, since: state.since, checkedIn: state.checkedIn,
                               seq: state.seq ?? cursors[key]?.lastSeq ?? 0, isState: true)
                case .level(let key, let id, let level):
                    outcome.applied += 1
                    levels["\(key)/\(id)"] = (key, id, level)
                case .ignored, .malformed:
                    break
                }
            }
            try flushSpots()
            try flushLevels()
            whole = .cursorWrite
            try writeCursors()
            whole = nil
            try reassertKeepingTheBatch()
            whole = .commit
            try db.query("COMMIT")
        } catch {
            if db.isOK { _ = try? db.query("ROLLBACK") }
            throw error
        }
    }

    private func onCommit(_ line: @escaping () -> Void) { saidOnCommit.append(line) }

    /// `spots` is the backend's table: a rule of its own schema (a CHECK) may refuse what the sensors say about a
    /// spot. That must cost neither the batch (its events, states and cursors: each message would be skipped in turn)
    /// nor the other spots: the batch's spots are then written one by one, the refused ones left out and said.
    /// (The savepoint is not released: COMMIT ends it, one round trip less.)
    private func reassertKeepingTheBatch() throws(PostgresError) {
        guard !touchedSpots.isEmpty || !touchedDevices.isEmpty else { return onCommit { [self] in spotsRefused.ended() } }
        try db.query("SAVEPOINT reassert")
        do {
            _ = try reassert(all: false)
            onCommit { [self] in spotsRefused.ended() }
        } catch {
            guard error.isDataError else { throw error }
            try db.query("ROLLBACK TO SAVEPOINT reassert")
            let devices = Array(touchedDevices)
            let ofDevices = devices.isEmpty ? [] : try db.query(SQL.spotsOfDevices, [textArray(devices.map(\.site)),
                                                                                   textArray(devices.map(\.device))]).rows
            let spots = Set(touchedSpots).union(ofDevices.compactMap { $0[0] }).sorted()
            let refused = try reassertOneByOne(spots, inTransaction: true)
            onCommit { [self] in spotsRefused.occurred(1, ["error": error, "spots": refused.prefix(5).joined(separator: ",")]) }
        }
    }

    /// Every sensor spot re-asserted (the periodic sweep), one by one where the backend's rules refuse some.
    func reassertAll() throws(PostgresError) -> Int {
        do { return try reassert(all: true) } catch {
            guard error.isDataError else { throw error }
            let spots = try db.query(SQL.sensorSpotIDs).rows.compactMap { $0[0] }
            let refused = try reassertOneByOne(spots, inTransaction: false)
            spotsRefused.occurred(1, ["error": error, "spots": refused.prefix(5).joined(separator: ",")])
            return spots.count - refused.count
        }
    }

    /// Each spot alone (in a transaction, each in a savepoint): the ones the backend's rules refuse.
    private func reassertOneByOne(_ spots: [String], inTransaction: Bool) throws(PostgresError) -> [String] {
        var refused: [String] = []
        for spot in spots {
            if inTransaction { try db.query("SAVEPOINT one_spot") }
            do {
                _ = try db.query(SQL.reassert, [textArray([spot]), textArray([]), textArray([]), "false"])
                if inTransaction { try db.query("RELEASE SAVEPOINT one_spot") }
            } catch {
                guard error.isDataError else { throw error }
                if inTransaction { try db.query("ROLLBACK TO SAVEPOINT one_spot") }
                refused.append(spot)
            }
        }
        return refused
    }

    // MARK: - Events and devices, once per batch

    /// Inserts the batch's events; returns the ids that were new (the others are redeliveries).
    private func insertEvents(_ messages: [FeedMessage]) throws(PostgresError) -> Set<String> {
        var rows: [(key: DeviceKey, event: EventPayload, json: String)] = []
        var ids: Set<String> = []
        for case .event(let key, let event, let json) in messages where ids.insert(event.id.lowercased()).inserted {
            rows.append((key, event, json))
        }
        guard !rows.isEmpty else { return [] }
        let inserted = try db.query(SQL.insertEvents, [
            textArray(rows.map { $0.event.id }), textArray(rows.map(\.key.site)), textArray(rows.map(\.key.device)),
            textArray(rows.map { String($0.event.seq) }), textArray(rows.map { String($0.event.boot) }),
            textArray(rows.map(\.event.type)), textArray(rows.map(\.event.at)), textArray(rows.map(\.json)),
        ])
        return Set(inserted.rows.compactMap { $0[0]?.lowercased() })
    }

    /// Locks the batch's devices (creating their rows) and reads their cursors; returns the revoked ones.
    /// Rows are created only for devices that have none yet (a device's first batch): one statement for the others.
    private func lockDevices(_ messages: [FeedMessage]) throws(PostgresError) -> Set<DeviceKey> {
        cursors = [:]
        let keys = Set(messages.compactMap(\.device)).sorted { ($0.site, $0.device) < ($1.site, $1.device) }
        guard !keys.isEmpty else { return [] }
        let parameters = [textArray(keys.map(\.site)), textArray(keys.map(\.device))]
        var rows = try db.query(SQL.lockDevices, parameters).rows
        if rows.count < keys.count {
            try db.query(SQL.ensureDevices, parameters)
            rows = try db.query(SQL.lockDevices, parameters).rows
        }
        var revoked: Set<DeviceKey> = []
        for row in rows {
            guard let site = row[0], let device = row[1] else { continue }
            let key = DeviceKey(site: site, device: device)
            cursors[key] = DeviceCursor(boot: UInt64(row[2] ?? "0") ?? 0, lastSeq: UInt64(row[3] ?? "0") ?? 0)
            if row[4] == "t" { revoked.insert(key) }
        }
        return revoked
    }

    /// The batch without what revoked devices sent (those revoked before it, or by an entry earlier in it): their
    /// statuses, events and retained states, which a broker restart or a copied certificate may still bring.
    private func withoutRevoked(_ messages: [FeedMessage], revoked: Set<DeviceKey>) -> [FeedMessage] {
        var revoked = revoked
        var kept: [FeedMessage] = []
        kept.reserveCapacity(messages.count)
        for message in messages {
            if case .register(let key, let entry) = message {
                kept.append(message)
                if entry.revoked { revoked.insert(key) }
                continue
            }
            guard let key = message.device, revoked.contains(key) else {
                kept.append(message)
                continue
            }
            outcome.ignored += 1
            if !reportedRevoked.contains(key) {
                onCommit { [self] in
                    if reportedRevoked.insert(key).inserted { Log.warn("message of a revoked device ignored", ["device": key]) }
                }
            }
        }
        return kept
    }

    /// Every spot the messages report.
    private func spotsOf(_ messages: [FeedMessage]) -> Set<String> {
        var spots: Set<String> = []
        for message in messages {
            switch message {
            case .spot(_, let id, _): spots.insert(id)
            case .event(_, let event, _):
                if let spot = event.spot { spots.insert(spot) }
                if let subject = event.subject, subject.hasPrefix("spot ") { spots.insert(String(subject.dropFirst(5))) }
            default: break
            }
        }
        return spots
    }

    private func loadOwners(_ spots: Set<String>) throws(PostgresError) {
        owners = [:]
        try refreshOwners(spots)
    }

    private func refreshOwners(_ spots: Set<String>) throws(PostgresError) {
        guard spotOwners == .registered, !spots.isEmpty else { return }
        for spot in spots { owners[spot] = nil }
        for row in try db.query(SQL.owners, [textArray(spots.sorted())]).rows {
            guard let spot = row[0], let site = row[1], let device = row[2] else { continue }
            owners[spot] = DeviceKey(site: site, device: device)
        }
    }

    /// Whether `key` may report `spot`: always with `spot_owners: first_report`; else only its registered owner. A
    /// refused report is counted in sensor_refused_spots and said once per streak.
    private func mayReport(_ key: DeviceKey, _ spot: String) throws(PostgresError) -> Bool {
        guard spotOwners == .registered else { return true }
        let streak = "\(key) \(spot)"
        if owners[spot] == key {
            refusedStreaks.remove(streak)
            return true
        }
        let owner = owners[spot]
        outcome.ignored += 1
        try db.query(SQL.refusedSpot, [key.site, key.device, spot, owner?.description])
        if !refusedStreaks.contains(streak) {
            onCommit { [self] in
                guard refusedStreaks.insert(streak).inserted else { return }
                Log.warn(owner == nil ? "spot report refused: no device is registered for this spot"
                                      : "spot report refused: the site's register gives this spot to another device",
                         ["device": key, "spot": spot, "owner": owner?.description ?? "none",
                          "fix": owner == nil ? "give it to its board: sudo deploy/mosquitto/spots.sh \(key.site) DEVICE \(spot)"
                                              : "if it moved to this board: sudo deploy/mosquitto/spots.sh \(key.site) \(key.device) \(spot)"])
            }
        }
        return false
    }

    /// The broker host's word on a device (`FeedMessage.register`): its spots, or its revocation.
    private func register(_ key: DeviceKey, _ entry: RegisterPayload) throws(PostgresError) {
        outcome.applied += 1
        let rev = String(entry.rev)
        guard let row = try db.query(SQL.registerDevice, [key.site, key.device, entry.revoked ? "true" : "false", rev]).first
        else {
            onCommit { Log.debug("register entry older than the one applied, ignored", ["device": key, "rev": rev]) }
            return
        }
        let revoked = row[0] == "t"
        let spots = revoked ? [] : Array(Set(entry.spots)).sorted()
        try flushSpots()   // what the batch had said before this entry, first
        let dropped = try db.query(SQL.dropOwners, [key.site, key.device, textArray(spots), rev]).rows.compactMap { $0[0] }
        if !spots.isEmpty { try db.query(SQL.setOwners, [key.site, key.device, textArray(spots), rev]) }
        let forgotten = try db.query(SQL.forgetSpots, [key.site, key.device, revoked ? nil : textArray(dropped)])
            .rows.compactMap { $0[0] }
        touchedSpots.formUnion(forgotten)
        touchedDevices.insert(key)
        try refreshOwners(Set(spots + dropped))
        if revoked {
            onCommit { Log.warn("device revoked: its messages are ignored from now on, its spots unknown until their owner reports them",
                                ["device": key, "spots": forgotten.count]) }
        } else {
            // Its retained states of spots it has just been given were refused before: they are asked for again.
            outcome.rebirth.insert(key)
            onCommit { Log.info("device's spots registered", ["device": key, "spots": spots.count, "taken_away": dropped.count]) }
        }
    }

    private func writeCursors() throws(PostgresError) {
        let entries = cursors.sorted { ($0.key.site, $0.key.device) < ($1.key.site, $1.key.device) }
        guard !entries.isEmpty else { return }
        try db.query(SQL.writeCursors, [textArray(entries.map(\.key.site)), textArray(entries.map(\.key.device)),
                                        textArray(entries.map { String($0.value.boot) }),
                                        textArray(entries.map { String($0.value.lastSeq) })])
    }

    // MARK: - Messages

    private func apply(_ key: DeviceKey, _ status: StatusPayload) throws(PostgresError) {
        outcome.applied += 1
        touchedDevices.insert(key)
        let boot = status.boot ?? 0
        var cursor = cursors[key] ?? DeviceCursor(boot: 0, lastSeq: 0)
        guard status.state == "online" else {
            // The last will of an older boot arriving late says nothing about this one.
            guard boot >= cursor.boot else { return }
            cursor.boot = boot
            cursors[key] = cursor
            let connection = status.connection.map { String($0) }
            guard try db.query(SQL.offline, [key.site, key.device, String(boot), connection]).first?[0] == "1" else {
                // Another bridge of a shared group applied the online of a later connection already.
                onCommit { Log.debug("an offline older than the device's online, ignored",
                                     ["device": key, "boot": boot, "connection": connection ?? "-"]) }
                return
            }
            // With a shared subscription another bridge may already have applied the status that came after this last
            // will (a reconnect) from an agent that does not number its connections: a rebirth has a device that is up
            // say so again (one that is down publishes its status and states anyway when it connects).
            if status.connection == nil { outcome.rebirth.insert(key) }
            return
        }
        if boot < cursor.boot {
            // A boot that went down: the device lost its state directory and counts seqs from 1 again.
            let was = cursor.boot
            onCommit { Log.warn("device restarted its counters, rebuilding from its retained states",
                                ["device": key, "boot": boot, "was": was]) }
            try flushSpots()
            try db.query(SQL.resetSpotOrder, [key.site, key.device])
            cursor = DeviceCursor(boot: boot, lastSeq: 0)
        }
        cursor.boot = boot
        cursors[key] = cursor
        // The fault the database held before (another bridge's, or this one's before a restart): a change is logged.
        let rows = try db.query(SQL.online, [key.site, key.device, status.mode, status.since, status.storageFault,
                                             statusJSON(status), String(boot), status.connection.map { String($0) }])
        guard let before = rows.first else {
            // Older news: the offline of this connection, or a later connection's status, was applied already.
            onCommit { Log.debug("an online status older than the device's last, ignored",
                                 ["device": key, "boot": boot, "connection": status.connection ?? 0]) }
            return
        }
        if before[0] != status.storageFault {
            if let fault = status.storageFault {
                onCommit { Log.warn("device reports a storage fault", ["device": key, "fault": fault]) }
            } else {
                onCommit { Log.info("device storage works again", ["device": key]) }
            }
        }
    }

    /// The status as `sensor_devices.status` keeps it for the fleet view; nil for one jsonb cannot hold (a NUL in a
    /// string), which would otherwise fail the batch.
    private func statusJSON(_ status: StatusPayload) -> String? {
        let json = String(decoding: WireJSON.encode(status), as: UTF8.self)
        return json.contains("\\u0000") ? nil : json
    }

    private func apply(_ key: DeviceKey, _ event: EventPayload) throws(PostgresError) {
        outcome.applied += 1
        outcome.events += 1
        try checkOrder(key, event)
        switch event.type {
        case "spot.occupied", "spot.vacated":
            guard let spot = event.spot else { return }
            try sensed(key, spot, state: event.type == "spot.occupied" ? "occupied" : "free", since: event.at,
                       checkedIn: false, seq: event.seq, isState: false)
        case "spot.checkin":
            guard let spot = event.spot else { return }
            let arrival = event.arrival ?? event.at
            guard try sensed(key, spot, state: "occupied", since: arrival, checkedIn: true, seq: event.seq, isState: false)
            else { return }
            try arrived(key, spot, at: arrival)
        case "spot.checkout":
            guard let spot = event.spot, knownSpots.contains(spot), try mayReport(key, spot) else { return }
            try checkOut(spot, departure: event.departure ?? event.at)
        case "sensor.fault":
            let subject = event.subject ?? ""
            try db.query(SQL.insertFault, [event.id, key.site, key.device, subject, event.input, event.reason, event.at])
            if subject.hasPrefix("spot ") {
                try sensed(key, String(subject.dropFirst(5)), state: "unknown", since: event.at, checkedIn: false,
                           seq: event.seq, isState: false)
            }
        case "sensor.recovered":
            try db.query(SQL.recoverFault, [key.site, key.device, event.subject ?? "", event.input, event.at])
        case "outbox.dropped":
            let first = event.firstSeq ?? 0, last = event.lastSeq ?? 0
            onCommit { Log.warn("device declared lost events, reconciling from its retained states",
                     ["device": key, "dropped": event.dropped ?? 0, "first_seq": first, "last_seq": last]) }
            try db.query(SQL.insertGap, [key.site, key.device, String(first), String(last), "true", event.dropped.map(String.init)])
            outcome.rebirth.insert(key)
        default:
            // Lane passages, level.drift, outbox.fault/recovered, input.shed and types a later contract adds: the
            // device's own history, kept in sensor_events only (never in the product's telemetry_events).
            break
        }
    }

    /// Keeps the corrected times of an event first applied with an unsynced clock.
    private func correct(_ key: DeviceKey, _ event: EventPayload, json: String) throws(PostgresError) {
        guard let text = try db.query(SQL.correctEvent, [event.id, event.at, json]).first?[0],
              let old = WireJSON.decode(EventPayload.self, from: Array(text.utf8)), let spot = event.spot else { return }
        onCommit { Log.info("event re-dated by the device's corrected clock", ["device": key, "seq": event.seq, "type": event.type]) }
        func redate(_ sql: String, _ before: String?, _ after: String?) throws(PostgresError) {
            guard let before, let after, before != after else { return }
            try db.query(sql, [spot, before, after, String(event.seq)])
        }
        switch event.type {
        case "spot.occupied", "spot.vacated":
            try redate(SQL.correctSince, old.at, event.at)
        case "spot.checkin":
            try redate(SQL.correctSince, old.arrival, event.arrival)
            try redate(SQL.correctCheckIn, old.arrival, event.arrival)
            try redate(SQL.correctArrival, old.arrival, event.arrival)
        case "spot.checkout":
            try redate(SQL.correctCheckOut, old.departure, event.departure)
        default:
            break
        }
        touchedSpots.insert(spot)
    }

    /// A new event with a seq its device already used in this boot, under another id: its counters went back (its
    /// state directory was lost, and restarts brought `boot` back up to the stored one) or two boards share its id.
    /// (A new id with a lower seq alone is no proof: with a shared subscription a seq may come after a higher one.)
    /// Accepted: the device's spot order restarts, and its retained states rebuild its spots.
    private func checkReuse(_ key: DeviceKey, _ event: EventPayload) throws(PostgresError) {
        guard let cursor = cursors[key], event.boot == cursor.boot, event.seq <= cursor.lastSeq,
              try db.query(SQL.seqUsedByAnotherEvent, [key.site, key.device, String(event.boot), String(event.seq), event.id]).first != nil
        else { return }
        let was = cursor.lastSeq
        onCommit {
            Log.warn("device used a seq again for another event (state directory lost, or two boards with its id), rebuilding",
                     ["device": key, "boot": event.boot, "seq": event.seq, "last_seq": was])
        }
        try flushSpots()
        try db.query(SQL.resetSpotOrder, [key.site, key.device])
        cursors[key] = DeviceCursor(boot: event.boot, lastSeq: 0)
        outcome.rebirth.insert(key)
    }

    /// Tracks the device's highest seq; a jump over missing seqs is a detected gap, healed by a rebirth.
    private func checkOrder(_ key: DeviceKey, _ event: EventPayload) throws(PostgresError) {
        var cursor = cursors[key] ?? DeviceCursor(boot: 0, lastSeq: 0)
        if cursor.lastSeq > 0 && event.seq > cursor.lastSeq + 1 {
            let after = cursor.lastSeq
            onCommit { Log.info("seq jump, checked again in a moment", ["device": key, "after_seq": after, "got_seq": event.seq]) }
            // Checked by the sweep before a rebirth: with a shared subscription the missing seqs may be
            // in another bridge's batch.
            try db.query(SQL.insertGap, [key.site, key.device, String(cursor.lastSeq + 1), String(event.seq - 1), "false", nil])
        }
        cursor.lastSeq = max(cursor.lastSeq, event.seq)
        cursor.boot = max(cursor.boot, event.boot)
        cursors[key] = cursor
    }

    /// Collects the sensors' view of a spot; a spot ParkWise does not know is recorded instead. Returns whether it was
    /// taken (a spot ParkWise knows, reported by a device that may).
    @discardableResult
    private func sensed(_ key: DeviceKey, _ spot: String, state: String, since: String?, checkedIn: Bool,
                        seq: UInt64, isState: Bool) throws(PostgresError) -> Bool {
        guard knownSpots.contains(spot) else {
            if !reportedUnknown.contains(spot) {
                onCommit { [self] in
                    if reportedUnknown.insert(spot).inserted { Log.warn("spot unknown to ParkWise, recorded, not applied", ["device": key, "spot": spot]) }
                }
            }
            try db.query(SQL.unknownSpot, [key.site, key.device, spot])
            return false
        }
        guard ["free", "occupied", "unknown"].contains(state), try mayReport(key, spot) else { return false }
        spots.add(.init(spot: spot, key: key, state: state, since: since, checkedIn: checkedIn, seq: seq, isState: isState))
        return true
    }

    /// Writes the collected spot views; a retained state that won completes a check-in or check-out
    /// whose event was lost (it is the truth after any loss).
    private func flushSpots() throws(PostgresError) {
        guard !spots.isEmpty else { return }
        let writes = spots.sorted
        spots.removeAll()
        let applied = Set(try db.query(SQL.sensorSpots, [
            textArray(writes.map(\.spot)), textArray(writes.map(\.key.site)), textArray(writes.map(\.key.device)),
            textArray(writes.map(\.state)), optionalArray(writes.map(\.since)),
            textArray(writes.map { $0.checkedIn ? "true" : "false" }), textArray(writes.map { String($0.seq) }),
            textArray(writes.map { String($0.order) }), spotOwners == .registered ? "true" : "false",
        ]).rows.compactMap { $0[0] })
        touchedSpots.formUnion(applied)
        // A car on a held spot: its hold is kept alive for the check-in, before any reservation call can expire it.
        let occupied = writes.filter { $0.state == "occupied" && applied.contains($0.spot) }.map(\.spot)
        if !occupied.isEmpty { try db.query(SQL.keepHoldsWithArrival, [textArray(occupied)]) }
        for write in writes where write.isState && applied.contains(write.spot) {
            guard let since = write.since else {
                // Free, since nobody knows when (a board that restarted): the departure it did not see, estimated.
                if write.state == "free" { try checkOutUntimed(write.spot) }
                continue
            }
            if write.state == "occupied" && write.checkedIn { try arrived(write.key, write.spot, at: since) }
            if write.state == "free" { try checkOut(write.spot, departure: since) }
        }
    }

    private func flushLevels() throws(PostgresError) {
        let entries = levels.values.sorted { ("\($0.0)", $0.1) < ("\($1.0)", $1.1) }
        guard !entries.isEmpty else { return }
        try db.query(SQL.levels, [textArray(entries.map(\.0.site)), textArray(entries.map(\.0.device)),
                                  textArray(entries.map(\.1)), textArray(entries.map { String($0.2.capacity) }),
                                  optionalArray(entries.map { $0.2.occupied.map(String.init) }),
                                  textArray(entries.map(\.2.source)), textArray(entries.map { String($0.2.unknown) })])
    }

    /// A sensed arrival, matched to the reservation that holds the spot (if any) and recorded once (`SQL.arrived`).
    private func arrived(_ key: DeviceKey, _ spot: String, at arrival: String) throws(PostgresError) {
        touchedSpots.insert(spot)
        try db.query(SQL.arrived, [spot, arrival, key.site, key.device])
    }

    private func checkOut(_ spot: String, departure: String) throws(PostgresError) {
        touchedSpots.insert(spot)
        try db.query(SQL.checkOut, [spot, departure])
    }

    private func checkOutUntimed(_ spot: String) throws(PostgresError) {
        touchedSpots.insert(spot)
        let released = try db.query(SQL.checkOutUntimed, [spot]).rows.count
        if released > 0 {
            onCommit { Log.info("departure not seen by the board, reservation released at its estimate", ["spot": spot]) }
        }
    }

    // MARK: - Sweeps

    /// Brings `spots` in line with the sensors' view: the batch's spots, or all of them.
    @discardableResult
    private func reassert(all: Bool) throws(PostgresError) -> Int {
        guard all || !touchedSpots.isEmpty || !touchedDevices.isEmpty else { return 0 }
        let devices = all ? [] : Array(touchedDevices)
        return try db.query(SQL.reassert, [textArray(all ? [] : touchedSpots), textArray(devices.map(\.site)),
                                           textArray(devices.map(\.device)), all ? "true" : "false"]).rows.count
    }

    /// Check-ins and check-outs the sensors saw but that could not be written then (the API held
    /// the reservation row): how many were completed now.
    func sweepReservations() throws(PostgresError) -> Int {
        try db.query(SQL.sweepCheckIns).rows.count + db.query(SQL.sweepCheckOuts).rows.count
            + db.query(SQL.checkOutUntimed, [nil]).rows.count
    }

    /// Holds whose car came in time, kept alive for their check-in (`SQL.keepHoldsWithArrival`): how many.
    func keepHoldsWithArrival() throws(PostgresError) -> Int {
        try db.query(SQL.keepHoldsWithArrival, [nil]).rows.count
    }

    /// Holds that ran out, expired as the backend expires them: their spots.
    func expireHolds() throws(PostgresError) -> [String] {
        try db.query(SQL.expireHolds).rows.compactMap { $0[0] }
    }

    /// Reservations checked in from the app whose car never came within `seconds`, released: their spots.
    func releaseNoShows(after seconds: Double) throws(PostgresError) -> [String] {
        try db.query(SQL.releaseNoShows, [String(seconds)]).rows.compactMap { $0[0] }
    }

    /// Detected gaps whose seqs still miss after `seconds`: the devices to ask for a rebirth.
    func checkGaps(after seconds: Double) throws(PostgresError) -> Set<DeviceKey> {
        Set(try db.query(SQL.checkGaps, [String(seconds)]).rows.compactMap { row in
            guard let site = row[0], let device = row[1] else { return nil }
            return DeviceKey(site: site, device: device)
        })
    }

    /// Devices offline past `seconds` leave the free count; returns them.
    func markStale(after seconds: Double) throws(PostgresError) -> [DeviceKey] {
        try db.query(SQL.markStale, [String(seconds)]).rows.compactMap { row in
            guard let site = row[0], let device = row[1] else { return nil }
            return DeviceKey(site: site, device: device)
        }
    }

    /// The current slot's snapshot rows not written yet, for the levels that have data: how many were written.
    func snapshot(slotSeconds: Double) throws(PostgresError) -> Int {
        try db.query(SQL.snapshot, [String(slotSeconds)]).rows.count
    }
}
