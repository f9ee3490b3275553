import ParkWiseContract
import ParkWiseLog

/// The device's MQTT session: on every connection, birth (status online), then every retained
/// state, then the outbox in `seq` order, and only then new events. Owned by the agent's event
/// loop (one thread at a time); the link does the network I/O.
public final class UplinkSession {
    enum Sent { case event(UInt64), announcement(UInt64), state(String), status }

    public let topics: Topics
    private let link: MQTTLink
    private var outbox: any Outbox
    /// The retained `status` online, as last updated.
    public private(set) var birth: StatusPayload
    /// Latest payload per retained topic, in the order topics first appeared.
    private var retained: [String: [UInt8]] = [:]
    private var retainedOrder: [String] = []
    private var connection: UInt64?
    private var inFlight: [Int32: Sent] = [:]
    private var offlineStatusAcked = false
    /// An outage that overflows the outbox: one log line per streak, not per event dropped.
    private var drops = LogStreak(.warn, "outbox full, events dropped", ended: "outbox no longer full")

    public init(link: MQTTLink, topics: Topics, outbox: any Outbox, birth: StatusPayload) {
        self.link = link
        self.topics = topics
        self.outbox = outbox
        self.birth = birth
    }

    public var isConnected: Bool { connection != nil }
    public var outboxCount: Int { outbox.count }
    public var oldestPendingSeq: UInt64? { outbox.pending.first?.event.seq }
    public var oldestPending: OutboxEntry? { outbox.pending.first }
    public var outboxCapacity: Int { outbox.capacity }

    /// A new retained `status` online (the same boot and session, fresher facts): published now when
    /// connected, and on every later connection.
    public func updateStatus(_ status: StatusPayload) {
        birth = status
        guard connection != nil else { return }
        publish(topic: topics.status, payload: WireJSON.encode(birth), retain: true, as: .state(topics.status))
    }

    /// Takes a batch of events into the outbox (one sync for all), and sends them at once when the
    /// link is up. Returns the events the full outbox gave up for them (the caller announces them).
    @discardableResult
    public func accept(_ batch: [OutboxEntry]) -> [OutboxEntry] {
        guard !batch.isEmpty else { return [] }
        let sent = Set(inFlight.values.compactMap { if case .event(let seq) = $0 { return seq } else { return nil } })
        let (lost, failure) = outbox.append(batch, sparing: sent)
        note(failure)
        if lost.isEmpty {
            drops.ended()
        } else {
            drops.occurred(lost.count, ["first_seq": lost[0].event.seq, "last_seq": lost[lost.count - 1].event.seq])
        }
        guard connection != nil else { return lost }
        let lostSeqs = Set(lost.map(\.event.seq))
        for entry in batch where !lostSeqs.contains(entry.event.seq) { send(entry.event, as: .event(entry.event.seq)) }
        return lost
    }

    /// An event declaring dropped events. It stays out of the outbox (a full outbox must not drop
    /// events to announce drops); the caller keeps it on disk until `acknowledgedAnnouncement`
    /// says the broker has it, and it is sent again, same id and seq, on every connection until then.
    public func announce(_ entry: OutboxEntry) {
        announcement = entry
        if connection != nil { send(entry.event, as: .announcement(entry.event.seq)) }
    }

    private var announcement: OutboxEntry?
    public private(set) var acknowledgedAnnouncement: UInt64?

    /// What is wrong with the outbox's disk now (nil: nothing). Changes are logged once.
    public private(set) var outboxProblem: String?

    /// Logs when the disk starts failing and when it works again, not every failed write.
    private func note(_ failure: UplinkError?) {
        switch (outboxProblem, failure) {
        case (nil, let failure?):
            Log.error("outbox cannot write to disk, events kept in memory", ["error": failure.message])
            outboxProblem = failure.message
        case (_?, nil):
            Log.info("outbox writes to disk again")
            outboxProblem = nil
        default:
            break
        }
    }

    /// NTP has set the clock: events still waiting get their true wall-clock times.
    public func correctClock(kernelBoot: String, wallTime: (Int64) -> String) {
        let pending = outbox.pending
        let corrected = pending.map { $0.corrected(kernelBoot: kernelBoot, wallTime: wallTime) }
        let count = zip(pending, corrected).count(where: { $0 != $1 })
        guard count > 0 else { return }
        note(outbox.replaceAll(corrected))
        Log.info("clock synchronised, waiting events corrected", ["events": count])
    }

    /// Records the latest retained state of a topic and publishes it when the link is up.
    public func setRetained(topic: String, payload: [UInt8]) {
        if retained.updateValue(payload, forKey: topic) == nil { retainedOrder.append(topic) }
        guard connection != nil else { return }
        publish(topic: topic, payload: payload, retain: true, as: .state(topic))
    }

    public func handle(_ event: UplinkEvent) {
        switch event {
        case .connected(_, let number):
            connection = number
            inFlight.removeAll()
            rebirth()
            let backlog = outbox.pending
            if !backlog.isEmpty { Log.info("outbox replay", ["events": backlog.count, "first_seq": backlog[0].event.seq]) }
            // The announcement of dropped events takes its place in seq order.
            for entry in (backlog + [announcement].compactMap { $0 }).sorted(by: { $0.event.seq < $1.event.seq }) {
                var event = entry.event
                event.replayed = true
                send(event, as: entry == announcement ? .announcement(event.seq) : .event(event.seq))
            }
        case .disconnected(let number, _):
            if connection == number {
                connection = nil
                inFlight.removeAll()
            }
        case .acknowledged(let mid, let number):
            guard connection == number, let sent = inFlight.removeValue(forKey: mid) else { return }
            switch sent {
            case .event(let seq):
                note(outbox.remove(seq: seq))
                if outbox.count < outbox.capacity { drops.ended() }
            case .announcement(let seq):
                if announcement?.event.seq == seq { announcement = nil }
                acknowledgedAnnouncement = seq
            case .status:
                offlineStatusAcked = true
            case .state:
                break
            }
        case .message:
            break
        }
    }

    /// Status online, then every retained state: what a backend needs to rebuild the truth.
    public func rebirth() {
        publish(topic: topics.status, payload: WireJSON.encode(birth), retain: true, as: .state(topics.status))
        for topic in retainedOrder {
            publish(topic: topic, payload: retained[topic]!, retain: true, as: .state(topic))
        }
    }

    /// Publishes `offline` (retained) before a clean stop. True once the broker acknowledged it.
    public func sayOffline() {
        offlineStatusAcked = false
        publish(topic: topics.status, payload: WireJSON.encode(StatusPayload(state: "offline", boot: birth.boot)),
                retain: true, as: .status)
    }

    /// A command's result (QoS 1, not retained, not kept when offline).
    public func publishReply(topic: String, payload: [UInt8]) {
        publish(topic: topic, payload: payload, retain: false, as: .state(topic))
    }

    public var offlineAcknowledged: Bool { offlineStatusAcked }
    /// Nothing sent is waiting for its PUBACK.
    public var settled: Bool { inFlight.isEmpty }

    private func send(_ event: EventPayload, as sent: Sent) {
        publish(topic: topics.events, payload: WireJSON.encode(event), retain: false, as: sent)
    }

    private func publish(topic: String, payload: [UInt8], retain: Bool, as sent: Sent) {
        guard let connection else { return }
        switch link.publish(topic: topic, payload: payload, retain: retain, on: connection) {
        case .sent(let mid, _):
            inFlight[mid] = sent
        case .offline:
            // The connection went away under us; its disconnect event follows and the outbox replays.
            break
        }
    }
}
