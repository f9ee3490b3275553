import GPIO
import ParkWiseCore
import MQTT
import Uplink

/// The board the config names against the machine, and every configured line: present, requestable, and at a
/// plausible level at rest. While the service runs, its lines are its own: the doctor reads its status instead.
enum BoardChecks {
    static func board(_ config: AgentConfig) -> [ProbeStep] {
        let model = BoardProfile.readModel()
        let detected = BoardProfile.detect()
        let machine = model.map { "this machine is \"\($0)\"" } ?? "this machine has no device tree model"
        switch config.board {
        case .simulated:
            return [ProbeStep(.ok, "board: simulated", detail: "the traffic simulator drives the inputs, no GPIO")]
        case .named(let name):
            if detected == name { return [ProbeStep(.ok, "board \(name)", detail: model)] }
            if let detected {
                return [ProbeStep(.failed, "the config says board: \(name), but \(machine)",
                                  fix: "set `board: \(detected)` (or `board: auto`) in the config")]
            }
            return [ProbeStep(.warning, "board \(name) cannot be confirmed", detail: machine + "; the lines are looked up by chip label "
                              + (BoardProfile.mainChipLabel(board: name).map { "(\($0))" } ?? ""))]
        case .auto:
            if let detected { return [ProbeStep(.ok, "board auto: \(detected)", detail: model)] }
            let usesHeader = config.inputs.contains { if case .chipLine = $0.ref { return false } else { return true } }
            return usesHeader
                ? [ProbeStep(.failed, "board: auto, but \(machine), not a Raspberry Pi the agent knows",
                             fix: "write the board in the config (board: raspberry-pi-4, raspberry-pi-5, ...), or name the "
                                + "inputs as chip:line")]
                : [ProbeStep(.ok, "board auto", detail: machine + "; every input is named by chip and line")]
        }
    }

    /// `emptyGarage`: the technician says no vehicle is in the garage now (`doctor --empty-garage`), so an input that
    /// reads one is a wiring or polarity mistake.
    static func lines(_ config: AgentConfig, service: ServiceChecks.Found, emptyGarage: Bool = false) -> [ProbeStep] {
        let inputs = config.inputs
        if inputs.isEmpty { return [ProbeStep(.warning, "no inputs configured", fix: "add lanes or spots to the config")] }
        if config.board == .simulated && service.status == nil { return [ProbeStep(.ok, "no lines to check (simulated)")] }
        if !service.known {
            return [ProbeStep(.warning, "not checked: the lines",
                              detail: "whether the service runs (and holds them) is unknown, see above: doctor does not request lines "
                                  + "a running service may hold",
                              fix: HostChecks.stateAccess(config.outbox.path).fix)]
        }
        if service.running {
            guard let status = service.status else {
                return [ProbeStep(.warning, "the lines are held by the running service and its status is not available",
                                  fix: "look again once `parkwise-agent status` answers, or stop the service to let doctor request them")]
            }
            var steps = [ProbeStep(.ok, "\(CheckConfigCommand.count(status.inputs.count, "input")) watched by the running service",
                                   detail: status.mode == "live" ? nil : "\(status.mode), not GPIO")]
            for input in status.inputs where input.health != "ok" {
                steps.append(ProbeStep(.warning, "\(input.feeds) (\(input.input)) is \(input.health)", fix: healthFix(input.health)))
            }
            // Inputs already flagged (stuck, chatter, lost) have their own fix above.
            let readings = status.inputs.filter { $0.health == "ok" }.map {
                Reading(name: "\($0.feeds) (\($0.input))", lane: $0.feeds.hasPrefix("lane "), active: $0.raw,
                        heldSeconds: $0.raw ? ($0.lastChangeAgoSeconds ?? status.uptimeSeconds) : nil, changes: $0.changes)
            }
            steps += occupancy(readings, all: status.inputs.count, uptime: status.uptimeSeconds, emptyGarage: emptyGarage)
            return steps
        }
        let board: GPIOBoard
        do {
            board = try GPIOBoard.open(inputs: inputs, board: config.board, consumer: "parkwise-doctor")
        } catch {
            return [ProbeStep(.failed, "configured lines present and requestable", detail: error.description,
                              fix: "`parkwise-agent lines --config FILE` shows every line of the machine and which sensor it serves")]
        }
        let levels = board.initialLevels
        let readings = inputs.indices.map {
            Reading(name: "\(inputs[$0].owner) (\(inputs[$0].ref))", lane: inputs[$0].owner.hasPrefix("lane "), active: levels[$0],
                    heldSeconds: nil, changes: nil)
        }
        return [ProbeStep(.ok, "\(inputs.count) lines present and requestable")]
            + occupancy(readings, all: inputs.count, uptime: nil, emptyGarage: emptyGarage)
    }

