import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup

/// The event loop's waiting: the next input from the inbox, the hosted lines and broker socket, or a deadline.
extension AgentRuntime {
    /// Acknowledged events' removals wait for the next event's write; when none comes within `outboxWriteWait`,
    /// they are written alone. After a failed write the disk is tried again the same way, the wait doubling up to
    /// `outboxRetryLongest`. A compaction that is due is done at once, but after every input already waiting (a
    /// deadline that has passed only counts once the inbox is empty): never in an event's way. A deadline only while
    /// something waits: nothing wakes an idle loop.
    func scheduleOutboxWrite() {
        if !session.outboxHasUnwrittenChanges {
            deadlines.outboxWrite = nil
            outboxWriteWait = AgentRuntime.outboxWriteWait
        } else if session.outboxCompactionDue && outboxWriteWait == AgentRuntime.outboxWriteWait {
            deadlines.outboxWrite = 0
        } else if deadlines.outboxWrite == nil {
            deadlines.outboxWrite = coarseMonotonicNanoseconds() + outboxWriteWait.nanosecondCount
        }
    }

    static let outboxWriteWait = Duration.seconds(2)
    static let outboxRetryLongest = Duration.seconds(64)

    /// The next input; nil once `deadline` has passed. While the link's live connection is hosted here, its socket
    /// is watched too and its rounds run on this thread: the PUBACKs and commands they bring come in as inputs,
    /// with no hop between threads (and no lock shared with another thread inside libmosquitto).
    func nextInput(until deadline: Int64?) -> AgentInput? {
        while true {
            let edges = source.hostedPoll()
            let uplink = link.hostedPoll()
            watching.removeAll(keepingCapacity: true)
            if let edges { watching.append(contentsOf: edges.slots) }
            if let uplink { watching.append(pollfd(fd: uplink.fd, events: uplink.events, revents: 0)) }
            // The lines' and the link's own deadlines (milliseconds) too: no array built for them on every input.
            let until = earliestOf(deadline, earliestOf(edges?.due.map { $0 * 1_000_000 }, uplink?.due.map { $0 * 1_000_000 }))
            switch inbox.wait(until: until, watching: watching) {
            case .input(let input):
                return input
            case .watched(let ready):
                // Edges first: they become the next input (the line queue's nudge), before what the broker sent.
                if let edges, ready.prefix(edges.slots.count).contains(where: { $0.revents != 0 }) {
                    source.serviceHosted(revents: ready.prefix(edges.slots.count).map(\.revents))
                }
                if uplink != nil, let last = ready.last, last.revents != 0 { link.serviceHosted(revents: last.revents) }
            case .deadline:
                // A recheck of the lines or the keepalive, if that was what was due.
                if let edges, edges.due != nil { source.serviceHosted(revents: Array(repeating: 0, count: edges.slots.count)) }
                if uplink?.due != nil { link.serviceHosted(revents: 0) }
                if let deadline, deadline <= monotonicNanoseconds() {
                    // An edge the kernel stamped before the deadline, waiting while the loop was busy (a slow sync),
                    // reaches the garage before the deadline's timer, or a filter would expire on a change that had
                    // already ended. One look after the deadline sees every such edge: once per passed deadline.
                    if let edges, lastEdgeLook < deadline {
                        lastEdgeLook = monotonicNanoseconds()
                        var ready = edges.slots
                        if poll(&ready, nfds_t(ready.count), 0) > 0 && ready.contains(where: { $0.revents != 0 }) {
                            source.serviceHosted(revents: ready.map(\.revents))
                            continue
                        }
                    }
                    return nil
                }
            }
        }
    }

    /// The input a passed deadline stands for (the loop woke for it): the garage's timer, or the watchdog and
    /// the clock. Nil when none has passed yet.
    func due() -> AgentInput? {
        let now = realNow()
        if let timer, timer.real <= now { return .tick }
        if let status = deadlines.status, status <= now { return .statusDue }
        return deadlines.housekeepingPassed(now) ? .housekeeping : nil
    }
}
