import CMosquitto
#if canImport(Glibc)
import Glibc
#endif
import ParkWiseLog
import Synchronization

/// The device's link to its brokers. One dedicated thread connects (trying each broker in turn,
/// with capped exponential backoff and jitter), runs the network loop, and reports through `emit`: what one round
/// of reading brought (PUBACKs, messages) is handed on in one call, so a burst of acknowledgements wakes the
/// consumer once.
/// `publish` may be called from any thread.
public final class MQTTLink: Sendable {
    public enum PublishResult: Sendable, Equatable {
        case sent(mid: Int32, connection: UInt64)
        case offline
    }

    private let settings: LinkSettings
    private let emit: @Sendable ([UplinkEvent]) -> Void
    /// The live connection, if any. Publishes and the loop thread's teardown take this lock.
    private let current = Mutex<MosquittoConnection?>(nil)
    private let stopping = Atomic<Bool>(false)
    private let thread = Mutex<DedicatedThread?>(nil)
    /// Wakes the link's thread for a write or a stop (nil: out of descriptors; the thread then polls every 100 ms).
    private let wakeup = LinkWakeup()
    /// When this process last wrote to the broker, as far as the link's thread knows (monotonic ms): the keepalive
    /// is due a keepalive after it.
    private let lastWrite = Atomic<Int64>(0)

    /// `emit` gets the events of one round of the network loop together, in order.
    public init(settings: LinkSettings, emitAll emit: @escaping @Sendable ([UplinkEvent]) -> Void) {
        self.settings = settings
        self.emit = emit
    }

    public convenience init(settings: LinkSettings, emit: @escaping @Sendable (UplinkEvent) -> Void) {
        self.init(settings: settings, emitAll: { events in events.forEach(emit) })
    }

    public func start() {
        thread.withLock { thread in
            guard thread == nil else { return }
            thread = DedicatedThread { [self] in run() }
        }
    }