    /// One input's level as doctor sees it: now, and (from the running service) how long it has been held.
    struct Reading {
        var name: String
        var lane: Bool
        var active: Bool
        /// How long it has read active (the running service's last change, or its uptime when it never changed).
        var heldSeconds: Double?
        /// Raw changes since the service started; nil when doctor read the line once itself.
        var changes: Int?
    }

    /// A vehicle crosses a lane's loop in seconds: a loop held active this long with no change is not traffic.
    static let laneLoopHeldSeconds = 30.0
    /// A spot sensor that has read a vehicle since the service started this long ago, without a single change.
    static let spotNeverChangedSeconds = 86_400.0

    /// Inputs reading active now. A full garage and reversed wiring look the same in one reading: a config change is
    /// advised only from evidence that tells them apart (a lane loop held far longer than a vehicle takes to cross it,
    /// a spot that never changed in a day, or the technician's word that the garage is empty), never from a count.
    static func occupancy(_ readings: [Reading], all: Int, uptime: Double?, emptyGarage: Bool) -> [ProbeStep] {
        let active = readings.filter(\.active)
        let polarityFix = "if nothing is there, the sensor's polarity is the other way round (flip `active_low` for it) "
            + "or its wiring is wrong; `parkwise-agent walk-test` checks each one"
        guard !active.isEmpty else {
            return [ProbeStep(.ok, "every input reads free / no vehicle",
                              detail: emptyGarage ? "as it should in an empty garage: the polarity (active_low) is right" : nil)]
        }
        if emptyGarage {
            return [ProbeStep(.warning, "\(active.count) of \(all) inputs read occupied / a vehicle in a garage said to be empty (--empty-garage)",
                              detail: list(active.map(\.name)), fix: polarityFix)]
        }
        var steps: [ProbeStep] = []
        let heldLoops = active.filter { $0.lane && ($0.heldSeconds ?? 0) >= laneLoopHeldSeconds }
        if !heldLoops.isEmpty {
            steps.append(ProbeStep(.warning, "\(CheckConfigCommand.count(heldLoops.count, "lane loop")) held active with no change "
                                   + "for \(HostChecks.duration(heldLoops.compactMap(\.heldSeconds).min() ?? 0)) or more",
                                   detail: list(heldLoops.map(\.name)) + "; a vehicle crosses a loop in seconds", fix: polarityFix))
        }
        let stillSpots = active.filter {
            !$0.lane && $0.changes == 0 && (uptime ?? 0) >= spotNeverChangedSeconds
        }
        if !stillSpots.isEmpty, let uptime {
            steps.append(ProbeStep(.warning, "\(CheckConfigCommand.count(stillSpots.count, "spot sensor")) read a vehicle and never "
                                   + "changed since the service started \(HostChecks.duration(uptime)) ago",
                                   detail: list(stillSpots.map(\.name)), fix: polarityFix))
        }
        let suspects = Set(heldLoops.map(\.name) + stillSpots.map(\.name))
        let others = active.filter { !suspects.contains($0.name) }
        if !others.isEmpty {
            steps.append(ProbeStep(.ok, "\(others.count) of \(all) inputs read occupied / a vehicle now",
                                   detail: list(others.map(\.name)) + ". Parked and passing vehicles read so: a full garage looks "
                                       + "like reversed wiring, so no polarity advice is drawn from this. When the garage is empty, "
                                       + "`parkwise-agent doctor --empty-garage` checks every input's polarity; `walk-test` checks "
                                       + "each sensor with a vehicle"))
        }
        return steps
    }

    private static func list(_ names: [String]) -> String {
        names.prefix(8).joined(separator: ", ") + (names.count > 8 ? ", and \(names.count - 8) more" : "")
    }

    private static func healthFix(_ health: String) -> String {
        switch health {
        case "stuck": return "held active far longer than a vehicle stays: check the sensor, its cable and its polarity (active_low)"
        case "chatter": return "changes far more often than traffic can: a loose contact, a missing pull resistor (bias:) or a noisy cable"
        case "lost": return "its chip is gone: check the expander's cable and the I2C bus (i2cdetect), then restart the service"
        default: return "see journalctl -u parkwise-agent"
        }
    }
}
