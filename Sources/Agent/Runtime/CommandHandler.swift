import ParkWiseContract
import ParkWiseCore

/// Commands a backend or technician sends on `cmd/<name>`. A malformed or unknown command gets
/// an error reply and changes nothing.
enum CommandHandler {
    struct Calibrate: Decodable {
        var level: String
        var count: Int
        /// Optional, but when present a string: a reply must be matched to its command.
        var id: String?
    }

    static func handle(name: String, payload: [UInt8], garage: inout Garage) -> CommandReply {
        let request = WireJSON.decode(CommandEnvelope.self, from: payload)
        switch name {
        case "rebirth":
            return CommandReply(command: name, id: request?.id, ok: true)
        case "calibrate":
            guard let c = WireJSON.decode(Calibrate.self, from: payload) else {
                return CommandReply(command: name, id: request?.id, ok: false,
                                    error: "expected {\"level\": \"P2\", \"count\": 12, \"id\": \"optional text\"}")
            }
            guard garage.calibrate(level: c.level, count: c.count) else {
                return CommandReply(command: name, id: request?.id, ok: false,
                                    error: "unknown level '\(c.level.prefix(20))\(c.level.count > 20 ? "…" : "")' or count outside 0...capacity")
            }
            return CommandReply(command: name, id: request?.id, ok: true)
        default:
            return CommandReply(command: name, id: request?.id, ok: false,
                                error: "unknown command; known: rebirth, calibrate")
        }
    }
}
