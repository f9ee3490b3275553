import CMosquitto
import Glibc
import ParkWiseLog
import Synchronization

/// The MQTT part of a broker probe: one connection (MQTT 5 unless told otherwise) on a thread of its own, every
/// phase bounded by the timeout; the callbacks' record and the outcome are turned into steps by `steps`.
extension BrokerProbe {
    struct Outcome: Sendable {
        var connack: Int32 = -1
        var networkError: Int32?
        var setupError: String?
        var published: Int32?
        var subscribed: Int32?
        var echoed = false
        var finished = false
    }

    static let refusedVersion = "MQTT protocol version"

    static func session(settings base: LinkSettings, broker: LinkSettings.Broker, topics: Topics, timeout: Double,
                                version: Int32) -> [ProbeStep] {
        var copy = base
        copy.brokers = [broker]
        copy.protocolVersion = version
        copy.will = nil
        let settings = copy
        let recorder = ProbeRecorder()
        let outcome = Shared(Outcome())
        let nonce = "doctor-\(getpid())-\(Int(monotonicSeconds() * 1000))"
        let thread = DedicatedThread {
            let connection: MosquittoConnection
            do {
                connection = try MosquittoConnection.make(settings: settings, broker: broker, number: 1, emit: { event in
                    if case .message(let topic, let payload, _, _) = event { recorder.message(topic: topic, payload: payload) }
                }, recorder: recorder)
            } catch let error as MQTTError {
                outcome.withLock { $0.setupError = error.description; $0.finished = true }
                return
            } catch {
                outcome.withLock { $0.setupError = "\(error)"; $0.finished = true }
                return
            }
            defer { outcome.withLock { $0.finished = true } }
            let rc = connection.connect(keepalive: max(settings.keepaliveSeconds, 5))
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                outcome.withLock { $0.networkError = rc }
                return
            }
            var phaseEnd = monotonicSeconds() + timeout
            var asked = false
            while monotonicSeconds() < phaseEnd {
                let rc = connection.loop(timeoutMs: 50)
                // A refusing broker sends its CONNACK and closes: the code first, then the loop's error.
                let connack = connection.connack
                if connack >= 0 { outcome.withLock { $0.connack = connack } }
                if connack > 0 { return }
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    outcome.withLock { $0.networkError = rc }
                    return
                }
                if connack == 0 && !asked {
                    asked = true
                    phaseEnd = monotonicSeconds() + timeout
                    let echo = connection.subscribeCounted(topics.echo)
                    let commands = connection.subscribeCounted(topics.commands)
                    outcome.withLock { $0.subscribed = commands.rc == MOSQ_ERR_SUCCESS.rawValue ? commands.mid : nil }
                    _ = echo
                }
                if asked {
                    let state = recorder.state.withLock { $0 }
                    let subscribed = outcome.withLock { $0.subscribed }
                    // Publish once the echo subscription is in place (its SUBACK came), so the message can come back.
                    if outcome.withLock({ $0.published }) == nil, !state.subacks.isEmpty {
                        let sent = connection.publish(topic: topics.echo, payload: Array(nonce.utf8), retain: false)
                        outcome.withLock { $0.published = sent.rc == MOSQ_ERR_SUCCESS.rawValue ? sent.mid : -1 }
                    }
                    let published = outcome.withLock { $0.published }
                    let echoed = state.messages.contains { $0.topic == topics.echo && $0.payload == Array(nonce.utf8) }
                    outcome.withLock { $0.echoed = echoed }
                    let pubackIn = published.map { state.pubacks[$0] != nil } ?? false
                    let subackIn = subscribed.map { state.subacks[$0] != nil } ?? true
                    let refused = published.flatMap { state.pubacks[$0] }.map { $0 >= 0x80 } ?? false
                    if pubackIn && subackIn && (echoed || refused) { break }
                }
            }
            connection.disconnect()
            for _ in 0..<3 { _ = connection.loop(timeoutMs: 20) }
        }
        if !thread.join(within: 3 * timeout + 1) {
            outcome.withLock { $0.finished = false }
        }
        return steps(outcome.withLock { $0 }, recorder.state.withLock { $0 }, settings: settings, broker: broker,
                     topics: topics, timeout: timeout)
    }

}
