import SystemIO
import CMosquitto
#if canImport(Glibc)
import Glibc
#endif
import ParkWiseLog
import Synchronization

/// The device's link to its brokers. One dedicated thread connects (trying each broker in turn,
/// with capped exponential backoff and jitter), runs the network loop, and reports through `emit`: what one round
/// of reading brought (PUBACKs, messages) is handed on in one call, so a burst of acknowledgements wakes the
/// consumer once. `hosted`: once a connection is up its rounds run on the host's thread instead (`hostedPoll`,
/// `serviceHosted`), and the link's thread only waits for it to be lost (or a stop) to connect again.
/// `publish` may be called from any thread (hosted: from the host's).
public final class MQTTLink: Sendable {
    public enum PublishResult: Sendable, Equatable {
        /// Handed to libmosquitto: `acknowledged(mid)` follows (QoS 1: the PUBACK; QoS 0: written whole).
        case sent(mid: Int32, connection: UInt64)
        /// QoS 0, already written whole to the socket: nothing follows.
        case written
        case offline
    }

    private let settings: LinkSettings
    private let emit: @Sendable ([LinkEvent]) -> Void
    /// The live connection, if any. Publishes and the loop thread's teardown take this lock.
    private let current = Mutex<MosquittoConnection?>(nil)
    private let stopping = Atomic<Bool>(false)
    private let thread = Mutex<DedicatedThread?>(nil)
    /// Wakes the link's thread for a write or a stop (nil: out of descriptors; the thread then polls every 100 ms).
    private let wakeup = LinkWakeup()
    /// Whether a live connection's rounds run on the host's thread (see `hostedPoll`); connecting stays here.
    private let hosted: Bool
    private let guests = Mutex<Guest?>(nil)

    /// `emit` gets the events of one round of the network loop together, in order. `hosted`: the caller runs a live
    /// connection's rounds on its own thread (`hostedPoll`, `serviceHosted`), as the agent's event loop does.
    public init(settings: LinkSettings, hosted: Bool = false, emitAll emit: @escaping @Sendable ([LinkEvent]) -> Void) {
        self.settings = settings
        self.hosted = hosted
        self.emit = emit
    }

    public convenience init(settings: LinkSettings, emit: @escaping @Sendable (LinkEvent) -> Void) {
        self.init(settings: settings, emitAll: { events in events.forEach(emit) })
    }

    public func start() {
        thread.withLock { thread in
            guard thread == nil else { return }
            thread = DedicatedThread { [self] in run() }
        }
    }

