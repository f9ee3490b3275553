import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup
import MQTT

/// The status: the socket's snapshots and the retained `status` topic.
extension AgentRuntime {
    // MARK: - Status (built in Sources/AgentKit/Status)

    /// For the status socket's thread: the event loop answers before its next input.
    func requestStatus(_ request: StatusRequest) {
        statusInbox.add(request)
        inbox.post(.statusRequested)
    }

    var statusSnapshot: StatusSnapshot {
        StatusSnapshot(config: config, garage: garage, session: session, publishRefused: publishRefused, stamper: stamper, tracker: tracker,
                       configHash: options.configHash, mode: options.mode, clockSynced: clockSynced,
                       outboxUnusable: outboxUnusable, readOnly: readOnlyAtStart)
    }

    /// Link events for the status; a new connection's birth carries the facts as they are now.
    func noteForStatus(_ event: LinkEvent) {
        tracker.note(event, at: instantNow)
        if case .connected = event { publishStatus(statusSnapshot) }
    }

    /// Republishes the retained status when its facts changed, at most once per `mqtt.status_every` (a deadline
    /// the loop sleeps until, not a timer).
    /// The coarse clock is enough to arm the deadline, but once it has come (`woken`) the precise one decides: the
    /// coarse one may not have reached it yet, and would arm it again, already past (a busy loop until its next tick).
    func refreshStatus(woken: Bool) {
        guard session.isConnected else { return }   // (nothing is published offline: no facts gathered for it)
        switch statusSchedule.decide(statusHealth, connected: session.isConnected,
                                     now: woken ? { self.realNow() } : coarseMonotonicNanoseconds) {
        case .nothing:
            break
        case .publishNow:
            publishStatus(statusSnapshot)
        case .wake(let delay):
            deadlines.status = coarseMonotonicNanoseconds() + delay.nanosecondCount
        }
    }

    /// Reads the garage in place: a plain read of a struct a class holds copies it first (retaining each of its
    /// arrays), and these reads come after every input.
    func inGarage<T>(_ read: (inout Garage) -> T) -> T { read(&garage) }
    /// The delivery core read in place (the same reason: its sets and queues retained and released for a number).
    func inCore<T>(_ read: (inout DeliveryCore) -> T) -> T { read(&core) }
    /// The stamper and its device state, read in place (the same reason).
    func inStamper<T>(_ read: (inout EventStamper) -> T) -> T { read(&stamper) }

    /// The retained status's changing facts, read in place: this runs after every input, so no snapshot is built.
    var statusHealth: StatusPayload.Health {
        StatusPayload.Health(outboxDepth: session.outboxCount,
                             clock: StatusSnapshot.clockState(scaled: clock.isScaled, synced: clockSynced),
                             faultedInputs: inGarage { $0.faultedInputCount }, reconnects: tracker.reconnects,
                             storageFault: inStamper {
                                 StatusSnapshot.storageFault(session, $0.state, outboxUnusable: outboxUnusable, readOnly: readOnlyAtStart)
                             }, idConflict: tracker.idConflict, publishRefused: inCore { $0.refusal?.reason } ?? (echo?.said == true ? EchoCheck.reason : nil))
    }

    func publishStatus(_ snapshot: StatusSnapshot) {
        let health = statusHealth
        session.updateStatus(session.birth.with(health, uptimeSeconds: Int(tracker.uptimeSeconds),
                                                outboxOldestAgeSeconds: snapshot.oldestAgeSeconds.map { Int($0) },
                                                at: stamper.wallTime(instantNow)))
        statusSchedule.didPublish(health, at: coarseMonotonicNanoseconds())
    }
}
