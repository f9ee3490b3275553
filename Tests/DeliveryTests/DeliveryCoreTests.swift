import Delivery
import Testing

/// The delivery core's rules, one at a time, in-process: what it hands, when, and what it gives up.
@Suite struct DeliveryCoreTests {
    /// Runs the core's queued effects into a list (the shell's part, as a test sees it).
    func effects(_ core: inout DeliveryCore) -> [DeliveryCore.Effect] {
        var out: [DeliveryCore.Effect] = []
        while let effect = core.nextEffect() {
            out.append(effect)
            if case .saveState = effect { core.handle(.stateSaved, at: 0) }
        }
        return out
    }

    func sends(_ effects: [DeliveryCore.Effect]) -> [UInt64] {
        effects.compactMap { if case .send(let seq, _) = $0 { seq } else { nil } }
    }

    /// An event is handed only once the outbox file reported it stored, and is recorded as handed in the same step: it
    /// is never among those a full outbox may give up (issue 32, defect 1).
    @Test func anEventIsHandedOnlyOnceStoredAndIsNeverGivenUpThen() {
        var core = DeliveryCore(start: .init(), window: 10, capacity: 3)
        core.handle(.connected, at: 0)
        #expect(effects(&core).isEmpty)
        #expect(core.sparing(adding: 1).isEmpty, "room: nothing is given up")
        core.handle(.stored(seqs: [1, 2, 3], dropped: [], recorded: true), at: 0)
        #expect(sends(effects(&core)) == [1, 2, 3])
        #expect(core.sparing(adding: 1) == [1, 2, 3], "handed: the outbox gives up the incoming event instead")
    }

    /// `settled` is everything below the lowest pending seq (issue 37: kept as events come and go, not found by a walk of
    /// every pending seq after each batch): in an outage of 300 events, acknowledgements in order, out of order, and
    /// across a gap the outbox gave up, each leave it where a walk would.
    @Test func settledFollowsTheLowestPendingSeqAsAcknowledgementsComeInAnyOrder() {
        var core = DeliveryCore(start: .init(), window: 400, capacity: 1000)
        core.handle(.stored(seqs: Array(1...300), dropped: [], recorded: true), at: 0)
        _ = effects(&core)
        #expect(core.settled == 0)
        core.handle(.connected, at: 0)
        _ = effects(&core)
        func ack(_ seqs: [UInt64]) { for seq in seqs { core.handle(.acknowledged(seq), at: 0) }; _ = effects(&core) }
        ack([2, 3, 5])                       // not the lowest: nothing settles
        #expect(core.settled == 0)
        ack([1])                             // 1, 2, 3 settled; 4 is the lowest pending
        #expect(core.settled == 3)
        ack([4])                             // 5 was acknowledged: 6 is next
        #expect(core.settled == 5)
        ack(Array(7...200))                  // 6 still pending: nothing moves
        #expect(core.settled == 5)
        ack([6])                             // the next pending is 201, far past a short look
        #expect(core.settled == 200)
        ack(Array(201...299).reversed())     // the newest first: the lowest leaves last
        #expect(core.settled == 299)
        ack([300])
        #expect(core.settled == 300)
    }

    /// A broker that never acknowledges: the window fills, nothing more is handed, and once every kept event is handed
    /// the incoming ones are what the full outbox gives up (declared, never sent). A new connection sends the window again.
    @Test func aBrokerThatNeverAcknowledgesCostsOnlyIncomingEvents() {
        var core = DeliveryCore(start: .init(), window: 2, capacity: 4)
        core.handle(.connected, at: 0)
        core.handle(.stored(seqs: [1, 2, 3, 4], dropped: [], recorded: true), at: 0)
        #expect(sends(effects(&core)) == [1, 2], "at most the window unanswered")
        #expect(core.sparing(adding: 1) == [1, 2])
        core.handle(.disconnected, at: 0)
        core.handle(.connected, at: 0)
        #expect(sends(effects(&core)) == [1, 2])
        core.handle(.disconnected, at: 0)
        core.handle(.connected, at: 0)
        _ = effects(&core)
        core.handle(.acknowledged(1), at: 0)
        #expect(sends(effects(&core)) == [3])
        core.handle(.disconnected, at: 0)
        #expect(core.sparing(adding: 1).isEmpty, "room for one")
        #expect(core.sparing(adding: 2) == [2, 3])
        #expect(core.ledger.handed == [2, 3], "handed on any connection stays handed until acknowledged")
        core.handle(.stored(seqs: [5], dropped: [5], recorded: true), at: 0)
        #expect(core.ledger.unannounced == [5...5], "the incoming event given up is declared")
        #expect(core.queue == [2, 3, 4])
    }

