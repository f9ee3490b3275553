@testable import BridgeKit

/// The bridge's broker side for the database thread's in-process tests (`DatabaseLoopTests`): a real feed queue the
/// test pushes messages into as the link thread does, a link connected once, a stop the test asks for; the rebirths
/// asked for are kept.
final class FakeBrokerSide: BrokerSide {
    let config: BridgeConfig
    let feed: FeedQueue
    var isStopping = false
    let connectionNumber: UInt64 = 1
    let brokers = "mqtt://127.0.0.1:1883"
    let clientID = "parkwise-bridge"
    private(set) var rebirths: [DeviceKey] = []

    init(config: BridgeConfig) {
        self.config = config
        feed = FeedQueue(limit: config.holdAtMost)
    }

    /// The link stops with the stop (the messages already queued are still taken).
    var isDrained: Bool { isStopping && feed.count == 0 }
    var brokerState: String { isStopping ? "stopped" : "connected" }

    func rebirth(_ key: DeviceKey) { rebirths.append(key) }
}
