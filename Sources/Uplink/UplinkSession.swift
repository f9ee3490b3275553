import Delivery
import MQTT
import ParkWiseContract
import ParkWiseLog

/// The device's MQTT session on the wire, and the outbox file: on every connection, birth (status online), then every
/// retained state; events and the announcement go out when the delivery core says (`DeliveryCore`'s `send`
/// effects, carried out by `send(_:replayed:)`), and its answers come back from `handle(_:)` as the core's inputs.
/// Owned by the agent's event loop (one thread at a time); the link does the network I/O.
///
/// Bounded: the core hands at most its window of events unacknowledged, and at most one publish per retained state
/// topic is in libmosquitto's queue (a newer state waits until the one before is written, and only the latest is
/// sent): a slow broker never grows libmosquitto's queue.
public final class UplinkSession {
    enum Sent { case event(UInt64), announcement(UInt64), state(String), status, reply }

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
    /// Retained state topics with a publish not yet written to the socket, and those with a newer state waiting for it.
    private var statesInFlight: Set<String> = []
    private var statesWaiting: Set<String> = []
    /// An outage that overflows the outbox: one log line per streak, not per event dropped.
    private var drops = LogStreak(.warn, "outbox full, events dropped", ended: "outbox no longer full")
    /// Publishes the broker refused (MQTT 5 PUBACK reason 0x80 or more; the core keeps their events): one log line
    /// per streak, ended when the broker acknowledges an event again.
    private var refusals = LogStreak(.error, "broker refused events, kept in the outbox",
                                     ended: "broker acknowledges events again")

    /// Says a refusal (one line per streak) and when the refused events go again.
    public func noteRefusal(_ reason: String, seq: UInt64) {
        refusals.occurred(1, ["reason": reason, "seq": seq, "topic": topics.events, "hint": Self.refusalHint])
    }

    public func refusalEnded() { refusals.ended() }

    /// What a technician does about a refused publish.
    public static let refusalHint = "the broker's ACL does not let this device write its topic: check that device: in the "
        + "config is the name the broker knows it by (its certificate's CN, or its credentials' username), and the ACL"

    public init(link: MQTTLink, topics: Topics, outbox: any Outbox, birth: StatusPayload) {
        self.link = link
        self.topics = topics
        self.outbox = outbox
        self.birth = birth
    }

    /// Events handed to the link unacknowledged, at most (the delivery core's window).
    public static let window = 100

    public var isConnected: Bool { connection != nil }
    public var outboxCount: Int { outbox.count }
    public var oldestPendingSeq: UInt64? { outbox.pending.first?.event.seq }
    public var oldestPending: OutboxEntry? { outbox.pending.first }
    public var outboxCapacity: Int { outbox.capacity }
    /// Acknowledged events whose removal is not on disk yet (it goes with the next write), or events held in memory
    /// only after a failed write: see `writeOutboxChanges`.
    public var outboxHasUnwrittenChanges: Bool { outbox.hasUnwrittenChanges }
    /// The outbox file wants compacting: best done as soon as nothing else is to be done.
    public var outboxCompactionDue: Bool { outbox.compactionDue }

    /// The broker has the announcement of these seqs: the outbox's drop records of them need not outlive a compaction.
    public func outboxDropsAnnounced(_ seqs: ClosedRange<UInt64>) { outbox.dropsAnnounced(seqs) }

    /// The outbox records that seqs up to `seq` were used (see `Outbox.recordFloor`); false if its disk refused.
    public func recordOutboxFloor(_ seq: UInt64) -> Bool {
        let failure = outbox.recordFloor(seq)
        note(failure)
        return failure == nil
    }

    /// Events loaded at start that an announcement already declared: never sent (see `Outbox.discard`).
    public func discardLoaded(_ seqs: [UInt64]) { note(outbox.discard(seqs)) }

    /// Seqs a start found unaccounted for, recorded as given up (see `Outbox.recordDrops`).
    public func recordDrops(_ ranges: [ClosedRange<UInt64>]) { note(outbox.recordDrops(ranges)) }