    /// A refused publish is kept; events wait 2 s, then go again (refused ones first); a second refusal waits 4 s; an
    /// acknowledgement ends the refusal and resets the wait.
    @Test func aRefusedEventIsKeptAndSentAgainAfterABackoff() {
        var core = DeliveryCore(start: .init(), window: 10, capacity: 10)
        core.handle(.connected, at: 0)
        core.handle(.stored(seqs: [1, 2], dropped: [], recorded: true), at: 0)
        #expect(sends(effects(&core)) == [1, 2])
        core.handle(.refused(1, reason: "not authorized"), at: 100)
        #expect(effects(&core) == [.refused(1, reason: "not authorized", retryAt: 100 + DeliveryCore.firstRetryWait)])
        #expect(core.refusal?.firstSeq == 1)
        core.handle(.stored(seqs: [3], dropped: [], recorded: true), at: 200)
        #expect(sends(effects(&core)).isEmpty, "events wait while the broker refuses")
        core.handle(.time, at: 100 + DeliveryCore.firstRetryWait - 1)
        #expect(sends(effects(&core)).isEmpty)
        core.handle(.time, at: 100 + DeliveryCore.firstRetryWait)
        #expect(sends(effects(&core)) == [1, 3], "the refused one first, then what waited")
        core.handle(.refused(1, reason: "not authorized"), at: 5_000_000_000)
        #expect(core.nextDeadline == 5_000_000_000 + 2 * DeliveryCore.firstRetryWait, "the wait doubles")
        core.handle(.acknowledged(2), at: 5_000_000_001)
        #expect(effects(&core).contains(.refusalEnded))
        #expect(core.refusal == nil)
        #expect(core.queue == [1, 3], "refused events stay in the outbox")
    }

    /// Events above the seq reservation on disk wait for it; an announcement waits for its state save and its floor.
    @Test func eventsAboveTheReservationWait() {
        var core = DeliveryCore(start: .init(), window: 10, capacity: 10)
        core.handle(.sendable(upTo: 2), at: 0)
        core.handle(.connected, at: 0)
        core.handle(.stored(seqs: [1, 2, 3], dropped: [], recorded: true), at: 0)
        #expect(sends(effects(&core)) == [1, 2])
        #expect(core.held.count == 1 && core.held.firstSeq == 3)
        #expect(!core.everythingAcknowledged)
        core.handle(.sendable(upTo: 10), at: 0)
        #expect(sends(effects(&core)) == [3])
    }

    /// A start with an event at or below the settled seq (a file that lost the record saying it was declared or
    /// acknowledged) never sends it, and seqs found unaccounted for get drop records before anything else is written.
    @Test func aStartSendsNothingSettledAndRecordsWhatItDeclaresFirst() {
        var disk = DeliveryLedger.StartContents()
        disk.settled = 5
        disk.top = 12
        var outbox = DeliveryLedger.StartContents.Outbox()
        outbox.pending = [3, 7]
        outbox.highest = 7
        disk.outbox = outbox
        var core = DeliveryCore(start: disk, window: 10, capacity: 10)
        let start = effects(&core)
        #expect(start.first == .recordDrops([8...12]), "6 lies below the file's highest record: accounted for")
        #expect(start.contains(.discard([3])))
        #expect(core.queue == [7])
        #expect(core.settled >= 5, "never below the start's")
    }
}