    /// Publishes with QoS 1 on the live connection, if it is still the one numbered `on`
    /// (nil: any): a message must never slip onto a newer connection ahead of its birth and replay.
    /// Without TLS the message is written to the socket here; what the socket did not take (or, with TLS,
    /// the whole message) is written by the link's thread, woken for it at once.
    public func publish(topic: String, payload: [UInt8], retain: Bool, on expected: UInt64? = nil) -> PublishResult {
        current.withLock { connection in
            guard let connection, connection.connack == 0, expected == nil || expected == connection.number else {
                return .offline
            }
            let (rc, mid) = connection.publish(topic: topic, payload: payload, retain: retain)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return .offline }
            // No clock read for the keepalive here: its PUBACK moves `lastWrite` on (and one that never comes
            // only brings the keepalive's ping earlier).
            if connection.wantsWrite { wakeup?.signal() }
            return .sent(mid: mid, connection: connection.number)
        }
    }

    /// Disconnects cleanly (the broker then does not publish the last will) and ends the thread,
    /// waiting `seconds` at most: a stop must not hang on a blocking call inside libmosquitto (a
    /// broker's name lookup with the network gone can take minutes). Whatever should reach the
    /// broker first must be acknowledged before this is called.
    public func stop(within seconds: Double = 2) {
        stopping.store(true, ordering: .releasing)
        wakeup?.signal()
        let t = thread.withLock { t in defer { t = nil }; return t }
        if let t, !t.join(within: seconds) {
            Log.warn("uplink thread still busy after the stop grace, leaving it", ["waited_s": seconds])
        }
    }

    // MARK: - Network thread

    private func run() {
        nameThread("pw-mqtt")
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
                    emit([.disconnected(connection: number, reason: reason)])
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
            connection = try MosquittoConnection.make(settings: settings, broker: broker, number: number)
        } catch {
            return .lost(error.description, wasUp: false)
        }
        let rc = connection.connect(keepalive: settings.keepaliveSeconds)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            return .lost(MosquittoConnection.describe(rc), wasUp: false)
        }
        current.withLock { $0 = connection }
        defer { current.withLock { $0 = nil } }
        // The clock is read once per wake-up (`now`), and every time below is that one.
        var now = monotonicMilliseconds()
        let connectDeadline = now + Int64(max(settings.keepaliveSeconds, 10)) * 1000
        let keepalive = Int64(settings.keepaliveSeconds) * 1000
        lastWrite.store(now, ordering: .relaxed)
        var lastRead = now
        var received = connection.received
        var up = false
        while true {
            if stopping.load(ordering: .acquiring) {
                if up { drainAndDisconnect(connection) }
                return .stopped
            }
            let socket = connection.socket
            guard socket >= 0 else { return .lost("connection closed", wasUp: up) }
            // Sleep until the broker sends, the socket takes what is queued, a publisher or a stop wakes the
            // thread, or the keepalive (connected) or the connect timeout (not yet) is due: no other wake-ups.
            let due = up ? min(lastWrite.load(ordering: .relaxed), lastRead) + keepalive + 1000 : connectDeadline
            var timeout = Int32(clamping: max(0, due - now))
            if !up || keepalive == 0 { timeout = up ? -1 : timeout }
            if wakeup == nil { timeout = timeout < 0 ? 100 : min(timeout, 100) }
            let events = Int16(POLLIN) | (connection.wantsWrite ? Int16(POLLOUT) : 0)
            var slots = [pollfd(fd: socket, events: events, revents: 0), pollfd(fd: wakeup?.fd ?? -1, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&slots, 2, timeout)
            now = monotonicMilliseconds()
            if ready < 0 && errno != EINTR { return .lost("poll failed: \(String(cString: strerror(errno)))", wasUp: up) }
            if slots[1].revents != 0 { wakeup?.drain() }
            if slots[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
                let rc = connection.loopRead()
                lastRead = now
                if connection.received != received {
                    received = connection.received
                    lastWrite.store(now, ordering: .relaxed)   // QoS 1 publishes were answered with PUBACKs
                }
                deliver(connection)
                if rc != MOSQ_ERR_SUCCESS.rawValue { return .lost(MosquittoConnection.describe(rc), wasUp: up) }
            }
            if connection.wantsWrite {
                let rc = connection.loopWrite()
                lastWrite.store(now, ordering: .relaxed)
                if rc != MOSQ_ERR_SUCCESS.rawValue { return .lost(MosquittoConnection.describe(rc), wasUp: up) }
            }
            let connack = connection.connack
            if !up && connack == 0 {
                up = true
                lastRead = now
                for filter in settings.subscriptions { _ = connection.subscribe(filter) }
                Log.info("uplink connected", ["broker": broker])
                emit([.connected(broker: broker.description, connection: number)])
                continue
            } else if !up && connack > 0 {
                return .lost("broker refused the connection: \(MosquittoConnection.describeConnack(connack))", wasUp: false)
            }
            if !up && now > connectDeadline {
                return .lost("no answer from the broker (timed out)", wasUp: false)
            }
            if up && keepalive > 0 && now >= due {
                // A PINGREQ (written next round), or the end of a connection whose last PINGRESP never came.
                let rc = connection.loopMisc()
                if rc != MOSQ_ERR_SUCCESS.rawValue { return .lost(MosquittoConnection.describe(rc), wasUp: up) }
                // libmosquitto counts a ping as a read too. Had it seen a later write than this thread knows of,
                // it sent no ping: look again in half a keepalive.
                lastRead = now
                if !connection.wantsWrite { lastWrite.store(now - keepalive / 2, ordering: .relaxed) }
            }
        }
    }

    /// Hands on what the callbacks reported, together.
    private func deliver(_ connection: MosquittoConnection) {
        let events = connection.takeEvents()
        if !events.isEmpty { emit(events) }
    }

    /// Lets queued packets out, then sends DISCONNECT.
    private func drainAndDisconnect(_ connection: MosquittoConnection) {
        let until = monotonicSeconds() + 1
        while connection.wantsWrite && monotonicSeconds() < until { _ = connection.loop(timeoutMs: 20) }
        connection.disconnect()
        for _ in 0..<5 { _ = connection.loop(timeoutMs: 20) }
        deliver(connection)
    }

    private func backoff(_ attempt: Int) -> Double {
        let base = min(settings.backoffCap, settings.backoffFirst * Double(1 << min(attempt, 16)))
        return base * Double.random(in: 0.5...1.0)
    }

    /// Waits out a backoff; a stop ends it at once.
    private func sleep(seconds: Double) {
        let until = monotonicSeconds() + seconds
        while !stopping.load(ordering: .acquiring) && monotonicSeconds() < until {
            if let wakeup {
                _ = wakeup.wait(seconds: until - monotonicSeconds())
            } else {
                sleepThread(microseconds: 50_000)
            }
        }
    }
}
