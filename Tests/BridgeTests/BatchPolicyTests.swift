@testable import BridgeKit
import Testing

/// The database thread's decisions, in-process: no database, no broker, no clock (time is passed in, the random part
/// of a backoff is its largest).
@Suite struct BatchPolicyTests {
    typealias Failure = BatchPolicy.Failure

    static let settings = BatchPolicy.Settings(batchSize: 8, holdAtMost: 100, stopGrace: 20, reassertEvery: 5)
    static let databaseDown = Failure(cause: .database, kind: "53100")
    static let noServer = Failure(cause: .database, kind: "connection", sessionLost: true, noConnection: true)

    /// A started bridge (broker connection 1) whose first round is done: the link recorded, the rebirths asked, swept.
    static func started(random: @escaping (ClosedRange<Double>) -> Double = { $0.upperBound }) -> BatchPolicy {
        var policy = BatchPolicy(settings, connected: true, now: 0, random: random)
        policy.broker(connection: 1, state: "connected")
        #expect(policy.next(now: 0) == .take(limit: 8, until: 0))
        policy.taken(0)
        #expect(settle(&policy, now: 0) == .take(limit: 8, until: 5))
        return policy
    }

    /// Answers the housekeeping steps (link, rebirths, sweep, settled) until another step comes; returns it.
    static func settle(_ policy: inout BatchPolicy, now: Double) -> BatchPolicy.Step {
        while true {
            let step = policy.next(now: now)
            switch step {
            case .recordLink(let state): policy.linkRecorded(state)
            case .rebirth: policy.rebirthsAsked()
            case .sweep: policy.swept()
            case .settled: continue
            default: return step
            }
        }
    }

    /// `count` messages taken at `now`; returns the next step.
    static func take(_ policy: inout BatchPolicy, _ count: Int, now: Double) -> BatchPolicy.Step {
        guard case .take = policy.next(now: now) else { Issue.record("not waiting for messages"); return .settled }
        policy.taken(count)
        return policy.next(now: now)
    }

    /// The backoff's length after each of `failures` failed batches in a row.
    static func backoffs(_ failure: Failure, count: Int, random: @escaping (ClosedRange<Double>) -> Double) -> [Double] {
        var policy = started(random: random)
        var now = 0.0
        #expect(take(&policy, 3, now: now) == .apply(3))
        var waits: [Double] = []
        for _ in 0..<count {
            guard case .hold(let hold) = policy.failed(failure, now: now) else { Issue.record("not held"); return waits }
            waits.append(hold.until - now)
            #expect(policy.next(now: now) == .pause(until: hold.until))
            now = hold.until
            if failure.sessionLost {
                #expect(policy.next(now: now) == .reconnect)
            } else {
                #expect(policy.next(now: now) == .apply(3))
            }
        }
        return waits
    }

    @Test func backoffDoublesFromOneSecondToThirty() {
        #expect(Self.backoffs(Self.databaseDown, count: 8, random: { $0.upperBound }) == [1, 2, 4, 8, 16, 30, 30, 30])
        #expect(Self.backoffs(Self.databaseDown, count: 3, random: { $0.lowerBound }) == [0.5, 1, 2])
    }

    @Test func noServerIsTriedAgainWithinFiveSeconds() {
        #expect(Self.backoffs(Self.noServer, count: 6, random: { $0.upperBound }) == [1, 2, 4, 5, 5, 5])
    }

    @Test func aLostSessionIsReplacedAndTheBatchRetried() {
        var policy = Self.started()
        #expect(Self.take(&policy, 2, now: 1) == .apply(2))
        let lost = Failure(cause: .database, kind: "connection", sessionLost: true, noConnection: true)
        guard case .hold(let hold) = policy.failed(lost, now: 1) else { Issue.record("not held"); return }
        #expect(hold.reconnect && !hold.anotherReason)
        #expect(policy.next(now: 2) == .reconnect)
        policy.connected()
        #expect(policy.next(now: 2) == .apply(2))
        policy.applied()
        #expect(policy.held == 0)
        #expect(policy.next(now: 2) == .settled)
        #expect(!policy.outage)
    }

