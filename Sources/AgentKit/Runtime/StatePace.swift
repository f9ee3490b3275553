/// The pace of the retained spot and level states (issue 37): a topic's state goes out at once when its last publish
/// is at least `every` old, and a change that comes sooner waits until then, when the topic's state *as it is then*
/// goes (one publish for any number of changes in between). A spot that changes once in minutes, as in a garage, is
/// published as soon as it changes; a burst of edges costs one spot and one level publish per topic and interval, not
/// one each per edge: events still go one per change (QoS 1, the history), states are snapshots.
///
/// A waiting state rides on the loop's next wake-up after `due` (an edge, a PUBACK); the loop wakes for it alone only
/// at `wake`, `slack` later, when nothing else woke it: while edges come, the pace costs no wake-up of its own (in the
/// VM bench one a second per agent, 2.3 voluntary switches per edge where the edge and its PUBACK make 2, each a cold
/// start for the emulated CPU).
///
/// Pure: topics are indices (spots first, then levels, as the runtime numbers them); times are real CLOCK_MONOTONIC
/// nanoseconds the caller reads. `due` is when a waiting topic may go, `wake` the deadline the loop sleeps until
/// while a topic waits (none otherwise).
struct StatePace {
    let every: Int64
    let slack: Int64
    /// When each topic's state last went out (`.min`: never).
    private var sentAt: [Int64]
    /// Topics whose newer state waits for its interval, in the order they began to wait.
    private var waiting: [Int] = []
    private var isWaiting: [Bool]
    /// The earliest instant a waiting topic may go (nil: none waits).
    private(set) var due: Int64?

    /// When the loop wakes for the waiting states if no input came after `due` (nil: none waits).
    var wake: Int64? { due.map { $0 + slack } }

    init(topics: Int, every: Int64, slack: Int64 = 0) {
        self.every = every
        self.slack = slack
        sentAt = Array(repeating: .min, count: topics)
        isWaiting = Array(repeating: false, count: topics)
    }

    /// The topic's state changed: true if it goes now (recorded as sent at `now`), false if it waits (see `takeDue`).
    mutating func changed(_ topic: Int, now: Int64) -> Bool {
        guard !isWaiting[topic] else { return false }
        if sentAt[topic] == .min || now - sentAt[topic] >= every {
            sentAt[topic] = now
            return true
        }
        isWaiting[topic] = true
        waiting.append(topic)
        let ready = sentAt[topic] + every
        due = due.map { min($0, ready) } ?? ready
        return false
    }

    /// The waiting topics whose interval has passed by `now`, recorded as sent at `now` (their current states go).
    mutating func takeDue(now: Int64) -> [Int] {
        guard let due, due <= now else { return [] }
        var ready: [Int] = []
        var next: Int64?
        waiting.removeAll { topic in
            let at = sentAt[topic] + every
            guard at <= now else {
                next = next.map { min($0, at) } ?? at
                return false
            }
            ready.append(topic)
            isWaiting[topic] = false
            sentAt[topic] = now
            return true
        }
        self.due = next
        return ready
    }

    /// Every waiting topic, whatever its interval (a stop: the broker keeps the latest state of each).
    mutating func takeAll(now: Int64) -> [Int] {
        let all = waiting
        for topic in all {
            isWaiting[topic] = false
            sentAt[topic] = now
        }
        waiting.removeAll()
        due = nil
        return all
    }

    /// One state per topic and interval: the interval the runtime uses.
    static let interval: Int64 = 1_000_000_000
    /// How long after `due` a quiet loop wakes for the waiting states: a state is at most this late.
    static let slack: Int64 = 250_000_000
}
