import ParkWiseContract
import ParkWiseLog

/// The device's MQTT session: on every connection, birth (status online), then every retained
/// state, then the outbox in `seq` order, and only then new events. Owned by the agent's event
/// loop (one thread at a time); the link does the network I/O.
///
/// Bounded: at most `window` events are handed to the link unacknowledged (the rest wait in the outbox, which
/// is bounded, and follow as PUBACKs come), and at most one publish per retained state topic in libmosquitto's queue
/// (a newer state waits until the one before is written, and only the latest is sent): a slow broker never grows
/// libmosquitto's queue.
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
    private let window: Int
    /// Events in `inFlight`.
    private var eventsInFlight = 0
    /// The highest seq handed to the link on this connection (events go out in seq order).
    private var sentUpTo: UInt64 = 0
    /// Events pending when this connection came up are sent marked `replayed`.
    private var replayUpTo: UInt64 = 0
    private var announcementSent = false
    /// Retained state topics with a publish not yet written to the socket, and those with a newer state waiting for it.
    private var statesInFlight: Set<String> = []
    private var statesWaiting: Set<String> = []
    /// An outage that overflows the outbox: one log line per streak, not per event dropped.
    private var drops = LogStreak(.warn, "outbox full, events dropped", ended: "outbox no longer full")
    /// Events the broker refused (MQTT 5 PUBACK reason 0x80 or more), kept in the outbox: sent again after
    /// `retryRefused()`. One log line per streak; it ends when the broker acknowledges an event again.
    private var refusedSeqs: Set<UInt64> = []
    private var refusals = LogStreak(.error, "broker refused events, kept in the outbox",
                                     ended: "broker acknowledges events again")

    /// What the broker refused, if it refuses now: its words and the first seq it refused. Events wait (states and
    /// the status still go) until `retryRefused()`; an event acknowledged after that ends it.
    public private(set) var refusal: (reason: String, firstSeq: UInt64)?
    /// Refused events wait for `retryRefused()` (the caller's backoff).
    public private(set) var refusalWaits = false

    /// Sends the refused events again (and what waited behind them), after the caller's backoff.
    public func retryRefused() {
        guard refusalWaits else { return }
        refusalWaits = false
        pump()
    }

    /// What a technician does about a refused publish.
    public static let refusalHint = "the broker's ACL does not let this device write its topic: check that device: in the "
        + "config is the name the broker knows it by (its certificate's CN, or its credentials' username), and the ACL"

    public init(link: MQTTLink, topics: Topics, outbox: any Outbox, birth: StatusPayload, window: Int = 100) {
        self.link = link
        self.topics = topics
        self.outbox = outbox
        self.birth = birth
        self.window = max(1, window)
    }

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

    /// Told each time an event is handed to the link (it may reach the broker from then on) and acknowledged: the
    /// delivery ledger's view of what may have arrived.
    public var eventHanded: (UInt64) -> Void = { _ in }
    public var eventAcknowledged: (UInt64) -> Void = { _ in }

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
        publish(topic: topics.status, payload: birthOnWire, retain: true, as: .state(topics.status))
    }

    /// Takes a batch of events into the outbox (one sync for all), and sends them at once when the
    /// link is up. Returns the events the full outbox gave up for them (the caller declares them): never one of
    /// `sparing` (the delivery ledger's: every event that may have reached the broker).
    @discardableResult
    public func accept(_ batch: [OutboxEntry], sparing: @autoclosure () -> Set<UInt64>) -> [OutboxEntry] {
        guard !batch.isEmpty else { return [] }
        // (Gathered only when the outbox overflows.)
        let full = outbox.count + batch.count > outbox.capacity
        let (lost, failure) = outbox.append(batch, sparing: full ? sparing() : [])
        note(failure)
        if lost.isEmpty {
            drops.ended()
        } else {
            drops.occurred(lost.count, ["first_seq": lost[0].event.seq, "last_seq": lost[lost.count - 1].event.seq])
        }
        pump()
        return lost
    }

    /// Events above this seq wait: the disk holds no reservation for them yet, and a crash would have the next run
    /// send their seqs again (see the agent's `DeviceState.durable`).
    public private(set) var sendableUpTo: UInt64 = .max

    /// Raising the limit sends what waited for it.
    public func allowSending(upTo seq: UInt64) {
        let raised = seq > sendableUpTo
        sendableUpTo = seq
        if raised { pump() }
    }

    /// Hands the link the outbox's next events in seq order (the announcement in its place), while fewer than
    /// `window` are unacknowledged and up to `sendableUpTo`.
    private func pump() {
        guard connection != nil, !refusalWaits else { return }
        if !refusedSeqs.isEmpty {
            // Refused ones first, in seq order (they lie below what was sent since).
            for entry in outbox.pending where refusedSeqs.contains(entry.event.seq) {
                guard eventsInFlight < window else { return }
                refusedSeqs.remove(entry.event.seq)
                if send(entry, as: .event(entry.event.seq)) {
                    eventsInFlight += 1
                }
            }
            refusedSeqs.removeAll()   // (those no longer in the outbox)
        }
        for entry in outbox.pending where entry.event.seq > sentUpTo {
            if let announcement, !announcementSent, announcement.event.seq < entry.event.seq,
               announcement.event.seq <= sendableUpTo {
                sendAnnouncement(announcement)
            }
            guard entry.event.seq <= sendableUpTo else { return }
            guard eventsInFlight < window else { return }
            sentUpTo = entry.event.seq
            if send(entry, as: .event(entry.event.seq)) {
                eventsInFlight += 1
                eventHanded(entry.event.seq)
            }
        }
        if let announcement, !announcementSent, announcement.event.seq <= sendableUpTo { sendAnnouncement(announcement) }
    }

    private func sendAnnouncement(_ entry: OutboxEntry) {
        guard !refusalWaits else { return }
        announcementSent = true
        send(entry, as: .announcement(entry.event.seq))
    }

    /// An event declaring dropped events. It stays out of the outbox (a full outbox must not drop
    /// events to announce drops); the caller keeps it on disk until `acknowledgedAnnouncement`
    /// says the broker has it, and it is sent again, same id and seq, on every connection until then.
    public func announce(_ entry: OutboxEntry) {
        announcement = entry
        announcementSent = false
        pump()
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

    public func handle(_ event: UplinkEvent) {
        switch event {
        case .connected(_, let number):
            connection = number
            forgetInFlight()
            rebirth()
            let backlog = outbox.pending
            if !backlog.isEmpty { Log.info("outbox replay", ["events": backlog.count, "first_seq": backlog[0].event.seq]) }
            // The announcement of dropped events takes its place in seq order.
            replayUpTo = max(backlog.last?.event.seq ?? 0, announcement?.event.seq ?? 0)
            pump()
        case .disconnected(let number, _):
            if connection == number {
                connection = nil
                forgetInFlight()
            }
        case .acknowledged(let mid, let number):
            guard connection == number, let sent = inFlight.removeValue(forKey: mid) else { return }
            switch sent {
            case .event(let seq):
                eventsInFlight -= 1
                outbox.remove(seq: seq)
                eventAcknowledged(seq)
                if outbox.count < outbox.capacity { drops.ended() }
                endRefusal()
                pump()
            case .announcement(let seq):
                if announcement?.event.seq == seq { announcement = nil }
                acknowledgedAnnouncement = seq
                endRefusal()
            case .status:
                offlineStatusAcked = true
            case .reply:
                repliesInFlight -= 1
            case .state(let topic):
                guard statesInFlight.remove(topic) != nil else { break }
                if statesWaiting.remove(topic) != nil { publishState(topic) }
            }
        case .refused(let mid, let number, let code):
            guard connection == number, let sent = inFlight.removeValue(forKey: mid) else { return }
            let reason = "\(MosquittoConnection.describeReason(code)) (reason code 0x\(String(code, radix: 16)))"
            switch sent {
            case .event(let seq):
                // Not delivered: the event stays in the outbox, and is sent again after the caller's backoff.
                eventsInFlight -= 1
                refusedSeqs.insert(seq)
                noteRefusal(reason, seq: seq)
            case .announcement(let seq):
                announcementSent = false
                noteRefusal(reason, seq: seq)
            case .status:
                // (A clean stop's offline: the broker will not keep it; the stop need not wait for it.)
                offlineStatusAcked = true
            case .reply:
                repliesInFlight -= 1
            case .state(let topic):
                statesInFlight.remove(topic)
            }
        case .message, .oversized, .contested:
            break
        }
    }

    private func noteRefusal(_ reason: String, seq: UInt64) {
        if refusal == nil { refusal = (reason, seq) }
        refusalWaits = true
        refusals.occurred(1, ["reason": reason, "seq": seq, "topic": topics.events, "hint": Self.refusalHint])
    }

    private func endRefusal() {
        guard refusal != nil else { return }
        refusal = nil
        refusals.ended()
    }

    /// Status online, then every retained state: what a backend needs to rebuild the truth.
    public func rebirth() {
        publish(topic: topics.status, payload: birthOnWire, retain: true, as: .state(topics.status))
        for topic in retainedOrder { publishState(topic) }
    }

    /// A new connection (or none): nothing sent on the old one counts.
    private func forgetInFlight() {
        inFlight.removeAll()
        eventsInFlight = 0
        refusedSeqs.removeAll()   // a new connection sends the whole outbox again
        refusalWaits = false
        sentUpTo = 0
        replayUpTo = 0
        announcementSent = false
        statesInFlight.removeAll()
        statesWaiting.removeAll()
        repliesInFlight = 0
    }

    /// Publishes `offline` (retained) before a clean stop. True once the broker acknowledged it.
    public func sayOffline() {
        offlineStatusAcked = false
        publish(topic: topics.status, payload: WireJSON.encode(StatusPayload(state: "offline", boot: birth.boot, connection: connection)),
                retain: true, as: .status)
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
    /// Nothing sent is waiting for its PUBACK, and nothing in the outbox that may be sent waits to be (events held
    /// for a seq reservation may not).
    public var everythingAcknowledged: Bool { inFlight.isEmpty && min(outbox.pending.last?.event.seq ?? 0, sendableUpTo) <= sentUpTo }

    /// Events waiting for a seq reservation on disk (see `sendableUpTo`), a drop announcement among them, and the
    /// lowest of their seqs.
    public var held: (count: Int, firstSeq: UInt64?) {
        var seqs = outbox.pending.map(\.event.seq).filter { $0 > sendableUpTo }
        if let announcement, !announcementSent, announcement.event.seq > sendableUpTo { seqs.append(announcement.event.seq) }
        return (seqs.count, seqs.min())
    }

    /// The event's bytes as encoded when it was stamped; a replayed one (sent again after a reconnect) says so.
    @discardableResult
    private func send(_ entry: OutboxEntry, as sent: Sent) -> Bool {
        var payload = entry.wire
        if entry.event.seq <= replayUpTo {
            var event = entry.event
            event.replayed = true
            payload = WireJSON.encode(event)
        }
        return publish(topic: topics.events, payload: payload, retain: false, as: sent)
    }

    /// True while the publish awaits its `acknowledged` (QoS 1: the PUBACK; QoS 0: written whole to the socket).
    @discardableResult
    private func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool, as sent: Sent) -> Bool {
        guard let connection else { return false }
        switch link.publish(topic: topic, payload: payload, qos: qos, retain: retain, on: connection) {
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
