/// What the database thread sees of the bridge's broker side: the feed queue the link thread fills, the link's state,
/// the stop, and the rebirth requests it publishes. `BridgeRuntime` is the real one; `DatabaseLoopTests` drive their
/// own.
protocol BrokerSide: AnyObject {
    var config: BridgeConfig { get }
    var feed: FeedQueue { get }
    /// A stop was asked for: no more messages are taken; what was received is committed first.
    var isStopping: Bool { get }
    /// The link is stopped and the queue empty.
    var isDrained: Bool { get }
    /// The link's latest broker connection number (0: never connected).
    var connectionNumber: UInt64 { get }
    /// The link to the broker as the fleet view shows it: `connected`, `lost`, or `stopped` (this bridge stops).
    var brokerState: String { get }
    /// The broker URLs, comma-separated, and this bridge's client id (its row in `sensor_bridges`).
    var brokers: String { get }
    var clientID: String { get }
    /// Asks the device to republish its status and retained states (`cmd/rebirth`).
    func rebirth(_ key: DeviceKey)
}
