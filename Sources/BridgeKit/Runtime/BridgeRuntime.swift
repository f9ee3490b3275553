import Dispatch
import ParkWiseCLI
import ParkWiseContract
import ParkWiseLog
import Postgres
import ServiceSetup
import Synchronization
import MQTT
#if canImport(Glibc)
import Glibc
#endif

/// The running bridge. The MQTT thread (the MQTT module's link) only appends messages to the queue; one
/// dedicated database thread takes them in batches and applies each batch in one transaction.
/// A batch the database fails (connection lost, read-only, full…) is kept and retried (backoff), so
/// nothing received is dropped while the process lives; after a crash, or a stop the database held
/// past `stop_grace`, the retained states and a rebirth request rebuild what was received but not
/// committed.
///
/// No thread polls: the main thread waits for its events (the first broker connection, a stop, the start's
/// deadline), the database thread for messages, a wake-up or its own deadlines (see `DatabaseLoop`).
final class BridgeRuntime: Sendable {
    struct Settings: Sendable {
        var databaseURL: String
        var link: LinkSettings
        var config: BridgeConfig
        /// How long `run` waits for the first broker connection before giving up.
        var startTimeout: Double
        /// systemd's notify socket (`Type=notify`): READY once the broker is reached, STOPPING at a stop.
        var service = ServiceNotifier(environment: [:])
    }

    private let settings: Settings
    private let queue: FeedQueue
    private let link: MQTTLink
    private let stopping = Atomic<Bool>(false)
    private let linkStopped = Atomic<Bool>(false)
    /// The link thread's latest broker connection number, and whether it is connected now.
    private let connection = BrokerLink()
    private let done = DispatchSemaphore(value: 0)
    /// Rung for the main thread: a broker connection, a stop requested.
    private let events = Doorbell()
    /// Messages the database loop gave up at the stop (0: all committed).
    private let abandoned = Atomic<Int>(0)

    init(settings: Settings) {
        self.settings = settings
        queue = FeedQueue(limit: settings.config.holdAtMost)
        let queue = self.queue, connection = self.connection, events = self.events
        link = MQTTLink(settings: settings.link) { event in
            switch event {
            case .message(let topic, let payload, let retained, _): queue.push(topic: topic, payload: payload, retained: retained)
            case .connected(_, let number, _):
                connection.number.store(number, ordering: .releasing)
                connection.up.store(true, ordering: .releasing)
                queue.wake()
                events.ring()
            case .disconnected:
                connection.up.store(false, ordering: .releasing)
                queue.wake()
            case .acknowledged, .refused, .oversized, .contested: break
            }
        }
    }

    /// Asks for a graceful stop: no more messages are taken; what was received is committed first.
    func requestStop() {
        stopping.store(true, ordering: .releasing)
        queue.wake()
        events.ring()
    }

    /// Runs until stopped; returns the exit code. `db` is the connection the start-up checks used.
    func run(db: PostgresConnection, knownFeeds: [DeviceKey: DeviceGate.Feed]) -> Int32 {
        nonisolated(unsafe) let first = db
        let worker = DedicatedThread { [self] in
            nameThread("pw-database")
            let url = settings.databaseURL
            var loop = DatabaseLoop(broker: self, db: first, gate: DeviceGate(config: settings.config, known: knownFeeds),
                                    connect: { () throws(PostgresError) in try PostgresConnection.connect(url: url) })
            abandoned.store(loop.run(), ordering: .releasing)
            done.signal()
        }
        link.start()
        let deadline = monotonicSeconds() + settings.startTimeout
        while connectionNumber == 0 && !isStopping {
            if !events.wait(until: deadline) && connectionNumber == 0 && !isStopping {
                Log.error("cannot reach the broker", ["brokers": settings.link.brokers.map(\.description).joined(separator: ","),
                                                      "waited_s": Int(settings.startTimeout)])
                stopping.store(true, ordering: .releasing)
                link.stop()
                linkStopped.store(true, ordering: .releasing)
                queue.wake()
                worker.join()
                return ExitCode.failure
            }
        }
        if connectionNumber > 0 {   // not when a stop came first
            let subscriptions = settings.link.subscriptions.joined(separator: ",")
            if let partition = settings.config.partition {
                Log.info("bridge running", ["subscriptions": subscriptions, "client_id": settings.link.clientID, "partition": partition])
            } else {
                Log.info("bridge running", ["subscriptions": subscriptions, "client_id": settings.link.clientID])
            }
            settings.service.ready()
        }
        while !isStopping { _ = events.wait() }
        settings.service.stopping()
        // Stop taking messages (the broker keeps queueing for this persistent session), then drain.
        link.stop()
        linkStopped.store(true, ordering: .releasing)
        queue.wake()
        done.wait()
        worker.join()
        guard abandoned.load(ordering: .acquiring) == 0 else { return ExitCode.failure }
        Log.info("bridge stopped", [:])
        return ExitCode.success
    }
}

extension BridgeRuntime: BrokerSide {
    var config: BridgeConfig { settings.config }
    var feed: FeedQueue { queue }
    var isStopping: Bool { stopping.load(ordering: .acquiring) }
    var isDrained: Bool { linkStopped.load(ordering: .acquiring) && queue.count == 0 }
    var connectionNumber: UInt64 { connection.number.load(ordering: .acquiring) }
    var brokerState: String { isStopping ? "stopped" : connection.up.load(ordering: .acquiring) ? "connected" : "lost" }
    var brokers: String { settings.link.brokers.map(\.description).joined(separator: ",") }
    var clientID: String { settings.link.clientID }

    func rebirth(_ key: DeviceKey) {
        let topic = Topics(site: key.site, device: key.device).command("rebirth")
        if case .offline = link.publish(topic: topic, payload: Array("{}".utf8), retain: false) {
            Log.debug("rebirth not sent, broker offline", ["device": key])
        }
    }
}

/// The broker link as the link thread last said it (shared between the link's callback and the runtime): its connection number (0: never connected), and whether it is up.
final class BrokerLink: Sendable {
    let number = Atomic<UInt64>(0)
    let up = Atomic<Bool>(false)
}