    /// Writes down what the outbox's disk does not have yet: when no event came to take it along for a while, to
    /// try a failed disk again, and at the stop.
    public func writeOutboxChanges() {
        guard outbox.hasUnwrittenChanges else { return }
        note(outbox.writeChanges())
    }

    /// A new retained `status` online (the same boot and session, fresher facts): published now when
    /// connected, and on every later connection.
    public func updateStatus(_ status: StatusPayload) {
        birth = status
        guard connection != nil else { return }
        publish(topic: topics.status, payload: birthOnWire, retain: true, expiry: StatusPayload.expiryInterval, as: .state(topics.status))
    }

    /// Stores a batch of events in the outbox (one sync for all). Returns the seqs the full outbox gave up for them
    /// (never one of `sparing`, the delivery core's: every event that may have reached the broker) and whether the
    /// disk took the write. Nothing is sent here: the core hands events once it knows them stored.
    public func store(_ batch: [OutboxEntry], sparing: Set<UInt64>) -> (dropped: [UInt64], recorded: Bool) {
        guard !batch.isEmpty else { return ([], outboxProblem == nil) }
        let (lost, failure) = outbox.append(batch, sparing: sparing)
        note(failure)
        if lost.isEmpty {
            drops.ended()
        } else {
            drops.occurred(lost.count, ["first_seq": lost[0].event.seq, "last_seq": lost[lost.count - 1].event.seq])
        }
        return (lost.map(\.event.seq), failure == nil)
    }

    /// The broker acknowledged the event: it leaves the outbox.
    public func remove(_ seq: UInt64) {
        outbox.remove(seq: seq)
        if outbox.count < outbox.capacity { drops.ended() }
    }

    /// Publishes the outbox's event with this seq (the delivery core's `send`); false if it is not there or the
    /// connection is gone (its disconnect follows).
    @discardableResult
    public func send(_ seq: UInt64, replayed: Bool) -> Bool {
        if !replayed {
            // The bytes alone: the entry is only needed to mark a replay.
            guard let wire = outbox.wire(seq: seq) else { return false }
            return publish(topic: topics.events, payload: wire, retain: false, as: .event(seq))
        }
        guard let entry = outbox.entry(seq: seq) else { return false }
        return send(entry, replayed: true, as: .event(seq))
    }

