import Glibc
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup
import Uplink

/// The running agent's status, built by the event loop from what it owns (on request: nothing is
/// kept up to date for it between requests).
struct StatusSnapshot {
    let config: AgentConfig
    let garage: Garage
    let session: UplinkSession
    /// What the broker refuses now (its words and the first seq refused, or its silence over MQTT 3.1.1), if it does.
    let publishRefused: String?
    let stamper: EventStamper
    let tracker: StatusTracker
    let configHash: String?
    let mode: String?
    let clockSynced: Bool
    /// The outbox could not be opened at start: events live in memory only, all run.
    let outboxUnusable: String?
    /// The outbox directory was read-only at start (EROFS): why, and the fix.
    let readOnly: ServiceSetupError?

    var clockState: String { Self.clockState(scaled: stamper.clock.isScaled, synced: clockSynced) }

    static func clockState(scaled: Bool, synced: Bool) -> String { scaled ? "simulated" : synced ? "synced" : "unsynced" }

    /// What the disk refuses the agent now, and what comes of it (the retained status's `storage_fault`, `status`,
    /// `doctor`), the worst first: a seq reservation that events are held for (nothing is sent), an outbox in memory
    /// only, the outbox's writes, an unusable state directory, the state file's last save. The `outbox.fault` event
    /// says the outbox's problems too, but while events are held it waits with them.
    /// A directory read-only since the start adds why (most likely the service's sandbox) and the fix (the caller
    /// passes it only until the disk takes a write: a later fault is another one).
    static func storageFault(_ session: UplinkSession, _ state: DeviceState, outboxUnusable: String?,
                             readOnly: ServiceSetupError?) -> String? {
        guard let fault = diskFault(session, state, outboxUnusable: outboxUnusable) else { return nil }
        return readOnly.map { "\(fault); \($0.message); fix: \($0.hint)" } ?? fault
    }

    private static func diskFault(_ session: UplinkSession, _ state: DeviceState, outboxUnusable: String?) -> String? {
        if state.awaitingReservation {
            return "cannot reserve sequence numbers in \(state.path ?? "the state directory"): "
                + "new events are held until the disk takes writes again"
        }
        if let problem = outboxUnusable { return problem + ": events are kept in memory only, until a restart finds the disk usable" }
        if let problem = session.outboxProblem { return problem + ": events are kept in memory until the disk takes writes again" }
        if let problem = state.directoryProblem { return problem }
        return state.saveProblem.map { $0 + ": tried again, events still go out" }
    }

    /// The outbox's oldest pending event's age in seconds (nil: none, or from before the machine's last boot): real
    /// time, as the wire's times are also at --speed.
    var oldestAgeSeconds: Double? {
        guard let oldest = session.oldestPending, oldest.kernelBoot == stamper.kernelBoot else { return nil }
        let clock = stamper.clock
        return max(0, Double(clock.realElapsed(from: MonotonicInstant(nanoseconds: oldest.atMonotonic), to: clock.now())
            .nanosecondCount) / 1e9)
    }


    func build() -> AgentStatus {
        let now = stamper.clock.now()
        // Real time, like the wall-clock times beside it (also at --speed).
        let clock = stamper.clock
        let ago = { (instant: MonotonicInstant) in Double(clock.realElapsed(from: instant, to: now).milliseconds) / 1000 }
        let inputs = config.inputs.enumerated().map { i, input in
            let state = garage.input(i)
            return AgentStatus.Input(input: input.ref.description, feeds: input.owner, raw: state.raw, filtered: state.filtered,
                                     health: state.fault?.rawValue ?? "ok", changes: tracker.changes[i],
                                     lastChange: tracker.lastChange[i].map(stamper.wallTime),
                                     lastChangeAgoSeconds: tracker.lastChange[i].map(ago))
        }
        let lanes = config.lanes.enumerated().map { l, lane in
            AgentStatus.Lane(id: lane.id, from: lane.from, to: lane.to, loopA: lane.loopA.ref.description,
                             loopB: lane.loopB.ref.description,
                             faulted: inputs[2 * l].health != "ok" || inputs[2 * l + 1].health != "ok",
                             passages: tracker.passages[lane.id] ?? 0, lastPassage: tracker.lastPassage[lane.id])
        }
        let spots = config.spots.indices.map { s in
            let spot = garage.spot(s)
            return AgentStatus.Spot(id: spot.id, level: spot.level, zone: AgentStatus.Spot.zone(of: spot.id, level: spot.level),
                                    state: spot.occupancy.rawValue, since: spot.since.map(stamper.wallTime),
                                    checkedIn: spot.checkedIn)
        }
        let levels = config.levels.indices.map { l in
            let level = garage.level(l)
            return AgentStatus.Level(id: level.id, capacity: level.capacity, occupied: level.occupied, free: level.free,
                                     unknown: level.unknown, source: level.source, spotsSensed: level.spotsSensed,
                                     spotsOccupied: level.spotsOccupied, spotsUnknown: level.spotsUnknown,
                                     laneCount: level.laneCount)
        }
        var link = AgentStatus.Link(state: tracker.broker == nil ? "connecting" : "connected", broker: tracker.broker,
                                    connectedSince: tracker.connectedSince.map(stamper.wallTime),
                                    reconnects: tracker.reconnects, lastLoss: tracker.lastLoss,
                                    brokers: config.mqtt.brokers.map(\.description), idConflict: tracker.idConflict,
                                    oversizedCommands: tracker.oversizedCommands)
        link.publishRefused = publishRefused
        let state = stamper.state
        let outbox = AgentStatus.OutboxStatus(path: config.outbox.path, depth: session.outboxCount,
                                              capacity: session.outboxCapacity, oldestSeq: session.oldestPendingSeq,
                                              oldestAgeSeconds: oldestAgeSeconds, lastSeq: state.seq,
                                              dropsDeclared: tracker.dropsDeclared,
                                              dropsUnannounced: state.declared.reduce(0) { $0 + $1.count } + (state.announcement?.event.dropped ?? 0),
                                              problem: Self.storageFault(session, state, outboxUnusable: outboxUnusable,
                                                                                readOnly: readOnly))
        return AgentStatus(site: config.site, device: config.device, version: AgentVersion.current, configHash: configHash,
                           mode: mode ?? "live", pid: getpid(), boot: state.boot, now: stamper.wallTime(now),
                           startedAt: stamper.wallTime(tracker.startedAt), uptimeSeconds: tracker.uptimeSeconds,
                           clock: clockState, logLevel: Log.threshold.word, link: link, outbox: outbox, levels: levels,
                           lanes: lanes, spots: spots, inputs: inputs)
    }
}
