@testable import AgentKit
import ParkWiseContract
import Testing

/// When the retained status goes out (in-process): a change of the outbox depth waits for `status_every`, a storage
/// fault or the clock's state goes out at once, even while a wake-up is armed for an earlier change.
@Suite struct RetainedStatusScheduleTests {
    let minute: Int64 = 60_000_000_000

    func health(depth: Int = 0, clock: String = "synced", fault: String? = nil) -> StatusPayload.Health {
        StatusPayload.Health(outboxDepth: depth, clock: clock, faultedInputs: 0, reconnects: 0, storageFault: fault)
    }

    @Test func aStorageFaultOrTheClockGoesOutAtOnceOtherChangesWaitTheirTurn() {
        var schedule = RetainedStatusSchedule(every: .seconds(60))
        #expect(schedule.decide(health(), connected: true, now: { 0 }) == .publishNow)
        schedule.didPublish(health(), at: 0)
        // 10 s later the depth changed: it waits for the minute.
        #expect(schedule.decide(health(depth: 5), connected: true, now: { minute / 6 }) == .wake(after: .seconds(50)))
        // Meanwhile the disk fails: said at once, the armed wake-up notwithstanding.
        #expect(schedule.decide(health(depth: 5, fault: "disk full"), connected: true, now: { minute / 5 }) == .publishNow)
        schedule.didPublish(health(depth: 5, fault: "disk full"), at: minute / 5)
        // It works again: at once too. So does the clock's state.
        #expect(schedule.decide(health(depth: 5), connected: true, now: { minute / 4 }) == .publishNow)
        schedule.didPublish(health(depth: 5), at: minute / 4)
        #expect(schedule.decide(health(depth: 5, clock: "unsynced"), connected: true, now: { minute / 3 }) == .publishNow)
        // Offline nothing is published (every connection publishes the birth anyway).
        #expect(schedule.decide(health(fault: "x"), connected: false, now: { minute }) == .nothing)
    }

    /// The backlog a reconnect published is gone: said at once, not a minute later (issue 33: the fleet views showed an
    /// already-delivered backlog). An outbox that fills for a moment with each event waits its turn, and emptying it
    /// again after a status that showed it empty publishes nothing.
    @Test func anOutboxThatEmptiedAfterAPublishedBacklogGoesOutAtOnce() {
        var schedule = RetainedStatusSchedule(every: .seconds(60))
        schedule.didPublish(health(depth: 37), at: 0)   // the connection's status, with the backlog
        #expect(schedule.decide(health(depth: 12), connected: true, now: { minute / 60 }) == .wake(after: .seconds(59)))
        #expect(schedule.decide(health(depth: 0), connected: true, now: { minute / 30 }) == .publishNow)
        schedule.didPublish(health(depth: 0), at: minute / 30)
        schedule.woke()
        #expect(schedule.decide(health(depth: 1), connected: true, now: { minute / 20 }) == .wake(after: .seconds(59)))
        #expect(schedule.decide(health(depth: 0), connected: true, now: { minute / 15 }) == .nothing)
    }
}
