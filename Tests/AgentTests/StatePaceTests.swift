@testable import AgentKit
import Testing

/// The pace of retained states (in-process): a change after a quiet second goes at once, sooner ones wait for the
/// topic's second and go as one, topics keep their own pace, and a stop takes whatever waits.
@Suite struct StatePaceTests {
    /// The pace in a box: `#expect` takes no mutating call.
    final class Paced {
        var pace: StatePace
        init(topics: Int, every: Int64, slack: Int64 = 0) { pace = StatePace(topics: topics, every: every, slack: slack) }
        func changed(_ topic: Int, now: Int64) -> Bool { pace.changed(topic, now: now) }
        func takeDue(now: Int64) -> [Int] { pace.takeDue(now: now) }
        func takeAll(now: Int64) -> [Int] { pace.takeAll(now: now) }
        var due: Int64? { pace.due }
        var wake: Int64? { pace.wake }
    }

    let second: Int64 = 1_000_000_000

    @Test func aChangeAfterAQuietSecondGoesAtOnceSoonerOnesWaitAndGoAsOne() {
        let pace = Paced(topics: 3, every: second)
        #expect(pace.changed(0, now: 5 * second))              // the first ever: at once
        #expect(pace.due == nil)
        #expect(!pace.changed(0, now: 5 * second + 100))       // 100 ns later: waits
        #expect(pace.due == 6 * second)
        #expect(!pace.changed(0, now: 5 * second + 200))       // and again: still one topic waiting
        #expect(pace.takeDue(now: 6 * second - 1).isEmpty)     // not yet
        #expect(pace.takeDue(now: 6 * second) == [0])          // its second has passed: once
        #expect(pace.due == nil)
        #expect(pace.takeDue(now: 9 * second).isEmpty)
        #expect(!pace.changed(0, now: 6 * second + 1))         // sent at 6 s: the next waits until 7 s
        #expect(pace.due == 7 * second)
        #expect(pace.changed(1, now: 6 * second + 2))          // another topic keeps its own pace
        #expect(pace.changed(0, now: 20 * second) == false)    // (still waiting: the wait's state goes, not two)
        #expect(pace.takeDue(now: 20 * second) == [0])
        #expect(pace.changed(0, now: 22 * second))             // quiet since: at once
    }

    @Test func theDeadlineIsTheEarliestWaitingTopicsAndMovesOnAsTheyGo() {
        let pace = Paced(topics: 3, every: second)
        #expect(pace.changed(2, now: 0))
        #expect(pace.changed(1, now: second / 2))
        #expect(!pace.changed(1, now: second / 2 + 1))
        #expect(!pace.changed(2, now: second / 2 + 2))
        #expect(pace.due == second)                             // topic 2's (sent at 0) before topic 1's (at 0.5 s)
        #expect(pace.takeDue(now: second) == [2])
        #expect(pace.due == second + second / 2)
        #expect(pace.takeDue(now: 2 * second) == [1])
        #expect(pace.due == nil)
    }

    /// A waiting state may go from `due` (with whatever wakes the loop then), and the loop wakes for it alone at
    /// `due` plus the slack; the slack never lets a state go before its interval.
    @Test func aQuietLoopWakesForWaitingStatesASlackAfterTheyMayGo() {
        let pace = Paced(topics: 2, every: second, slack: second / 4)
        #expect(pace.wake == nil)
        #expect(pace.changed(0, now: 0))
        #expect(!pace.changed(0, now: 10))
        #expect(pace.due == second)
        #expect(pace.wake == second + second / 4)
        #expect(pace.takeDue(now: second - 1).isEmpty)          // the slack is no head start
        #expect(pace.takeDue(now: second + 1) == [0])           // an input after `due`: the state goes with it
        #expect(pace.wake == nil)
        #expect(!pace.changed(0, now: second + 2))              // sent at 1 s + 1: waits for 2 s + 1
        #expect(pace.wake == 2 * second + 1 + second / 4)
        #expect(pace.takeDue(now: 2 * second + 1 + second / 4) == [0])   // nothing came: the loop's own wake-up
    }

    @Test func aStopTakesEveryWaitingTopicAtOnce() {
        let pace = Paced(topics: 4, every: second)
        for topic in 0..<4 { #expect(pace.changed(topic, now: 0)) }
        #expect(!pace.changed(3, now: 1))
        #expect(!pace.changed(1, now: 2))
        #expect(pace.takeAll(now: 3) == [3, 1])
        #expect(pace.due == nil)
        #expect(pace.takeDue(now: 10 * second).isEmpty)
        #expect(!pace.changed(3, now: 4))                       // sent at the stop's instant: paced from there
    }
}