    /// Publishes with QoS 1 (or 0) on the live connection, if it is still the one numbered `on`
    /// (nil: any): a message must never slip onto a newer connection ahead of its birth and replay.
    /// Without TLS the message is written to the socket here; what the socket did not take (or, with TLS,
    /// the whole message) is written by the link's thread, woken for it at once.
    public func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool, expiry: UInt32? = nil,
                        on expected: UInt64? = nil) -> PublishResult {
        current.withLock { connection in
            guard let connection, connection.connack == 0, expected == nil || expected == connection.number else {
                return .offline
            }
            let (rc, mid, written) = connection.publish(topic: topic, payload: payload, qos: qos, retain: retain, expiry: expiry)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return .offline }
            // No clock read for the keepalive here: libmosquitto keeps its own, and a keepalive this thread thinks
            // due too early only makes it look again later. A hosted connection is written by the publishing thread's
            // next round (which also hands on what this write reported: see `LinkIO.due`); otherwise the link's
            // thread is woken for what the socket did not take.
            if !hosted && (connection.wantsWrite || connection.hasEvents) { wakeup?.signal() }
            return written ? .written : .sent(mid: mid, connection: connection.number)
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
        var watch = TakeoverWatch(clientID: settings.clientID)
        /// Brokers (by index) that refused MQTT 5: asked with 3.1.1 from then on.
        var speak311: Set<Int> = []
        while !stopping.load(ordering: .acquiring) {
            let index = brokerIndex % settings.brokers.count
            let broker = settings.brokers[index]
            number += 1
            var asked = settings
            if speak311.contains(index) { asked.protocolVersion = 4 }
            let outcome = session(broker: broker, number: number, settings: asked, watch: &watch)
            switch outcome {
            case .stopped:
                return
            case .lost(_, false, _, _, true) where asked.protocolVersion == 5 && settings.fallsBackTo311:
                speak311.insert(index)
                Log.warn("broker does not speak MQTT 5, using 3.1.1", ["broker": broker,
                         "note": "a publish it refuses is then acknowledged as if delivered"])
                continue
            case .lost(var reason, let wasUp, let upFor, let takenOver, _):
                // A failed handshake: its certificates' dates against this board's clock, the cause libmosquitto's "A TLS
                // error occurred." hides (a clock NTP has not set yet, an expired CA or certificate).
                if !wasUp, reason.contains("TLS"), let tls = settings.tls,
                   let cause = CertificateDates.cause(ca: tls.ca, cert: tls.cert, now: Int64(time(nil))) {
                    reason += " (\(cause))"
                }
                if wasUp {
                    attempt = 0
                    let wasContested = watch.active
                    let conflict = watch.lost(upFor: upFor, takenOver: takenOver, broker: broker.description, now: monotonicSeconds())
                    // While another client with this id takes the connection over, the streak's line says it all.
                    Log.log(wasContested || conflict != nil ? .debug : .warn, "uplink lost", ["broker": broker, "reason": reason])
                    emit([.disconnected(connection: number, reason: reason)] + (conflict.map { [.contested($0)] } ?? []))
                } else {
                    watch.attemptFailed()
                    if reason != lastReason {
                        Log.log(.warn, settings.unreachableMessage, ["broker": broker, "reason": reason])
                    }
                    // The backoff grows with each round of the list, not with each node: a lost node of a cluster costs
                    // its boards one refused connection and the first delay, not a delay that doubles per node tried.
                    brokerIndex += 1
                    if brokerIndex % settings.brokers.count == 0 { attempt += 1 }
                }
                lastReason = reason
            }
            let delay = backoff(attempt)
            Log.debug("uplink retry", ["in_s": delay, "attempt": attempt])
            sleep(seconds: delay)
        }
    }

    /// `upFor`: seconds since the broker accepted the connection (0 when it never did); `takenOver`: the broker said
    /// so (MQTT 5 DISCONNECT 0x8E).
    /// `protocolRefused`: the broker's CONNACK refused the protocol version (MQTT 3.1.1's 1, MQTT 5's 0x84).
    private enum Outcome {
        case stopped
        case lost(String, wasUp: Bool, upFor: Double = 0, takenOver: Bool = false, protocolRefused: Bool = false)
    }

    private func session(broker: LinkSettings.Broker, number: UInt64, settings: LinkSettings,
                         watch: inout TakeoverWatch) -> Outcome {
        let connection: MosquittoConnection
        do {
            connection = try MosquittoConnection.make(settings: settings, broker: broker, number: number)
        } catch {
            return .lost(error.description, wasUp: false)
        }
        if connection.connectsBlocking, let unreachable = Self.unreachable(broker, within: Double(max(settings.keepaliveSeconds, 10))) {
            return .lost(unreachable, wasUp: false)
        }
        let rc = connection.connect(keepalive: settings.keepaliveSeconds)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            return .lost(MosquittoConnection.describe(rc), wasUp: false)
        }
        current.withLock { $0 = connection }
        defer { current.withLock { $0 = nil } }
        // The clock is read once per wake-up (`now`), and every time below is that one: the coarse clock, which costs
        // no system call and is plenty for a keepalive counted in seconds; the precise one when the wait ran out, so
        // a deadline the coarse clock has not reached yet is never taken for one still ahead (a busy loop).
        var now = coarseMonotonicMilliseconds()
        var io = LinkIO(connection: connection, keepaliveSeconds: settings.keepaliveSeconds, now: now)
        var upAt = 0.0
        /// A loss, with how long the connection was up and whether the broker said it was taken over.
        func lost(_ reason: String) -> Outcome {
            .lost(reason, wasUp: io.up, upFor: io.up ? monotonicSeconds() - upAt : 0,
                  takenOver: connection.disconnectReason == Int32(MQTT_RC_SESSION_TAKEN_OVER.rawValue),
                  protocolRefused: !io.up && [1, Int32(MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION.rawValue)].contains(connection.connack))
        }
        while true {
            if stopping.load(ordering: .acquiring) {
                if io.up { drainAndDisconnect(connection) }
                return .stopped
            }
            if io.up, watch.stillUp(for: monotonicSeconds() - upAt) { emit([.contested(nil)]) }
            let socket = connection.socket
            guard socket >= 0 else { return lost("connection closed") }
            // Sleep until the broker sends, the socket takes what is queued, a publisher or a stop wakes the
            // thread, or the keepalive (connected) or the connect timeout (not yet) is due: no other wake-ups.
            // A poll made again after a signal waits only for what is left of the timeout.
            var slots = [pollfd(fd: socket, events: io.events, revents: 0), pollfd(fd: wakeup?.fd ?? -1, events: Int16(POLLIN), revents: 0)]
            var interrupted = false
            let ready = retryingOnInterrupt {
                if interrupted { now = coarseMonotonicMilliseconds() }
                interrupted = true
                var timeout = io.due.map { Int32(clamping: max(0, $0 - now)) } ?? -1
                if wakeup == nil { timeout = timeout < 0 ? 100 : min(timeout, 100) }
                return poll(&slots, 2, timeout)
            }
            if ready < 0 { return lost("poll failed: \(Errno.current.text)") }
            now = ready == 0 ? monotonicMilliseconds() : coarseMonotonicMilliseconds()
            if slots[1].revents != 0 { wakeup?.drain() }
            switch io.round(revents: slots[0].revents, now: now, deliver: emit) {
            case .carryOn:
                continue
            case .lost(let reason):
                return lost(reason)
            case .becameUp:
                upAt = monotonicSeconds()
                let mqtt5 = settings.protocolVersion == 5
                // QoS 1 only where the session persists (the bridge's): a clean session keeps nothing across a
                // disconnect, so QoS 1 on the way in gives a board nothing QoS 0 does not, and on a NATS cluster each
                // QoS 1 subscription is a replicated JetStream consumer the nodes keep alive (deploy/nats/README.md).
                let qos: Int32 = settings.cleanSession ? 0 : 1
                for filter in settings.subscriptions { _ = connection.subscribe(filter, qos: qos) }
                if !mqtt5, let echo = settings.echoTopic { _ = connection.subscribe(echo, qos: qos) }
                Log.log(watch.active ? .debug : .info, "uplink connected", ["broker": broker])
                guard hosted, let wakeup else {
                    emit([.connected(broker: broker.description, connection: number, mqtt5: mqtt5)])
                    continue
                }
                // The host's thread runs the connection from here on (before it hears of it, so that it polls the
                // socket from its first wake-up); this thread waits until the host gives it back or a stop.
                guests.withLock { $0 = Guest(io: io) }
                emit([.connected(broker: broker.description, connection: number, mqtt5: mqtt5)])
                while true {
                    if stopping.load(ordering: .acquiring) {
                        // Taken back (the host stopped running it): drained and disconnected at the loop's top.
                        if let guest = guests.withLock({ g in defer { g = nil }; return g }) { io = guest.io }
                        break
                    }
                    let given = guests.withLock { guest -> String? in
                        guard let reason = guest?.lost else { return nil }
                        guest = nil
                        return reason
                    }
                    if let given { return lost(given) }
                    // While a takeover streak lasts, the link wakes once the connection has lasted long enough to end it.
                    let upFor = monotonicSeconds() - upAt
                    if watch.stillUp(for: upFor) { emit([.contested(nil)]) }
                    _ = wakeup.wait(seconds: watch.untilSettled(upFor: upFor).map { $0 + 0.05 } ?? .infinity)
                }
            }
        }
    }

    // MARK: - Hosted: the connection's rounds on the host's thread

    /// A live connection run by the host, and (once lost) why: the link's thread then takes it back.
    private struct Guest: Sendable {
        var io: LinkIO
        var lost: String?
    }

    /// For a host that runs the link's rounds (`hosted`): while it has a live connection to run, the socket to poll,
    /// what for, and when a round is due without it (monotonic milliseconds).
    public func hostedPoll() -> (fd: Int32, events: Int16, due: Int64?)? {
        // In place (`guest!`): a copy of the guest retained and released its connection and buffers on every input.
        guests.withLock { guest in
            guard guest != nil, guest!.lost == nil else { return nil }
            return (guest!.io.connection.socket, guest!.io.events, guest!.io.due)
        }
    }

    /// A round of the hosted connection after the host's poll (`revents` 0 when its deadline passed): what it
    /// brought goes to `emit` as usual. A lost connection goes back to the link's thread, which says so and
    /// connects again.
    public func serviceHosted(revents: Int16) {
        // A deadline (revents 0) by the precise clock, as on the link's own thread.
        let now = revents == 0 ? monotonicMilliseconds() : coarseMonotonicMilliseconds()
        guests.withLock { guest in
            guard guest != nil, guest!.lost == nil else { return }
            if case .lost(let reason) = guest!.io.round(revents: revents, now: now, deliver: emit) {
                guest!.lost = reason
                wakeup?.signal()
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

    /// Before a blocking connect (see `MosquittoConnection.connect`): nil when the broker's port answers within `seconds`,
    /// else why not. The broker sees a TCP connection closed before any CONNECT.
    private static func unreachable(_ broker: LinkSettings.Broker, within seconds: Double) -> String? {
        let start = monotonicSeconds()
        switch NetworkProbe.resolve(host: broker.host, port: broker.port, timeout: seconds) {
        case .failure(let step):
            return step.detail ?? step.title
        case .success(let addresses):
            switch NetworkProbe.connect(addresses, port: broker.port, timeout: max(1, seconds - (monotonicSeconds() - start))) {
            case .success: return nil
            case .failure(let step): return step.detail ?? step.title
            }
        }
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
