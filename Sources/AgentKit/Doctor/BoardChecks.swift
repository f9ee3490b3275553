import GPIO
import ParkWiseCore
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

    static func lines(_ config: AgentConfig, service: ServiceChecks.Found) -> [ProbeStep] {
        let inputs = config.inputs
        if inputs.isEmpty { return [ProbeStep(.warning, "no inputs configured", fix: "add lanes or spots to the config")] }
        if config.board == .simulated && service.status == nil { return [ProbeStep(.ok, "no lines to check (simulated)")] }
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
            let active = status.inputs.filter(\.raw).map { "\($0.feeds) (\($0.input))" }
            steps += idle(active, all: status.inputs.count)
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
        let active = inputs.indices.filter { levels[$0] }.map { "\(inputs[$0].owner) (\(inputs[$0].ref))" }
        return [ProbeStep(.ok, "\(inputs.count) lines present and requestable")] + idle(active, all: inputs.count)
    }

    /// Inputs reading active now: plausible for a few (cars park at night too), a wiring or `active_low` mistake otherwise.
    private static func idle(_ active: [String], all: Int) -> [ProbeStep] {
        guard !active.isEmpty else { return [ProbeStep(.ok, "every input reads free / no vehicle")] }
        let shown = active.prefix(8).joined(separator: ", ") + (active.count > 8 ? ", and \(active.count - 8) more" : "")
        return [ProbeStep(.warning, "\(active.count) of \(all) inputs read occupied / a vehicle now", detail: shown,
                          fix: "if nothing is there, the sensor's polarity is the other way round (flip `active_low` for it) "
                            + "or its wiring is wrong; `parkwise-agent walk-test` checks each one")]
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