    @Test func anotherReasonDuringAnOutageIsSaid() {
        var policy = Self.started()
        #expect(Self.take(&policy, 1, now: 0) == .apply(1))
        guard case .hold(let first) = policy.failed(Self.databaseDown, now: 0),
              case .hold(let again) = { _ = policy.next(now: 9); return policy.failed(Self.databaseDown, now: 9) }(),
              case .hold(let other) = { _ = policy.next(now: 20); return policy.failed(Failure(cause: .database, kind: "42501"), now: 20) }()
        else { Issue.record("not held"); return }
        #expect(!first.anotherReason && !again.anotherReason && other.anotherReason)
    }

    @Test func collisionsAreRetriedAtOnceFiveTimesThenHeld() {
        var policy = Self.started(random: { $0.upperBound })
        #expect(Self.take(&policy, 4, now: 0) == .apply(4))
        var now = 0.0
        for _ in 0..<5 {
            #expect(policy.failed(Failure(cause: .collision, kind: "40P01"), now: now) == .collision)
            #expect(policy.next(now: now) == .pause(until: now + 0.1))
            now += 0.1
            #expect(policy.next(now: now) == .apply(4))
        }
        guard case .hold(let hold) = policy.failed(Failure(cause: .collision, kind: "40P01"), now: now) else {
            Issue.record("a sixth collision in a row not held"); return
        }
        #expect(hold.until == now + 1)
    }

    @Test func aCancelledBatchIsCutInHalfAndGrowsBack() {
        var policy = Self.started()
        #expect(Self.take(&policy, 40, now: 0) == .apply(8))
        #expect(policy.failed(Failure(cause: .cancelled, kind: "57014"), now: 0) == .cut(to: 4, was: 8))
        #expect(policy.next(now: 0) == .apply(4))   // at once
        policy.applied()
        for _ in 0..<3 {   // full batches at the cut size: back to 8 after the 4th
            #expect(Self.settle(&policy, now: 0) == .apply(4))
            policy.applied()
        }
        #expect(!policy.limit.isCut)
        #expect(Self.settle(&policy, now: 0) == .apply(8))
    }

    @Test func oneMessageAloneCancelledIsHeldAndExplainedOnce() {
        var policy = Self.started()
        #expect(Self.take(&policy, 1, now: 0) == .apply(1))
        let cancelled = Failure(cause: .cancelled, kind: "57014")
        guard case .hold(let first) = policy.failed(cancelled, now: 0) else { Issue.record("not held"); return }
        #expect(first.explain == .timeout)
        #expect(policy.next(now: 1) == .apply(1))
        guard case .hold(let again) = policy.failed(cancelled, now: 1) else { Issue.record("not held"); return }
        #expect(again.explain == nil)
        #expect(policy.held == 1)
    }

