import ParkWiseContract
import ParkWiseCore
import ParkWiseLog

/// Commands a backend or technician sends on `cmd/<name>`. A malformed or unknown command gets
/// an error reply and changes nothing; a reply never repeats more of the request than its short `id`.
enum CommandHandler {
    struct Calibrate: Decodable {
        var level: String
        var count: Int
        /// Optional, but when present a string: a reply must be matched to its command.
        var id: String?
    }

    struct LogLevel: Decodable {
        var level: String
        var id: String?
    }

    static let known = "rebirth, calibrate, diag, loglevel"
    /// The largest command payload taken, in bytes: a larger one is dropped in libmosquitto's callback, before it is
    /// copied, held or decoded (`LinkSettings.maximumIncoming`), and refused. Commands are a few hundred bytes at most.
    public static let payloadLimit = 64 * 1024
    /// The longest `id` a reply repeats; a longer one is refused.
    static let idLimit = 128

    /// The reply to publish, and whether the command was obeyed.
    struct Outcome {
        var ok: Bool
        var payload: [UInt8]
    }

    /// `status`: the agent's status, for `diag` (built by the caller, who owns the garage).
    static func handle(name: String, payload: [UInt8], retained: Bool = false, oversized: Int? = nil, garage: inout Garage,
                       status: AgentStatus?) -> Outcome {
        let shownName = name.count > 40 ? String(name.prefix(40)) + "…" : name
        if let oversized {
            // Never read: no id to repeat.
            return Outcome(ok: false, payload: WireJSON.encode(CommandReply(
                command: shownName, id: nil, ok: false,
                error: "payload of \(oversized) bytes dropped unread: commands are at most \(payloadLimit) bytes")))
        }
        let id = WireJSON.decode(CommandEnvelope.self, from: payload)?.id
        func reply(_ ok: Bool, _ error: String? = nil) -> Outcome {
            Outcome(ok: ok, payload: WireJSON.encode(CommandReply(command: shownName, id: id, ok: ok, error: error)))
        }
        if let long = id, long.utf8.count > idLimit {
            return Outcome(ok: false, payload: WireJSON.encode(CommandReply(command: shownName, id: nil, ok: false,
                                                                            error: "id longer than \(idLimit) bytes")))
        }
        // A command is acted on only when fresh: the broker's retained copy of one would run again at every
        // connection (a stale calibration re-applied each time the link returns).
        if retained {
            return reply(false, "a retained command is not acted on (it would run again at every connection): publish it "
                         + "without the retain flag, and clear the retained one (mosquitto_pub -r -n -t <its topic>)")
        }
        switch name {
        case "rebirth":
            return reply(true)
        case "calibrate":
            guard let c = WireJSON.decode(Calibrate.self, from: payload) else {
                return reply(false, "expected {\"level\": \"P2\", \"count\": 12, \"id\": \"optional text\"}")
            }
            guard garage.calibrate(level: c.level, count: c.count) else {
                return reply(false, "unknown level '\(c.level.prefix(20))\(c.level.count > 20 ? "…" : "")' or count outside 0...capacity")
            }
            return reply(true)
        case "loglevel":
            guard let l = WireJSON.decode(LogLevel.self, from: payload), let level = Log.Level(word: l.level) else {
                return reply(false, "expected {\"level\": \"debug|info|warn|error\", \"id\": \"optional text\"}")
            }
            Log.warn("log level changed until restart", ["level": level.word, "was": Log.threshold.word])
            Log.threshold = level
            return reply(true)
        case "diag":
            guard let status, payload.isEmpty || WireJSON.decode(CommandEnvelope.self, from: payload) != nil else {
                return reply(false, "expected {} or {\"id\": \"optional text\"}")
            }
            return Outcome(ok: true, payload: DiagReply.encode(id: id, status: status))
        default:
            return reply(false, "unknown command; known: \(known)")
        }
    }
}
