import CMosquitto
import ParkWiseLog
import Synchronization

/// The device's link to its brokers. One dedicated thread connects (trying each broker in turn,
/// with capped exponential backoff and jitter), runs the network loop, and reports through `emit`.
/// `publish` may be called from any thread.
public final class MQTTLink: Sendable {
    public enum PublishResult: Sendable, Equatable {
        case sent(mid: Int32, connection: UInt64)
        case offline
    }

    private let settings: LinkSettings
    private let emit: @Sendable (UplinkEvent) -> Void
    /// The live connection, if any. Publishes and the loop thread's teardown take this lock.
    private let current = Mutex<MosquittoConnection?>(nil)
    private let stopping = Atomic<Bool>(false)
    private let thread = Mutex<DedicatedThread?>(nil)

    public init(settings: LinkSettings, emit: @escaping @Sendable (UplinkEvent) -> Void) {
        self.settings = settings
        self.emit = emit
    }

    public func start() {
        thread.withLock { thread in
            guard thread == nil else { return }
            thread = DedicatedThread { [self] in run() }
        }
    }

    /// Publishes with QoS 1 on the live connection, if it is still the one numbered `on`
    /// (nil: any): a message must never slip onto a newer connection ahead of its birth and replay.
    public func publish(topic: String, payload: [UInt8], retain: Bool, on expected: UInt64? = nil) -> PublishResult {
        current.withLock { connection in
            guard let connection, connection.connack == 0, expected == nil || expected == connection.number else {
                return .offline
            }
            let (rc, mid) = connection.publish(topic: topic, payload: payload, retain: retain)
            return rc == MOSQ_ERR_SUCCESS.rawValue ? .sent(mid: mid, connection: connection.number) : .offline
        }
    }

    /// Disconnects cleanly (the broker then does not publish the last will) and ends the thread,
    /// waiting `seconds` at most: a stop must not hang on a blocking call inside libmosquitto (a
    /// broker's name lookup with the network gone can take minutes). Whatever should reach the
    /// broker first must be acknowledged before this is called.
    public func stop(within seconds: Double = 2) {
        stopping.store(true, ordering: .releasing)
        let t = thread.withLock { t in defer { t = nil }; return t }
        if let t, !t.join(within: seconds) {
            Log.warn("uplink thread still busy after the stop grace, leaving it", ["waited_s": seconds])
        }
    }

    // MARK: - Network thread

    private func run() {
        var attempt = 0
        var brokerIndex = 0
        var number: UInt64 = 0
        var lastReason = ""
        while !stopping.load(ordering: .acquiring) {
            let broker = settings.brokers[brokerIndex % settings.brokers.count]
            number += 1
            let outcome = session(broker: broker, number: number)
            switch outcome {
            case .stopped:
                return
            case .lost(let reason, let wasUp):
                if wasUp {
                    attempt = 0
                    Log.warn("uplink lost", ["broker": broker, "reason": reason])
                    emit(.disconnected(connection: number, reason: reason))
                } else {
                    if reason != lastReason {
                        Log.log(.warn, settings.unreachableMessage, ["broker": broker, "reason": reason])
                    }
                    brokerIndex += 1
                    attempt += 1
                }
                lastReason = reason
            }
            let delay = backoff(attempt)
            Log.debug("uplink retry", ["in_s": delay, "attempt": attempt])
            sleep(seconds: delay)
        }
    }

    private enum Outcome { case stopped, lost(String, wasUp: Bool) }

    private func session(broker: LinkSettings.Broker, number: UInt64) -> Outcome {
        let connection: MosquittoConnection
        do {
            connection = try MosquittoConnection.make(settings: settings, broker: broker, number: number,
                                                      emit: emit)
        } catch {
            return .lost(error.description, wasUp: false)
        }
        let rc = connection.connect(keepalive: settings.keepaliveSeconds)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            return .lost(MosquittoConnection.describe(rc), wasUp: false)
        }
        current.withLock { $0 = connection }
        defer { current.withLock { $0 = nil } }
        let deadline = monotonicSeconds() + Double(max(settings.keepaliveSeconds, 10))
        var up = false
        while true {
            if stopping.load(ordering: .acquiring) {
                if up { drainAndDisconnect(connection) }
                return .stopped
            }
            let rc = connection.loop(timeoutMs: 100)
            let connack = connection.connack
            if !up && connack == 0 {
                up = true
                for filter in settings.subscriptions { _ = connection.subscribe(filter) }
                Log.info("uplink connected", ["broker": broker])
                emit(.connected(broker: broker.description, connection: number))
            } else if !up && connack > 0 {
                return .lost("broker refused the connection: \(MosquittoConnection.describeConnack(connack))", wasUp: false)
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                return .lost(MosquittoConnection.describe(rc), wasUp: up)
            }
            if !up && monotonicSeconds() > deadline {
                return .lost("no answer from the broker (timed out)", wasUp: false)
            }
        }
    }

    /// Lets queued packets out, then sends DISCONNECT.
    private func drainAndDisconnect(_ connection: MosquittoConnection) {
        let until = monotonicSeconds() + 1
        while connection.wantsWrite && monotonicSeconds() < until { _ = connection.loop(timeoutMs: 20) }
        connection.disconnect()
        for _ in 0..<5 { _ = connection.loop(timeoutMs: 20) }
    }

    private func backoff(_ attempt: Int) -> Double {
        let base = min(settings.backoffCap, settings.backoffFirst * Double(1 << min(attempt, 16)))
        return base * Double.random(in: 0.5...1.0)
    }

    private func sleep(seconds: Double) {
        let until = monotonicSeconds() + seconds
        while !stopping.load(ordering: .acquiring) && monotonicSeconds() < until {
            sleepThread(microseconds: 50_000)
        }
    }
}