    @Test func aMessagesDataErrorIsolatesThatMessageOnly() {
        var policy = Self.started()
        #expect(Self.take(&policy, 5, now: 0) == .apply(5))
        let refused = Failure(cause: .messageData, kind: "22007")
        #expect(policy.failed(refused, now: 0) == .isolate(5))
        for i in 0..<5 {
            #expect(policy.next(now: 0) == .applyAlone)
            if i == 2 { #expect(policy.failed(refused, now: 0) == .skip) } else { policy.isolated() }
        }
        #expect(policy.held == 0)
        #expect(!policy.outage)
        guard case .take = policy.next(now: 0) else { Issue.record("not taking again"); return }
    }

    @Test func theDatabaseFailingDuringIsolationHoldsTheRest() {
        var policy = Self.started()
        #expect(Self.take(&policy, 3, now: 0) == .apply(3))
        #expect(policy.failed(Failure(cause: .messageData, kind: "23514"), now: 0) == .isolate(3))
        #expect(policy.next(now: 0) == .applyAlone)
        policy.isolated()
        #expect(policy.next(now: 0) == .applyAlone)
        guard case .hold = policy.failed(Self.databaseDown, now: 0) else { Issue.record("not held"); return }
        #expect(policy.held == 2)
        #expect(policy.next(now: 1) == .apply(2))   // after the backoff, as a batch again
    }

    @Test func aRuleOfTheDatabaseHoldsTheBatch() {
        var policy = Self.started()
        #expect(Self.take(&policy, 3, now: 0) == .apply(3))
        guard case .hold(let hold) = policy.failed(Failure(cause: .rule, kind: "23514"), now: 0) else {
            Issue.record("not held"); return
        }
        #expect(hold.explain == .rule)
        #expect(policy.held == 3)
    }

    @Test func aStopWaitsForAFailingDatabaseAtMostItsGrace() {
        var policy = Self.started()
        #expect(Self.take(&policy, 3, now: 0) == .apply(3))
        var now = 0.0
        guard case .hold = policy.failed(Self.databaseDown, now: now) else { Issue.record("not held"); return }
        policy.stopRequested()
        while true {
            let step = policy.next(now: now)
            if case .pause(let until) = step {
                #expect(until <= 20)
                now = until
            } else if case .apply = step {
                _ = policy.failed(Self.databaseDown, now: now)
            } else {
                #expect(step == .stop(abandoned: true))
                break
            }
        }
        #expect(now == 20)
    }

    @Test func aStopDrainsFirst() {
        var policy = Self.started()
        #expect(Self.take(&policy, 2, now: 0) == .apply(2))
        policy.stopRequested()
        policy.drained = true
        policy.applied()
        #expect(Self.settle(&policy, now: 1) == .stop(abandoned: false))
    }

    @Test func aNewBrokerConnectionAsksEveryOnlineDeviceForARebirth() {
        var policy = Self.started()
        policy.broker(connection: 2, state: "connected")
        #expect(policy.next(now: 1) == .take(limit: 8, until: 1))   // not waiting: rebirths to ask
        policy.taken(0)
        #expect(policy.next(now: 1) == .rebirth)
        policy.rebirthsAsked()
        #expect(policy.next(now: 1) == .settled)
        #expect(policy.next(now: 1) == .take(limit: 8, until: 5))
    }

    @Test func theEndOfAnOverflowAsksEveryOnlineDeviceForARebirth() {
        var policy = Self.started()
        #expect(policy.overflow(dropped: 7, queued: 100) == .dropping)
        #expect(policy.overflow(dropped: 0, queued: 60) == nil)
        #expect(policy.overflow(dropped: 0, queued: 40) == .ended)
        #expect(policy.rebirthEveryOnline)
        #expect(policy.next(now: 1) == .take(limit: 8, until: 1))
        policy.taken(0)
        #expect(policy.next(now: 1) == .rebirth)
    }

    @Test func aSweepSlowerThanItsIntervalLetsTheFeedIn() {
        var policy = Self.started()
        #expect(Self.take(&policy, 0, now: 5) == .sweep)
        policy.swept()
        #expect(policy.next(now: 11) == .settled)   // due again already: after the feed's turn
        #expect(policy.next(now: 11) == .take(limit: 8, until: 10))
        policy.taken(2)
        #expect(policy.next(now: 11) == .apply(2))
    }

    @Test func idleWaitsForItsNextDeadlineOnly() {
        var policy = BatchPolicy(Self.settings, connected: true, now: 0)
        #expect(policy.next(now: 0) == .take(limit: 8, until: nil))   // not started: nothing due
        policy.taken(0)
        #expect(policy.next(now: 0) == .settled)
        policy = Self.started()
        #expect(Self.take(&policy, 0, now: 0.5) == .settled)
        #expect(policy.next(now: 0.5) == .take(limit: 8, until: 5))   // the sweep
        policy.taken(1)
        #expect(policy.next(now: 1) == .apply(1))
        policy.applied()
        #expect(Self.settle(&policy, now: 5) == .take(limit: 8, until: 10))   // swept at 5: the next at 10
        policy.metricsDue = 7
        policy.taken(0)
        #expect(Self.settle(&policy, now: 6) == .take(limit: 8, until: 7))
        policy.metricsDue = nil
        policy.taken(0)
        #expect(Self.settle(&policy, now: 10) == .take(limit: 8, until: 15))
        policy.taken(0)
        #expect(Self.settle(&policy, now: 58) == .take(limit: 8, until: 60))   // the minute's figures
        #expect(!policy.figuresDue(now: 59.9) && policy.figuresDue(now: 60))
    }
}
