import Foundation
import Testing
import TestSupport

/// A graceful stop against a broker that acknowledges nothing waits out its grace (3 s), however
/// busy the garage's own timers are: only the grace ends the wait.
@Suite struct StopGraceTests {
    /// Two spot sensors taking turns every 2 s for 33 simulated minutes: a filter falls due every second.
    func turnsTrace(_ dir: URL) throws -> String {
        let lines = (0..<1000).map { i in
            "{\"t_ms\": \(i * 2000), \"input\": \"GPIO\(i % 2 == 0 ? 22 : 23)\", \"value\": \(i % 4 < 2 ? 1 : 0)}"
        }
        return try writeTrace(dir, lines.joined(separator: "\n"))
    }

    @Test func aStopWaitsTheWholeGraceWhileGarageTimersKeepFiring() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let proxy = try BlackHoleProxy(to: broker.port)
        // 10000 times real time: a garage timer falls due every 0.1 ms, faster than events are written, so the
        // stop begins while the loop still catches up and the garage's timers keep falling due during the grace.
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try turnsTrace(dir),
                                            "--speed", "10000", "--broker", "mqtt://127.0.0.1:\(proxy.port)",
                                            "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { subscriber.events().count >= 3 }, "\(agent.stderr)")
        proxy.swallow()   // connected as far as the agent knows, but nothing is acknowledged any more
        agent.signal(SIGTERM)
        #expect(eventually(40) { agent.stderr.contains("info stopping") })
        let stopping = ContinuousClock.now
        #expect(agent.wait(10) == 0)
        let took = ContinuousClock.now - stopping
        #expect(took >= .milliseconds(2500), "the stop ended \(took) after it began, before its grace")
        #expect(agent.stderr.contains("broker did not acknowledge everything before stopping"), "\(agent.stderr.suffix(1500))")
        subscriber.stop()
        proxy.stop()
    }
}

/// A stop is not queued behind work: with tens of thousands of line changes waiting for the event
/// loop (each read stored with a disk sync), SIGTERM still ends the agent within its grace.
@Suite struct StopBehindABacklogTests {
    @Test func aStopOvertakesQueuedLineChanges() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        // 40,000 changes a millisecond apart at 10,000 times real time: they queue far faster than they are stored.
        let trace = try busyTrace(dir, count: 40_000, every: 1)
        let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir), "--replay", trace.path,
                                            "--speed", "10000", "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { subscriber.events().count >= 20 }, "\(agent.stderr)")
        agent.signal(SIGTERM)
        // Grace 3 s; a stop that waited for the backlog would take tens of seconds.
        #expect(agent.wait(8) == 0, "the stop waited behind the queue: \(agent.stderr.suffix(600))")
        #expect(agent.stderr.contains("info stopped"))
        subscriber.stop()
    }
}