    /// Publishes the announcement of dropped events (the core's `sendAnnouncement`). It stays out of the outbox (a
    /// full outbox must not drop events to announce drops); the caller keeps it on disk until the broker acknowledges
    /// it, and it is sent again, same id and seq, on every connection until then.
    @discardableResult
    public func sendAnnouncement(_ entry: OutboxEntry, replayed: Bool) -> Bool {
        send(entry, replayed: replayed, as: .announcement(entry.event.seq))
    }

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
        publishState(topic)
    }

    /// The topic's latest state now, or once its previous publish is written whole to the socket. QoS 0: a state
    /// is a snapshot, not history. Every connection starts with all of them, so the broker's retained copy is right
    /// again after any loss, and every spot change also comes as a QoS 1 event kept in the outbox.
    private func publishState(_ topic: String) {
        guard !statesInFlight.contains(topic) else {
            statesWaiting.insert(topic)
            return
        }
        if publish(topic: topic, payload: retained[topic]!, qos: 0, retain: true, as: .state(topic)) { statesInFlight.insert(topic) }
    }

    /// Takes the link's event; returns what it means for the delivery core (nil: nothing): a connection up or down,
    /// and the broker's answer to an event or an announcement sent on this connection.
    public func handle(_ event: LinkEvent) -> DeliveryCore.Input? {
        switch event {
        case .connected(_, let number, _):
            connection = number
            forgetInFlight()
            rebirth()
            let backlog = outbox.pending
            if let first = backlog.first { Log.info("outbox replay", ["events": backlog.count, "first_seq": first.event.seq]) }
            return .connected
        case .disconnected(let number, _):
            guard connection == number else { return nil }
            connection = nil
            forgetInFlight()
            return .disconnected
        case .acknowledged(let mid, let number):
            guard connection == number, let sent = inFlight.removeValue(forKey: mid) else { return nil }
            switch sent {
            case .event(let seq):
                return .acknowledged(seq)
            case .announcement(let seq):
                return .announcementAcknowledged(seq)
            case .status:
                offlineStatusAcked = true
            case .reply:
                repliesInFlight -= 1
            case .state(let topic):
                guard statesInFlight.remove(topic) != nil else { break }
                if statesWaiting.remove(topic) != nil { publishState(topic) }
            }
            return nil
        case .refused(let mid, let number, let code):
            guard connection == number, let sent = inFlight.removeValue(forKey: mid) else { return nil }
            let reason = "\(MosquittoConnection.describeReason(code)) (reason code 0x\(String(code, radix: 16)))"
            switch sent {
            case .event(let seq):
                // Not delivered: the event stays in the outbox, and is sent again after the core's backoff.
                return .refused(seq, reason: reason)
            case .announcement(let seq):
                return .announcementRefused(seq, reason: reason)
            case .status:
                // (A clean stop's offline: the broker will not keep it; the stop need not wait for it.)
                offlineStatusAcked = true
            case .reply:
                repliesInFlight -= 1
            case .state(let topic):
                statesInFlight.remove(topic)
            }
            return nil
        case .message, .oversized, .contested:
            return nil
        }
    }

    /// Status online, then every retained state: what a backend needs to rebuild the truth.
    public func rebirth() {
        publish(topic: topics.status, payload: birthOnWire, retain: true, expiry: StatusPayload.expiryInterval, as: .state(topics.status))
        for topic in retainedOrder { publishState(topic) }
    }

    /// A new connection (or none): nothing sent on the old one counts.
    private func forgetInFlight() {
        inFlight.removeAll()
        statesInFlight.removeAll()
        statesWaiting.removeAll()
        repliesInFlight = 0
    }

    /// Publishes `offline` (retained) before a clean stop. True once the broker acknowledged it.
    public func sayOffline() {
        offlineStatusAcked = false
        publish(topic: topics.status, payload: WireJSON.encode(StatusPayload(state: "offline", boot: birth.boot, connection: connection)),
                retain: true, expiry: StatusPayload.expiryInterval, as: .status)
    }

    /// The online status as this connection sends it: with its number, so that a reader can tell it from the
    /// offline (or last will) of the same connection that may overtake it.
    private var birthOnWire: [UInt8] {
        var status = birth
        status.connection = connection
        return WireJSON.encode(status)
    }

    /// A command's result (QoS 1, not retained, not kept when offline).
    public func publishReply(topic: String, payload: [UInt8]) {
        if publish(topic: topic, payload: payload, retain: false, as: .reply) { repliesInFlight += 1 }
    }

    /// Command replies sent and not yet acknowledged, at most: a flood of commands must not queue replies in
    /// libmosquitto without bound (the caller drops a command it cannot answer, and says so).
    public static let replyWindow = 32
    private var repliesInFlight = 0
    /// Whether a reply may be sent now (offline, one is not kept anyway).
    public var canReply: Bool { repliesInFlight < Self.replyWindow }

    public var offlineAcknowledged: Bool { offlineStatusAcked }
    /// Nothing sent on this connection (events, states, replies, the status) waits for its PUBACK.
    public var nothingInFlight: Bool { inFlight.isEmpty }

    /// The event's bytes as encoded when it was stamped; a replayed one (sent again after a reconnect) says so.
    private func send(_ entry: OutboxEntry, replayed: Bool, as sent: Sent) -> Bool {
        var payload = entry.wire
        if replayed {
            var event = entry.event
            event.replayed = true
            payload = WireJSON.encode(event)
        }
        return publish(topic: topics.events, payload: payload, retain: false, as: sent)
    }

    /// True while the publish awaits its `acknowledged` (QoS 1: the PUBACK; QoS 0: written whole to the socket).
    @discardableResult
    private func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool, expiry: UInt32? = nil, as sent: Sent) -> Bool {
        guard let connection else { return false }
        switch link.publish(topic: topic, payload: payload, qos: qos, retain: retain, expiry: expiry, on: connection) {
        case .sent(let mid, _):
            inFlight[mid] = sent
            return true
        case .written:
            return false
        case .offline:
            // The connection went away under us; its disconnect event follows and the outbox replays.
            return false
        }
    }
}
