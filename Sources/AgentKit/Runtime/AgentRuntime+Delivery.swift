import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup
import Uplink

/// What the delivery core decides, carried out: state file, announcements, floor and drop records, publishes.
extension AgentRuntime {
    // MARK: - Delivery (the core decides, these carry it out)

    /// Tells the core what happened, then carries out what it decided.
    func deliver(_ input: DeliveryCore.Input) {
        // The announcement the broker has leaves the state file with the save this decides.
        if case .announcementAcknowledged(let seq) = input, announcement?.event.seq == seq { announcement = nil }
        core.handle(input, at: realNow())
        drain()
        // A declaration is final once its announcement is acknowledged: the sequence ledger (which takes writes on a full
        // disk) counts its seqs settled at once, so that a stale or damaged outbox file can never bring one back.
        if case .announcementAcknowledged = input { stamper.state.recordSettled(core.settled) }
    }

    /// Carries out the core's effects in the order it decided them, one at a time: an outcome goes back to the core as
    /// an input, whose effects join the same queue (no recursion: an effect never runs inside another).
    func drain() {
        while let effect = core.nextEffect() {
            switch effect {
            case .saveState:
                saveState()
            case .stampAnnouncement(let seqs):
                // Declares the events a full outbox gave up (or a start found unaccounted for), so the backend sees a
                // gap it can explain: one announcement at a time, kept on disk until the broker acknowledges it.
                guard stamper.state.seqsLeft > 0 else { continue }
                let count = Int(clamping: seqs.upperBound - seqs.lowerBound + 1)
                Log.warn("announcing dropped events", ["count": count, "first_seq": seqs.lowerBound, "last_seq": seqs.upperBound])
                tracker.dropsDeclared += count
                let entry = stamper.stampDevice(type: "outbox.dropped", at: instantNow, synced: clockSynced) {
                    $0.dropped = count
                    $0.firstSeq = seqs.lowerBound
                    $0.lastSeq = seqs.upperBound
                }
                announcement = entry
                core.handle(.announcementStamped(seqs: seqs, seq: entry.event.seq), at: realNow())
            case .writeFloor(let seq):
                // Refused: tried again once the outbox writes again.
                core.handle(session.recordOutboxFloor(seq) ? .floorWritten(seq) : .floorRefused(seq), at: realNow())
            case .sendAnnouncement(let seq, let replayed):
                guard let announcement, announcement.event.seq == seq else { continue }
                session.sendAnnouncement(announcement, replayed: replayed)
            case .send(let seq, let replayed):
                session.send(seq, replayed: replayed)
            case .remove(let seq):
                session.remove(seq)
            case .refused(let seq, let reason, _):
                session.noteRefusal(reason, seq: seq)
            case .refusalEnded:
                session.refusalEnded()
            case .releaseDropRecords(let seqs):
                session.outboxDropsAnnounced(seqs)
            case .recordDrops(let ranges):
                session.recordDrops(ranges)
            case .discard(let seqs):
                Log.warn("events the backend already has or had declared dropped, not sent",
                         ["events": seqs.count, "first_seq": seqs.min() ?? 0])
                session.discardLoaded(seqs)
            }
        }
    }

    /// The device's own status came back (MQTT 3.1.1): this connection's, the broker takes its publishes, and the core
    /// hears of the connection now.
    func echoed(_ payload: [UInt8]) {
        guard let check = echo, check.isOwn(payload) else { return }
        echo = nil
        if check.said { Log.info("broker returns this device's status, events go out", ["connection": check.connection]) }
        deliver(.connected)
    }

    /// None came back in time: said once, and the status published again (10 s doubling to 64 s).
    func noEcho() {
        guard var check = echo else { return }
        if !check.said {
            Log.error("broker never returned this device's own status, events kept in the outbox",
                      ["topic": topics.status, "protocol": "3.1.1", "hint": UplinkSession.refusalHint])
        }
        check.retried(now: realNow())
        echo = check
        session.updateStatus(session.birth)
    }

    /// What the broker refuses now, for the status: its words (MQTT 5), or its silence (3.1.1).
    var publishRefused: String? {
        if let refusal = core.refusal { return "\(refusal.reason), from seq \(refusal.firstSeq)" }
        return echo?.said == true ? EchoCheck.reason : nil
    }

    /// Saves the state file with the core's declarations as they are now; once it holds them, the core is told, and
    /// so is how far the seq reservation on disk lets events go (the caller drains what that decides).
    func saveState() {
        stamper.state.setDeclarations(inCore { $0.ledger.hasUnannounced ? $0.ledger.unannounced : [] })
        stamper.state.save()
        if stamper.state.isSaved { core.handle(.stateSaved, at: realNow()) }
        core.handle(.sendable(upTo: stamper.state.durable), at: realNow())
    }
}
