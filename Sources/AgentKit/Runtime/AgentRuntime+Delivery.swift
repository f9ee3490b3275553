import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup
import Uplink

/// What the delivery ledger decides, carried out: state file, announcements, floor and drop records.
extension AgentRuntime {
    // MARK: - Delivery (the ledger decides, these carry it out)

    /// Carries out what the delivery ledger asks, feeding back what came of it.
    func perform(_ actions: [DeliveryLedger.Action]) {
        for action in actions {
            switch action {
            case .saveState:
                saveState()
            case .announce(let seqs):
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
                perform(delivery.announcing(seqs, seq: entry.event.seq))
            case .writeFloor(let seq):
                if session.recordOutboxFloor(seq) {
                    floorWanted = nil
                    perform(delivery.floorWritten(seq))
                } else {
                    floorWanted = seq   // tried again once the outbox writes again
                }
            case .handAnnouncement(let seq):
                guard let announcement, announcement.event.seq == seq else { continue }
                session.allowSending(upTo: stamper.state.durable)
                session.announce(announcement)
            case .releaseDropRecords(let seqs):
                session.outboxDropsAnnounced(seqs)
            case .discardPending(let seqs):
                Log.warn("events already declared dropped by an announcement, not sent", ["events": seqs.count,
                                                                                          "first_seq": seqs.min() ?? 0])
                session.discardLoaded(seqs)
            }
        }
    }

    /// Saves the state file with the ledger's declarations as they are now; once it holds them, the ledger is told.
    func saveState() {
        stamper.state.setDeclarations(delivery.unannounced, announcement: announcement)
        stamper.state.save()
        if stamper.state.isSaved { perform(delivery.stateSaved()) }
    }
}
