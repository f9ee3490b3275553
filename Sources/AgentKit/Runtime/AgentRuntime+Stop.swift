import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup

/// The graceful stop: offline said, what is in flight given a moment, the sequence ledger left exact.
extension AgentRuntime {
    /// Graceful stop: say offline, give the broker a moment to acknowledge, disconnect cleanly.
    func stop(exitCode: Int32) -> Int32 {
        Log.info("stopping", ["outbox": session.outboxCount])
        inputReal = nil
        options.service.stopping()
        garage.advance(to: clock.now(), into: &events)
        declareShed()
        flush()
        // flush() arms the garage's next timer; nothing is due any more once stopping.
        timer = nil
        deadlines.status = nil
        if stamper.state.awaitingReservation {   // a last try: the disk may take the reservation now
            stamper.state.reserveAhead()
            publishChangedStates()
        }
        publishWaitingStates()   // the broker keeps each topic's latest state
        session.sayOffline()
        let giveUp = monotonicNanoseconds() + options.stopGrace.nanosecondCount
        var unread = 0   // line changes still queued: never stamped nor stored, the board's levels say the rest at the next start
        var unanswered = 0   // commands: not answered once stopping
        if session.isConnected {
            waiting: while true {
                guard let input = nextInput(until: giveUp) else {
                    Log.warn("broker did not acknowledge everything before stopping", ["outbox": session.outboxCount])
                    break waiting
                }
                if case .lines = input { unread += lineQueue.take().changes.count }
                if case .uplink(.message) = input { unanswered += 1 }
                statusInbox.answer { statusSnapshot.build() }
                switch input {
                case .uplink(let event):
                    if let input = session.handle(event) { deliver(input) }
                    if !session.isConnected
                        || (session.offlineAcknowledged && session.nothingInFlight && core.everythingAcknowledged) { break waiting }
                case .lines, .tick, .sourceFinished, .stop, .housekeeping, .inputLost, .statusDue, .statusRequested:
                    continue
                }
            }
        }
        // What the queue still holds (without a broker the loop above never ran; the source is stopped by now).
        let left = lineQueue.take()
        unread += left.changes.count + left.shed
        if unread > 0 { Log.info("line changes queued behind the stop, left unread", ["changes": unread]) }
        // Commands still waiting, unread or turned away: counted, never answered once stopping.
        unanswered += commands.stop(turnedAway: inbox.takeDroppedMessages().dropped)
        while let input = inbox.next(until: 0) { if case .uplink(.message) = input { unanswered += 1 } }
        if unanswered > 0 { Log.info("commands left unanswered at the stop", ["commands": unanswered]) }
        session.writeOutboxChanges()
        let held = core.held
        if let first = held.firstSeq {
            Log.error("events left unsent at the stop, no seq reservation on disk covers them",
                      ["events": held.count, "first_seq": first])
        }
        link.stop()
        stamper.state.settled = core.settled
        stamper.state.stoppedCleanly()
        Log.info("stopped", ["outbox": session.outboxCount, "exit": exitCode])
        return exitCode
    }
}
