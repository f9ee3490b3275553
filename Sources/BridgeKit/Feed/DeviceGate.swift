import ParkWiseContract
import ParkWiseLog

/// Decides which messages reach the database: only accepted devices, and only a live feed unless
/// the bridge is told to take simulated ones. A device's feed is known from its `status` (the birth
/// marks a simulated or replayed feed); until then its messages wait here, in order.
struct DeviceGate {
    enum Feed: Equatable { case live, marked(String) }

    let config: BridgeConfig
    private(set) var feeds: [DeviceKey: Feed] = [:]
    private var held: [DeviceKey: [FeedMessage]] = [:]
    private var warned: Set<DeviceKey> = []
    static let holdLimit = 10_000

    init(config: BridgeConfig, known: [DeviceKey: Feed]) {
        self.config = config
        feeds = known
    }

    /// The messages to apply, in order: held ones are released right after their device's status.
    mutating func admit(_ messages: [FeedMessage]) -> [FeedMessage] {
        var out: [FeedMessage] = []
        for message in messages {
            switch message {
            case .ignored:
                continue
            case .malformed(let topic):
                Log.warn("message does not follow the contract, skipped", ["topic": topic])
                continue
            default:
                break
            }
            guard let key = message.device else { continue }
            guard config.accepts(key) else {
                // Another bridge's share of a partitioned feed is not news; a device the config leaves out is.
                if config.inPartition(key), warned.insert(key).inserted { Log.info("device not in the config, ignored", ["device": key]) }
                continue
            }
            if case .register = message {   // the broker host's word, not the device's: never held
                out.append(message)
                continue
            }
            if case .status(_, let status) = message {
                if status.state == "online" {
                    let feed: Feed = status.mode.map { .marked($0) } ?? .live
                    if feeds[key] != feed { Log.info("device feed", ["device": key, "feed": status.mode ?? "live"]) }
                    feeds[key] = feed
                }
                out.append(message)
                if feeds[key] != nil, let waiting = held.removeValue(forKey: key) {
                    if admitted(key) { out += waiting }
                }
                continue
            }
            switch feeds[key] {
            case nil:
                var waiting = held[key, default: []]
                if waiting.count >= DeviceGate.holdLimit { waiting.removeFirst() }
                waiting.append(message)
                held[key] = waiting
            case .some:
                if admitted(key) { out.append(message) }
            }
        }
        return out
    }

    private mutating func admitted(_ key: DeviceKey) -> Bool {
        guard case .marked(let mode) = feeds[key], !config.acceptSimulated else { return true }
        if warned.insert(key).inserted {
            Log.warn("refusing a simulated feed (run with accept_simulated: true for a demo)", ["device": key, "mode": mode])
        }
        return false
    }
}
