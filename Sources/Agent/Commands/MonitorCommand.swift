import FoundationEssentials
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import Uplink

/// What a backend sees: subscribes to a site's tree and prints the level view and every event.
enum MonitorCommand {
    static let spec = CommandSpec(
        name: "monitor", abstract: "Watch a site's live feed: level occupancy and every event.",
        options: [
            .init(name: "broker", value: "url", help: "The broker, e.g. mqtt://127.0.0.1:1883 (default)."),
            .init(name: "site", value: "site", help: "Only this site (default: every site)."),
            .init(name: "count", value: "n", help: "Exit after this many events."),
        ])

    static func run(_ args: ParsedArguments) async -> Int32 {
        let url = args.option("broker") ?? "mqtt://127.0.0.1:1883"
        guard let broker = BrokerAddress.parse(url) else {
            printError(UsageError(command: spec, message: "'\(url)' is not a broker address like mqtt://HOST:PORT").text)
            return ExitCode.usage
        }
        let limit = args.option("count").flatMap(Int.init)
        let (stream, continuation) = AsyncStream.makeStream(of: AgentInput.self)
        let link = MQTTLink(settings: LinkSettings(
            brokers: [.init(host: broker.host, port: broker.port, tls: broker.tls)],
            clientID: "parkwise-monitor-\(ProcessInfo.processInfo.processIdentifier)", keepaliveSeconds: 30,
            will: nil, subscriptions: [Topics.siteFilter(args.option("site"))])) { continuation.yield(.uplink($0)) }
        let signals = SignalHandlers(stop: continuation)
        link.start()
        var view = MonitorView()
        var seen = 0
        loop: for await input in stream {
            switch input {
            case .uplink(.message(let topic, let payload)):
                if let line = view.take(topic: topic, payload: payload) { say(line) }
                if topic.hasSuffix("/events") { seen += 1 }
                if let limit, seen >= limit { break loop }
            case .uplink(.connected(let broker, _)):
                say("monitor: connected to \(broker), watching \(Topics.siteFilter(args.option("site")))")
            case .stop:
                break loop
            default:
                continue
            }
        }
        signals.cancel()
        link.stop()
        return ExitCode.success
    }
}

/// The monitor's picture of the garage, one printed line per message.
struct MonitorView {
    var levels: [String: LevelStatePayload] = [:]
    var lastLevelLine = ""

    mutating func take(topic: String, payload: [UInt8]) -> String? {
        guard let (_, device, rest) = Topics.parse(topic) else { return nil }
        switch rest.first {
        case "status":
            guard let s = WireJSON.decode(StatusPayload.self, from: payload) else { return nil }
            return "\(device): \(s.state)" + (s.boot.map { " (boot \($0)" + (s.version.map { ", v\($0)" } ?? "") + ")" } ?? "")
        case "events":
            guard let e = WireJSON.decode(EventPayload.self, from: payload) else { return "\(device): unreadable event" }
            let time = e.at.count >= 23 ? String(e.at.dropFirst(11).prefix(12)) : e.at
            var what = [e.spot, e.lane, e.subject].compactMap { $0 }.joined(separator: " ")
            if let from = e.from, let to = e.to { what += " \(from) -> \(to)" }
            if let stay = e.staySeconds { what += " stayed \(minutes(stay))" }
            if let reason = e.reason { what += " (\(reason))" }
            return "\(time)  #\(e.seq)\(e.replayed == true ? " replayed" : "")  \(padded(e.type, 15)) \(what)"
        case "state" where rest.count == 3 && rest[1] == "level":
            guard let l = WireJSON.decode(LevelStatePayload.self, from: payload) else { return nil }
            levels[rest[2]] = l
            let line = "levels: " + levels.keys.sorted().map { id in
                let s = levels[id]!
                return "\(id) \(s.occupied.map(String.init) ?? "?")/\(s.capacity)"
            }.joined(separator: "  ")
            guard line != lastLevelLine else { return nil }
            lastLevelLine = line
            return line
        default:
            return nil
        }
    }

    /// `42m` for a stay in seconds from the network; `?` for one no garage sees (negative, absurd).
    func minutes(_ seconds: Double) -> String {
        guard seconds >= 0, seconds < 100 * 365 * 86_400 else { return "?" }
        return "\(Int(seconds / 60))m"
    }
}
