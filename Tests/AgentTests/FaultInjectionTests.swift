import Foundation
import TestSupport
import Testing

/// Eight spots with no debounce, so every line change in a trace is one event.
func writeBusyGarage(_ dir: URL, capacity: Int = 200, keepalive: String = "30s", statusEvery: String? = nil) throws -> String {
    let path = dir.appendingPathComponent("busy.yaml").path
    var yaml = """
    site: testsite
    device: busy
    board: simulated
    mqtt: { keepalive: \(keepalive)\(statusEvery.map { ", status_every: \($0)" } ?? "") }
    outbox: { capacity: \(capacity) }
    levels: [ { id: P1, capacity: 20 } ]
    spots:

    """
    for s in 1...8 {
        yaml += "  - { id: P1-A-0\(s), input: GPIO\(s + 1), delayed_on: 0, delayed_off: 0, chatter_limit: 10000, checkin_after: 1d }\n"
    }
    try yaml.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// `count` alternating changes spread over the eight spots, `every` ms apart.
func busyTrace(_ dir: URL, count: Int, every: Int = 10, name: String = "busy.jsonl") throws -> (path: String, final: [String: String]) {
    var lines: [String] = []
    var level = Array(repeating: false, count: 8)
    for i in 0..<count {
        let s = i % 8
        level[s].toggle()
        lines.append("{\"t_ms\": \(i * every), \"input\": \"GPIO\(s + 2)\", \"value\": \(level[s] ? 1 : 0)}")
    }
    let path = dir.appendingPathComponent(name).path
    try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    var final: [String: String] = [:]
    for s in 0..<8 { final["P1-A-0\(s + 1)"] = level[s] ? "occupied" : "free" }
    return (path, final)
}

/// Checks the at-least-once, in-order contract on what a subscriber saw: seq increases in order of
/// first arrival, and a seq seen twice always has the same id.
func checkDelivery(_ events: [[String: Any]], sourceLocation: SourceLocation = #_sourceLocation) -> [Int: String] {
    var idBySeq: [Int: String] = [:]
    var firstArrival: [Int] = []
    for e in events {
        guard let seq = e["seq"] as? Int, let id = e["id"] as? String else {
            Issue.record("event without seq or id", sourceLocation: sourceLocation)
            continue
        }
        if let known = idBySeq[seq] {
            #expect(known == id, "seq \(seq) arrived with two ids", sourceLocation: sourceLocation)
        } else {
            idBySeq[seq] = id
            firstArrival.append(seq)
        }
    }
    #expect(firstArrival == firstArrival.sorted(), "first arrivals out of seq order", sourceLocation: sourceLocation)
    return idBySeq
}

@Suite(.serialized) struct FaultInjectionTests {
    let prefix = "parkwise/v1/testsite/busy"

    /// 500 events while the broker is down: never more than 200 on disk, every spot's latest state
    /// right after reconnecting, and the gap declared by an `outbox.dropped` event.
    @Test func fiveHundredEventsOfflineKeepTwoHundredAndDeclareTheGap() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let trace = try busyTrace(dir, count: 500)
        let outbox = dir.path + "/outbox"
        let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir), "--replay", trace.path,
                                            "--broker", broker.url, "--outbox", outbox])
        var most = 0
        let finished = eventually(30) {
            most = max(most, pendingOnDisk(outbox + "/outbox.log").pending.count)
            return agent.stderr.contains("trace finished")
        }
        #expect(finished)
        #expect(most <= 200, "at most 200 events on disk, saw \(most)")
        #expect(most >= 150, "the outbox did fill up (\(most))")
        #expect(pendingOnDisk(outbox + "/outbox.log").pending.count == 200)

        try broker.start()
        try subscriber.listen()
        #expect(eventually(20) { subscriber.events().contains { $0["type"] as? String == "outbox.dropped" } }, "\(agent.stderr)")
        let events = subscriber.events()
        let ids = checkDelivery(events)
        #expect(ids.count == 201)
        let gap = try #require(events.first { $0["type"] as? String == "outbox.dropped" })
        #expect(gap["dropped"] as? Int == 300)
        #expect(gap["first_seq"] as? Int == 1)
        #expect((gap["last_seq"] as? Int ?? 0) <= 500)
        #expect(gap["seq"] as? Int == 501)
        // Every spot's latest state, retained, right after reconnecting.
        let states = try retainedMessages(broker, prefix + "/state/spot/#")
        #expect(states.count == 8)
        for state in states {
            let spot = String(state.topic.split(separator: "/").last!)
            #expect(state.json["state"] as? String == trace.final[spot], "\(spot)")
        }
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// The broker dies and comes back five times while events flow: every event arrives, in order.
    @Test func aBrokerRestartedManyTimesLosesNothing() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let trace = try busyTrace(dir, count: 120, every: 50)
        let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir), "--replay", trace.path,
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        func arrived() -> Int { Set(subscriber.events().compactMap { $0["seq"] as? Int }).count }
        func losses() -> Int { agent.stderr.components(separatedBy: "uplink lost").count - 1 }
        for round in 1...5 {
            // Events flow (or all have come), the broker dies, the agent notices, the broker returns.
            let before = arrived()
            #expect(eventually(15) { arrived() > before || arrived() >= 120 }, "round \(round): \(agent.stderr)")
            broker.stop()
            #expect(eventually(15) { losses() >= round }, "round \(round): \(agent.stderr)")
            try broker.start()
        }
        #expect(eventually(30) { arrived() >= 120 }, "\(arrived()) of 120; \(agent.stderr)")
        let ids = checkDelivery(subscriber.events())
        #expect(Set(ids.keys) == Set(1...120))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// The next block of seqs is reserved at an idle moment before the block in use runs out, so no event waits for
    /// the ledger and the state file: a run killed after 40 paced events had already reserved past the first block of
    /// 64, and the next start declares all of that as never sent, from 41 on.
    @Test func theNextBlockOfSeqsIsReservedBeforeItIsNeeded() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        let first = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: 40, every: 20).path,
                                            "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(20) { subscriber.events().count >= 40 }, "\(first.stderr)")
        // The next block is reserved at an idle moment once seq 32 is used: wait for it on disk before the kill, so a
        // loop that fell behind on a slow disk (seqs 33-40 in its last batch) cannot make the kill come first.
        func reservedOnDisk() -> Int? {
            let data = try? Data(contentsOf: URL(fileURLWithPath: outbox + "/device-state.json"))
            return (data.flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any])?["seq"] as? Int
        }
        #expect(eventually(10) { (reservedOnDisk() ?? 0) > 64 }, "seq reserved on disk: \(reservedOnDisk() ?? -1)")
        first.signal(SIGKILL)
        _ = first.wait(5)
        let second = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(temporaryDirectory(), ""),
                                             "--broker", broker.url, "--outbox", outbox])
        func dropped() -> [String: Any]? { subscriber.events().first { $0["type"] as? String == "outbox.dropped" } }
        #expect(eventually(15) { dropped() != nil }, "\(second.stderr)")
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0)
        subscriber.stop()
        #expect(dropped()?["first_seq"] as? Int == 41, "\(dropped() ?? [:])")
        #expect((dropped()?["last_seq"] as? Int ?? 0) > 64, "reserved ahead past the first block: \(dropped() ?? [:])")
        #expect((dropped()?["last_seq"] as? Int ?? .max) <= 40 + 96, "at most one and a half blocks: \(dropped() ?? [:])")
        // The second run counts on past the declared range: no reserved seq is used twice.
        #expect((dropped()?["seq"] as? Int ?? 0) > (dropped()?["last_seq"] as? Int ?? .max), "\(dropped() ?? [:])")
        // At least once: acknowledged events whose removal was not on disk yet come again, with the same seq.
        #expect(Set(subscriber.events().filter { $0["type"] as? String != "outbox.dropped" }.compactMap { $0["seq"] as? Int })
                == Set(1...40))
    }

    /// The seqs the `outbox.dropped` events among `events` declare.
    private func declaredSeqs(_ events: [[String: Any]]) -> Set<Int> {
        events.filter { $0["type"] as? String == "outbox.dropped" }.reduce(into: Set<Int>()) { set, e in
            if let a = e["first_seq"] as? Int, let b = e["last_seq"] as? Int, a <= b { set.formUnion(a...b) }
        }
    }

    /// `kill -9` at random moments while the broker is away: every event the outbox accepted (on
    /// disk) arrives after the last restart, in seq order, each seq with one id; every other seq is declared, and none
    /// that arrived.
    @Test func killNineAtRandomMomentsLosesNothingAccepted() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let config = try writeBusyGarage(dir)
        let trace = try busyTrace(dir, count: 150, every: 5)
        let outbox = dir.path + "/outbox"
        var accepted: [Int: String] = [:]
        var random = SystemRandomNumberGenerator()
        for _ in 0..<10 {
            let agent = try Child(agentBinary, ["run", "--config", config, "--replay", trace.path,
                                                "--broker", broker.url, "--outbox", outbox])
            usleep(UInt32.random(in: 100_000...900_000, using: &random))
            agent.signal(SIGKILL)
            _ = agent.wait(5)
            for (seq, id) in acceptedEvents(outbox + "/outbox.log") { accepted[seq] = id }
        }
        #expect(accepted.count > 10, "the runs did accept events (\(accepted.count))")
        let wanted = Set(pendingOnDisk(outbox + "/outbox.log").pending.map(Int.init))
        #expect(!wanted.isEmpty)
        try broker.start()
        try subscriber.listen()
        let last = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                           "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(20) { wanted.isSubset(of: Set(subscriber.events().compactMap { $0["seq"] as? Int })) },
                "\(last.stderr)")
        let ids = checkDelivery(subscriber.events())
        for seq in wanted { #expect(ids[seq] == accepted[seq], "seq \(seq) keeps its id") }
        // Every seq the killed runs may have used arrives or is declared dropped (their last reserved blocks, events given
        // up by the full outbox), one exact range per announcement, announced one after the other.
        func missing(_ events: [[String: Any]]) -> Set<Int> {
            let lastBoot = events.compactMap { $0["boot"] as? Int }.max()
            let start = events.filter { $0["boot"] as? Int == lastBoot }.compactMap { $0["seq"] as? Int }.min() ?? 1
            return Set(1..<start).subtracting(events.compactMap { $0["seq"] as? Int }).subtracting(declaredSeqs(events))
        }
        #expect(eventually(20) { missing(subscriber.events()).isEmpty }, "\(last.stderr)")
        last.signal(SIGTERM)
        #expect(last.wait(10) == 0)
        try subscriber.drain()
        let events = subscriber.events()
        #expect(missing(events).isEmpty, "seqs neither arrived nor declared: \(missing(events).sorted())")
        // A declared seq never arrives: no event (nor announcement) of a declared seq reached the backend.
        let arrived = Set(events.compactMap { $0["seq"] as? Int })
        #expect(declaredSeqs(events).isDisjoint(with: arrived), "declared and arrived: \(declaredSeqs(events).intersection(arrived).sorted())")
        for e in events where e["type"] as? String == "outbox.dropped" {
            #expect(e["dropped"] as? Int == (e["last_seq"] as? Int ?? 0) - (e["first_seq"] as? Int ?? 0) + 1, "an exact range: \(e)")
        }
        subscriber.stop()
    }

    /// A link that silently swallows everything (half-open): keepalive notices, the agent
    /// reconnects, and what was sent into the void arrives.
    @Test func aBlackHoledLinkIsDetectedAndNothingIsLost() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let proxy = try BlackHoleProxy(to: broker.port)
        let trace = try busyTrace(dir, count: 40, every: 250)
        let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir, keepalive: "5s"),
                                            "--replay", trace.path, "--broker", "mqtt://127.0.0.1:\(proxy.port)",
                                            "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { subscriber.events().count >= 5 })
        proxy.swallow()   // existing connections go silent; new ones are forwarded
        #expect(eventually(30) { Set(subscriber.events().compactMap { $0["seq"] as? Int }).count >= 40 }, "\(agent.stderr)")
        let ids = checkDelivery(subscriber.events())
        #expect(Set(ids.keys) == Set(1...40))
        #expect(agent.stderr.contains("uplink lost"))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
        proxy.stop()
    }
}

/// Seq -> id of every event an outbox file holds as added (acknowledged or not).
func acceptedEvents(_ path: String) -> [Int: String] {
    var found: [Int: String] = [:]
    for record in outboxRecords(path) {
        if let event = addedEvent(record), let seq = event["seq"] as? Int, let id = event["id"] as? String { found[seq] = id }
    }
    return found
}

@Suite(.serialized) struct DiskFaultTests {
    let prefix = "parkwise/v1/testsite/busy"

    /// The next start finds a directory where the outbox file should be (it cannot open it): started with a broker and
    /// a subscriber, until its `outbox.dropped` arrives.
    func restartWithTheOutboxUnreadable(_ dir: URL, config: String, outbox: String) throws -> (Child, Subscriber, Broker) {
        try FileManager.default.moveItem(atPath: outbox + "/outbox.log", toPath: dir.path + "/outbox.log.away")
        try FileManager.default.createDirectory(atPath: outbox + "/outbox.log", withIntermediateDirectories: false)
        return try startWithABroker(dir, config: config, outbox: outbox, until: "outbox.dropped")
    }

    /// The agent started on `outbox` (an empty trace) with a fresh broker and a subscriber, until an event of `type` arrives.
    func startWithABroker(_ dir: URL, config: String, outbox: String, until type: String) throws -> (Child, Subscriber, Broker) {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(10) { subscriber.events().contains { $0["type"] as? String == type } }, "\(agent.stderr)")
        return (agent, subscriber, broker)
    }

    /// SIGTERM, a clean exit, and the subscriber stopped.
    func stopCleanly(_ agent: Child, _ subscriber: Subscriber) {
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// A first run that stores six events with no broker to take them, and stops cleanly.
    func leaveSixPendingEvents(_ dir: URL, config: String, outbox: String) throws {
        try runOffline(config: config, outbox: outbox, trace: try busyTrace(dir, count: 6).path)
    }

    /// A run of `trace` with no broker to take its events, stopped cleanly once the trace has been played.
    func runOffline(config: String, outbox: String, trace: String) throws {
        let first = try Child(agentBinary, ["run", "--config", config, "--replay", trace,
                                            "--broker", "mqtt://127.0.0.1:\(freePort())", "--outbox", outbox])
        #expect(eventually(10) { first.stderr.contains("trace finished") })
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)
    }

    /// A damaged outbox at start: the agent keeps running, keeps the file aside, says so with a
    /// fault event, delivers every event it could read (reading on past the damage), and declares
    /// the one record the damage took: every seq arrives or is declared dropped.
    @Test func aDamagedOutboxAtStartIsReportedAndItsReadableEventsDelivered() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try leaveSixPendingEvents(dir, config: config, outbox: outbox)
        let log = outbox + "/outbox.log"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
        #expect(pendingOnDisk(log).pending == [1, 2, 3, 4, 5, 6])
        bytes[recordsEnd(bytes) / 2] ^= 0x5A
        try Data(bytes).write(to: URL(fileURLWithPath: log))

        let (second, subscriber, broker) = try startWithABroker(dir, config: config, outbox: outbox, until: "outbox.fault")
        defer { withExtendedLifetime(broker) {} }
        let events = subscriber.events()
        let fault = try #require(events.first { $0["type"] as? String == "outbox.fault" })
        #expect((fault["reason"] as? String)?.contains("kept aside") == true)
        #expect(eventually(10) { subscriber.events().contains { $0["type"] as? String == "outbox.dropped" } }, "\(second.stderr)")
        let all = subscriber.events()
        let delivered = all.compactMap { $0["type"] as? String == "spot.occupied" || $0["type"] as? String == "spot.vacated" ? $0["seq"] as? Int : nil }
        let drop = try #require(all.first { $0["type"] as? String == "outbox.dropped" })
        let declared = Set((drop["first_seq"] as? Int ?? 0)...(drop["last_seq"] as? Int ?? 0))
        #expect(delivered.count == 5 && delivered == delivered.sorted(), "all but the damaged record, in order: \(delivered)")
        #expect(Set(delivered).union(declared).isSuperset(of: 1...6), "delivered \(delivered), declared \(declared)")
        #expect(declared.intersection(delivered).isEmpty, "only what did not come is declared: \(declared)")
        #expect(second.stderr.contains("outbox repaired at start"))
        let aside = try FileManager.default.contentsOfDirectory(atPath: outbox).filter { $0.hasPrefix("outbox.log.corrupt-") }
        #expect(aside.count == 1)
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0)
        subscriber.stop()
    }

    /// The outbox file cannot be read at the next start (here: a directory where it should be; an I/O error of the disk
    /// takes the same way): it is moved aside, never read again, a new file takes its place, and the last run's pending
    /// events, unreadable now, are declared dropped. A later start that could read it would send declared seqs (issue
    /// 32, defect 2: 1,143 seqs arrived after their declaration).
    @Test func anOutboxThatCannotBeReadIsSetAsideAndDeclaresTheLastRunsPendingEvents() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try leaveSixPendingEvents(dir, config: config, outbox: outbox)
        #expect(pendingOnDisk(outbox + "/outbox.log").pending == [1, 2, 3, 4, 5, 6])
        let (second, subscriber, broker) = try restartWithTheOutboxUnreadable(dir, config: config, outbox: outbox)
        defer { withExtendedLifetime(broker) {} }
        let drop = try #require(subscriber.events().first { $0["type"] as? String == "outbox.dropped" })
        let declared = (drop["first_seq"] as? Int ?? 0)...(drop["last_seq"] as? Int ?? 0)
        #expect(declared.contains(1) && declared.contains(6), "the last run's six pending events: \(drop)")
        #expect(second.stderr.contains("was a directory, not a regular file: moved aside as \(outbox)/outbox.log.not-regular-"),
                "\(second.stderr)")
        #expect(!second.stderr.contains("outbox unusable"), "a durable outbox again: \(second.stderr)")
        stopCleanly(second, subscriber)
        var st = stat()
        #expect(lstat(outbox + "/outbox.log", &st) == 0 && st.st_mode & S_IFMT == S_IFREG, "a new outbox file in its place")
        // The next start reads the new file only: no declared seq arrives.
        let laterBroker = try Broker()
        let later = try Subscriber(laterBroker)
        try later.listen()
        let third = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                            "--broker", laterBroker.url, "--outbox", outbox])
        #expect(eventually(10) { later.messages.contains { $0.topic.hasSuffix("/status") && $0.json["boot"] as? Int == 3 } },
                "\(third.stderr)")
        try later.drain()
        #expect(later.events().allSatisfy { !declared.contains($0["seq"] as? Int ?? 0) }, "declared seqs never arrive: \(later.events())")
        stopCleanly(third, later)
    }

    /// As above after an overflow: the state file's drops say nothing of what the unreadable file held, so every seq
    /// the last run had not settled is declared, below its highest drop too.
    @Test func anOutboxThatCannotBeReadAfterAnOverflowDeclaresAllItHeld() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir, capacity: 3)
        let outbox = dir.path + "/outbox"
        // P1-A-02's first change (seq 2) is superseded by its second (seq 4): given up when the fourth event comes,
        // while seq 1 stays held, below that drop.
        let trace = try writeTrace(dir, [(0, 2, 1), (10, 3, 1), (20, 4, 1), (30, 3, 0)]
            .map { #"{"t_ms": \#($0.0), "input": "GPIO\#($0.1)", "value": \#($0.2)}"# }.joined(separator: "\n"))
        try runOffline(config: config, outbox: outbox, trace: trace)
        let held = pendingOnDisk(outbox + "/outbox.log").pending
        #expect(held == [1, 3, 4])
        let (second, subscriber, broker) = try restartWithTheOutboxUnreadable(dir, config: config, outbox: outbox)
        defer { withExtendedLifetime(broker) {} }
        let declared = subscriber.events().filter { $0["type"] as? String == "outbox.dropped" }
            .flatMap { ($0["first_seq"] as? Int ?? 0)...($0["last_seq"] as? Int ?? 0) }
        #expect(Set(held.map { Int($0) }).isSubset(of: Set(declared)), "held \(held), declared \(declared)")
        stopCleanly(second, subscriber)
    }

    /// The outbox overflows while the broker is away, and the agent restarts twice before it comes back: the drops
    /// are announced once, with their true count (the drop records, kept until the next compaction, are not counted
    /// again at each start).
    @Test func dropsAreCountedOnceAcrossRestarts() throws {
        let dir = temporaryDirectory()
        // Three drops and no compaction (its dead records stay under the capacity): the drop records are still in
        // the file at each start.
        let config = try writeBusyGarage(dir, capacity: 10)
        let outbox = dir.path + "/outbox"
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        for (n, trace) in [try busyTrace(dir, count: 13).path, try writeTrace(dir, ""), try writeTrace(dir, "")].enumerated() {
            let run = try Child(agentBinary, ["run", "--config", config, "--replay", trace, "--broker", broker.url, "--outbox", outbox])
            #expect(eventually(10) { run.stderr.contains("trace finished") }, "run \(n): \(run.stderr)")
            run.signal(SIGTERM)
            #expect(run.wait(10) == 0)
        }
        try broker.start()
        try subscriber.listen()
        let last = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                           "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(15) { subscriber.events().contains { $0["type"] as? String == "outbox.dropped" } }, "\(last.stderr)")
        let drops = subscriber.events().filter { $0["type"] as? String == "outbox.dropped" }
        #expect(drops.count == 1, "\(drops)")
        let drop = try #require(drops.first)
        let span = (drop["last_seq"] as? Int ?? 0) - (drop["first_seq"] as? Int ?? 0) + 1
        #expect((drop["dropped"] as? Int ?? 0) == 3 && span >= 3, "13 events, 10 kept: \(drop)")
        stopCleanly(last, subscriber)
    }

    /// The disk fills up (a file-size limit here): events stay in memory, a fault event and one log
    /// line say so, nothing is lost, and nothing crashes.
    @Test func aFullDiskKeepsEventsInMemoryAndSaysSo() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let trace = try busyTrace(dir, count: 60, every: 20)
        // 12 kB: the outbox file fills after a few dozen events.
        let agent = try Child("/usr/bin/prlimit", ["--fsize=12000", agentBinary, "run", "--config", try writeBusyGarage(dir),
                                                   "--replay", trace.path, "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { agent.stderr.contains("trace finished") })
        #expect(agent.stderr.split(separator: "\n").filter { $0.contains("outbox cannot write to disk") }.count == 1, "\(agent.stderr)")
        try broker.start()
        try subscriber.listen()
        #expect(eventually(20) { subscriber.events().contains { $0["type"] as? String == "outbox.fault" } }, "\(agent.stderr)")
        #expect(eventually(10) { Set(subscriber.events().compactMap { $0["seq"] as? Int }).isSuperset(of: Set(1...60)) })
        let fault = try #require(subscriber.events().first { $0["type"] as? String == "outbox.fault" })
        #expect((fault["reason"] as? String)?.contains("File too large") == true)
        _ = checkDelivery(subscriber.events())
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }
}

/// The sequence promise across crashes and damaged state: a seq is never used twice, and every seq
/// below the next run's first one arrived or lies in a declared `outbox.dropped` range.
@Suite(.serialized) struct SequencePromiseTests {
    let prefix = "parkwise/v1/testsite/busy"

    /// The agent on `dir`'s busy garage, its state directory refusing every write: a file-size limit of 10 bytes (the
    /// ledger, both state files and the outbox fail, as on an SD card ext4 has remounted read-only), a soft one that
    /// `prlimit --pid` can lift while it runs.
    func agentOnARefusingDisk(_ dir: URL, _ broker: Broker, trace: String, capacity: Int = 200,
                              statusEvery: String? = nil) throws -> Child {
        try Child("/usr/bin/prlimit", ["--fsize=10:unlimited", agentBinary, "run", "--config",
                                       try writeBusyGarage(dir, capacity: capacity, statusEvery: statusEvery), "--replay", trace,
                                       "--broker", broker.url, "--outbox", dir.path + "/outbox"])
    }

    /// The disk takes writes again: the running agent's file-size limit lifted.
    func liftTheLimit(of agent: Child) -> Bool {
        (try? Child("/usr/bin/prlimit", ["--pid", "\(agent.pid)", "--fsize=unlimited"]).wait(5)) == 0
    }

    /// A command answered (a bad calibration, its reply): the agent's loop has handled everything before it.
    /// A command is answered. Sent again every 2 s until then (15 s at most): a command published before the agent's
    /// subscription is in place (it may still be connecting) is not kept for it, and an unknown level's calibration
    /// changes nothing however often it comes.
    func answered(_ broker: Broker, _ subscriber: Subscriber, id: String) -> Bool {
        eventually(15) {
            (try? publish(broker, prefix + "/cmd/calibrate", #"{"level": "P9", "count": 1, "id": "\#(id)"}"#)) != nil
                && eventually(2) { subscriber.messages.contains { $0.topic == prefix + "/reply" && $0.payload.contains(id) } }
        }
    }

    /// Seqs the `outbox.dropped` events declare.
    func declared(_ events: [[String: Any]]) -> Set<Int> {
        events.filter { $0["type"] as? String == "outbox.dropped" }.reduce(into: Set<Int>()) { set, e in
            if let first = e["first_seq"] as? Int, let last = e["last_seq"] as? Int, first <= last { set.formUnion(first...last) }
        }
    }

    /// A declared seq never arrives (CONTRACT.md), and each declaration names exactly the seqs it gives up.
    func expectNoDeclaredSeqArrived(_ events: [[String: Any]], sourceLocation: SourceLocation = #_sourceLocation) {
        let arrived = Set(events.filter { $0["type"] as? String != "outbox.dropped" }.compactMap { $0["seq"] as? Int })
        #expect(declared(events).isDisjoint(with: arrived), "declared and arrived: \(declared(events).intersection(arrived).sorted())",
                sourceLocation: sourceLocation)
        for e in events where e["type"] as? String == "outbox.dropped" {
            #expect(e["dropped"] as? Int == (e["last_seq"] as? Int ?? 0) - (e["first_seq"] as? Int ?? 0) + 1, "inexact: \(e)",
                    sourceLocation: sourceLocation)
        }
    }

    /// The disk is full (the outbox cannot grow), then `kill -9`: the events held in memory are gone,
    /// but the next run counts on above every seq the first could have sent, and declares the loss.
    @Test func aFullDiskThenACrashReusesNoSeqAndDeclaresTheLoss() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        let first = try Child("/usr/bin/prlimit", ["--fsize=12000", agentBinary, "run", "--config", config,
                                                   "--replay", try busyTrace(dir, count: 60, every: 20).path,
                                                   "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(15) { first.stderr.contains("trace finished") && first.stderr.contains("outbox cannot write to disk") },
                "\(first.stderr)")
        first.signal(SIGKILL)
        _ = first.wait(5)

        try broker.start()
        try subscriber.listen()
        let second = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                             "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(20) { !declared(subscriber.events()).isEmpty }, "\(second.stderr)")
        try subscriber.drain()
        let events = subscriber.events()
        _ = checkDelivery(events)
        let secondRun = events.filter { $0["boot"] as? Int == 2 }.compactMap { $0["seq"] as? Int }
        let start = try #require(secondRun.min(), "the second run announced its drops")
        let firstRun = Set(events.filter { $0["boot"] as? Int == 1 }.compactMap { $0["seq"] as? Int })
        #expect(firstRun.allSatisfy { $0 < start }, "no seq of the first run is used again: \(firstRun.sorted()) vs \(start)")
        let covered = firstRun.union(declared(events))
        #expect(Set(1..<start).isSubset(of: covered), "missing: \(Set(1..<start).subtracting(covered).sorted())")
        expectNoDeclaredSeqArrived(events)
        #expect(second.stderr.contains("seqs of the last run unaccounted for"), "\(second.stderr)")
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0)
        subscriber.stop()
    }

    /// The outbox overflows while the state file cannot be saved (its writes refused; the ledger and the outbox's own
    /// reserve still take theirs), then a `kill -9`: the drops never reached the state file, yet the next run declares
    /// them, from the drop records the outbox synced with the batch that gave them up.
    @Test func dropsTheStateFileNeverHeldAreDeclaredAfterACrash() throws {
        let dir = temporaryDirectory()
        let outbox = dir.appendingPathComponent("outbox")
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let config = try writeBusyGarage(dir, capacity: 5)
        try leaveALedger(dir, config: config, broker: broker, outbox: outbox)
        try block(Self.stateFileTemps, in: outbox)
        let second = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: 20).path,
                                             "--broker", broker.url, "--outbox", outbox.path])
        #expect(eventually(15) { second.stderr.contains("trace finished") && second.stderr.contains("outbox full, events dropped") },
                "\(second.stderr)")
        second.signal(SIGKILL)
        _ = second.wait(5)

        try unblock(Self.stateFileTemps, in: outbox)
        try broker.start()
        try subscriber.listen()
        let third = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", outbox.path])
        #expect(eventually(20) { !declared(subscriber.events()).isEmpty }, "\(third.stderr)")
        try subscriber.drain()
        let events = subscriber.events()
        _ = checkDelivery(events)
        let covered = Set(events.filter { $0["boot"] as? Int == 2 }.compactMap { $0["seq"] as? Int }).union(declared(events))
        #expect(Set(1...20).isSubset(of: covered), "missing: \(Set(1...20).subtracting(covered).sorted()): \(third.stderr)")
        expectNoDeclaredSeqArrived(events)
        third.signal(SIGTERM)
        #expect(third.wait(10) == 0)
        subscriber.stop()
    }

    /// The state directory refuses every write (a file-size limit of 10 bytes: the ledger, both state files and the
    /// outbox fail, as on an SD card ext4 has remounted read-only): no seq beyond the last one reserved on disk is
    /// sent; once the disk takes writes again the events that waited go out; and after a `kill -9` the next run,
    /// counting on from the disk, sends no seq twice.
    @Test func aStateDirectoryThatRefusesEveryWriteSendsNoSeqItCouldUseAgain() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        // A first run leaves the ledger and the state file behind, stopped cleanly: seq 5 is exact on disk.
        let first = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: 5, every: 20).path,
                                            "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(15) { subscriber.events().count >= 5 }, "\(first.stderr)")
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)

        let second = try agentOnARefusingDisk(dir, broker, trace: try busyTrace(dir, count: 30, every: 20, name: "second.jsonl").path)
        #expect(eventually(15) { second.stderr.contains("trace finished") }, "\(second.stderr)")
        // Answered: every change of the trace was handled before, so whatever it would send is sent.
        #expect(answered(broker, subscriber, id: "after-trace"), "\(second.stderr)")
        #expect(second.stderr.contains("cannot reserve sequence numbers"), "\(second.stderr)")
        #expect(subscriber.events().allSatisfy { ($0["seq"] as? Int ?? 0) <= 5 }, "sent without a reservation on disk")
        func spotStateSeqs() -> [Int] {
            subscriber.messages.filter { $0.topic.contains("/state/spot/") }.compactMap { $0.json["seq"] as? Int }
        }
        #expect(spotStateSeqs().allSatisfy { $0 <= 5 }, "a state ahead of the events it includes: \(spotStateSeqs())")
        // The disk takes writes again (the limit lifted on the running agent): the reservation is tried again and the
        // events that waited for it go out, in order.
        #expect(liftTheLimit(of: second))
        #expect(eventually(20) { Set(subscriber.events().compactMap { $0["seq"] as? Int }).isSuperset(of: Set(1...35)) },
                "\(subscriber.events().compactMap { $0["seq"] as? Int }.sorted()) \(second.stderr)")
        #expect(second.stderr.contains("sequence numbers reserved again"), "\(second.stderr)")
        #expect(eventually(10) { spotStateSeqs().contains { $0 >= 35 } }, "the states follow their events: \(spotStateSeqs())")
        second.signal(SIGKILL)
        _ = second.wait(5)

        // The next run counts on from what the disk says, with events of its own.
        let third = try Child(agentBinary, ["run", "--config", config, "--replay",
                                            try busyTrace(dir, count: 5, every: 20, name: "third.jsonl").path,
                                            "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(15) { third.stderr.contains("trace finished") }, "\(third.stderr)")
        #expect(answered(broker, subscriber, id: "third-running"))
        third.signal(SIGTERM)
        #expect(third.wait(10) == 0)
        try subscriber.drain()
        subscriber.stop()
        // Each seq names one event: one id, whichever run sent it.
        var ids: [Int: Set<String>] = [:]
        for event in subscriber.events() {
            if let seq = event["seq"] as? Int, let id = event["id"] as? String { ids[seq, default: []].insert(id) }
        }
        let reused = ids.filter { $0.value.count > 1 }.keys.sorted()
        #expect(reused.isEmpty, "seqs sent twice with different events: \(reused)")
    }

    /// A state directory that refuses every write, with nothing to send: the reservation is tried again later, not
    /// in a loop (each try is a few write calls, which /proc/PID/io counts: a loop makes thousands a second).
    @Test func aStateDirectoryThatRefusesEveryWriteIsNotAskedInALoop() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try agentOnARefusingDisk(dir, broker, trace: try writeTrace(dir, ""))
        func writeCalls() -> Int? {
            (try? String(contentsOfFile: "/proc/\(agent.pid)/io", encoding: .utf8))?.split(separator: "\n")
                .first { $0.hasPrefix("syscw:") }.flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) }
        }
        #expect(eventually(15) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        #expect(answered(broker, subscriber, id: "settled"), "\(agent.stderr)")
        let before = try #require(writeCalls())
        #expect(answered(broker, subscriber, id: "idle-1") && answered(broker, subscriber, id: "idle-2")
                && answered(broker, subscriber, id: "idle-3"), "\(agent.stderr)")
        let after = try #require(writeCalls())
        // Three commands answered (a log line, the reply and libmosquitto's wake-up bytes each: about 7 write calls)
        // and at most one retry of the reservation: a few dozen. Asked in a loop, it was 560,000 and no reply came.
        #expect(after - before < 100, "write calls while idle: \(after - before)")
        // No event yet, but the disk's refusal is already there for a technician to see.
        let text = try runAgent(["status", "--config", dir.path + "/busy.yaml", "--outbox", dir.path + "/outbox"])
        #expect(text.out.contains("disk problem: cannot save the device state: "), "\(text.out) \(text.err)")
        agent.signal(SIGTERM)
        _ = agent.wait(10)
        subscriber.stop()
    }

    /// The last `status` the subscriber got, as JSON (empty: none yet).
    func lastStatus(_ subscriber: Subscriber) -> [String: Any] {
        subscriber.messages.last { $0.topic == prefix + "/status" }?.json ?? [:]
    }

    /// The retained status's `storage_fault` starts with `text`.
    func statusSays(_ subscriber: Subscriber, _ agent: Child, _ text: String) -> Bool {
        let said = eventually(15) { (lastStatus(subscriber)["storage_fault"] as? String)?.hasPrefix(text) == true }
        if !said { Issue.record("status: \(lastStatus(subscriber)), agent: \(agent.stderr)") }
        return said
    }

    /// After the disk came back: within its next try (the wait doubles from 2 s up to 64 s) the `events` arrive and the
    /// status says nothing more of the disk; then a clean stop.
    func recovers(_ agent: Child, _ subscriber: Subscriber, events: Int) {
        #expect(eventually(70) { subscriber.events().count >= events }, "the held events: \(agent.stderr)")
        #expect(eventually(70) { lastStatus(subscriber)["state"] as? String == "online" && lastStatus(subscriber)["storage_fault"] == nil },
                "\(lastStatus(subscriber)) \(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// Directories where the state directory's files (or their temporary copies) go: writing them fails.
    func block(_ names: [String], in outbox: URL) throws {
        for name in names { try FileManager.default.createDirectory(at: outbox.appendingPathComponent(name), withIntermediateDirectories: true) }
    }

    func unblock(_ names: [String], in outbox: URL) throws {
        for name in names { try FileManager.default.removeItem(at: outbox.appendingPathComponent(name)) }
    }

    static let stateFileTemps = ["device-state.json.tmp", "device-state.json.bak.tmp"]

    /// A first run with no events: it leaves the seq ledger and the state file behind.
    func leaveALedger(_ dir: URL, config: String, broker: Broker, outbox: URL) throws {
        let first = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", outbox.path])
        #expect(eventually(15) { first.stderr.contains("trace finished") }, "\(first.stderr)")
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)
    }

    /// A disk that refuses every write is said in the agent's retained status (`storage_fault`), where a backend sees
    /// it while the events are held (their `outbox.fault` waits with them); it is gone once the disk takes writes again.
    @Test func aDiskThatRefusesWritesIsSaidInTheRetainedStatus() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try agentOnARefusingDisk(dir, broker, trace: try busyTrace(dir, count: 6, every: 20).path, statusEvery: "1s")
        #expect(eventually(15) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        #expect(statusSays(subscriber, agent, "cannot reserve sequence numbers in "))
        #expect(lastStatus(subscriber)["state"] as? String == "online")
        #expect(subscriber.events().isEmpty, "sent while no seq reservation was on disk")
        // As the contract's schema has it (and an empty one would not be).
        let faulted = try #require(subscriber.messages.last { $0.topic == prefix + "/status" && $0.json["storage_fault"] != nil })
        let results = try SchemaCheck.validate([
            .init(schema: "status", label: "storage fault", payload: faulted.payload),
            .init(schema: "status", label: "empty", payload: SchemaCheck.mutated(faulted) { $0["storage_fault"] = "" })])
        #expect(results.first?.isEmpty == true, "\(results)")
        #expect(results.last?.isEmpty == false, "an empty storage_fault passed the schema")
        // And a technician's `status` on the board says it too.
        let text = try runAgent(["status", "--config", dir.path + "/busy.yaml", "--outbox", dir.path + "/outbox"])
        #expect(text.code == 0 && text.out.contains("disk problem: cannot reserve sequence numbers in "), "\(text.out) \(text.err)")
        #expect(liftTheLimit(of: agent))
        recovers(agent, subscriber, events: 6)
    }

    /// The outbox cannot grow (a full disk: a file-size limit the small ledger and state file stay under) while the
    /// broker is away, the seq reservations hold: on connecting, the status says the outbox's problem (the events are
    /// kept in memory, and sent); once the disk takes writes again it says nothing more.
    @Test func anOutboxThatCannotWriteIsSaidInTheRetainedStatus() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let agent = try Child("/usr/bin/prlimit", ["--fsize=12000:unlimited", agentBinary, "run", "--config",
                                                   try writeBusyGarage(dir, statusEvery: "1s"),
                                                   "--replay", try busyTrace(dir, count: 60, every: 20).path,
                                                   "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { agent.stderr.contains("trace finished") && agent.stderr.contains("outbox cannot write to disk") },
                "\(agent.stderr)")
        try broker.start()
        try subscriber.listen()
        func said() -> Bool {
            subscriber.messages.contains { message in
                guard message.topic == prefix + "/status", let fault = message.json["storage_fault"] as? String else { return false }
                return fault.hasPrefix("cannot write outbox file ") && fault.hasSuffix(": events are kept in memory until the disk takes writes again")
            }
        }
        #expect(eventually(15) { said() }, "\(subscriber.messages.filter { $0.topic == prefix + "/status" }.map(\.payload)) \(agent.stderr)")
        #expect(liftTheLimit(of: agent))
        recovers(agent, subscriber, events: 60)
    }

    /// The ledger works but the state file cannot be saved: events still go out, the status says the state file
    /// fails, and once it can be written again the agent's own retry saves it (no new event makes it try) and the
    /// status says nothing more.
    @Test func aStateFileThatCannotBeSavedIsTriedAgainAndSaidUntilItIs() throws {
        let dir = temporaryDirectory()
        let outbox = dir.appendingPathComponent("outbox")
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let config = try writeBusyGarage(dir, statusEvery: "1s")
        try leaveALedger(dir, config: config, broker: broker, outbox: outbox)
        try block(Self.stateFileTemps, in: outbox)
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: 6, every: 20).path,
                                            "--broker", broker.url, "--outbox", outbox.path])
        #expect(eventually(15) { agent.stderr.contains("trace finished") && subscriber.events().count >= 6 }, "\(agent.stderr)")
        #expect(statusSays(subscriber, agent, "cannot save the device state: "))
        try unblock(Self.stateFileTemps, in: outbox)
        recovers(agent, subscriber, events: 6)
    }

    /// Only the state directory refuses, the outbox writes: the events are held for want of a seq reservation on
    /// disk, and the retained status says that; once the state file can be written the events go out.
    /// (The ledger is an immutable file, which even root cannot open for writing: a directory in its place would be set
    /// aside by the start, as any non-file is.)
    @Test(.enabled(if: getuid() == 0, "needs root: chattr +i"))
    func eventsHeldForASeqReservationAreSaidInTheRetainedStatus() throws {
        let dir = temporaryDirectory()
        let outbox = dir.appendingPathComponent("outbox")
        try block(Self.stateFileTemps, in: outbox)
        let ledger = outbox.appendingPathComponent("seq.ledger").path
        #expect(FileManager.default.createFile(atPath: ledger, contents: nil))
        #expect(try Child("/usr/bin/chattr", ["+i", ledger]).wait(10) == 0)
        defer { _ = try? Child("/usr/bin/chattr", ["-i", ledger]).wait(10) }
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir, statusEvery: "1s"),
                                            "--replay", try busyTrace(dir, count: 6, every: 20).path,
                                            "--broker", broker.url, "--outbox", outbox.path])
        #expect(eventually(15) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        #expect(statusSays(subscriber, agent, "cannot reserve sequence numbers in "))
        #expect(subscriber.events().isEmpty, "sent while no seq reservation was on disk")
        try unblock(Self.stateFileTemps, in: outbox)
        recovers(agent, subscriber, events: 6)
    }

    /// The disk refuses, the broker is away and the outbox overflows; then both come back: the held events, the
    /// drops' announcement and the states the garage ended in all reach the broker (the announcement's save is what
    /// makes room, not a retry).
    @Test func statesHeldWithTheirEventsGoOutOnceDiskAndBrokerAreBack() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        broker.stop()
        let trace = try busyTrace(dir, count: 12, every: 20)
        let agent = try agentOnARefusingDisk(dir, broker, trace: trace.path, capacity: 5)
        #expect(eventually(15) { agent.stderr.contains("trace finished") && agent.stderr.contains("outbox full") }, "\(agent.stderr)")
        #expect(liftTheLimit(of: agent))
        try broker.start()
        try subscriber.listen()
        #expect(eventually(15) { subscriber.events().contains { $0["type"] as? String == "outbox.dropped" } }, "\(agent.stderr)")
        func finalStatesRetained() -> Bool {
            guard let states = try? retainedMessages(broker, prefix + "/state/spot/#"), states.count == 8 else { return false }
            return states.allSatisfy { $0.json["state"] as? String == trace.final[String($0.topic.split(separator: "/").last!)] }
        }
        #expect(eventually(10) { finalStatesRetained() }, "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// A stop while events wait for a reservation the disk refuses: the stop does not wait for acknowledgements that
    /// cannot come, and says how many events it leaves unsent from which seq.
    @Test func aStopWithEventsHeldForAReservationSaysSo() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try agentOnARefusingDisk(dir, broker, trace: try busyTrace(dir, count: 3, every: 20).path)
        #expect(eventually(15) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        #expect(answered(broker, subscriber, id: "after-trace"), "\(agent.stderr)")
        #expect(subscriber.events().isEmpty, "\(subscriber.events())")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
        let line = agent.stderr.split(separator: "\n").first { $0.contains("events left unsent at the stop") }
        // The trace's three events and the `outbox.fault` saying the disk refused them.
        #expect(line?.contains("events=4 first_seq=1") == true, "\(agent.stderr)")
        #expect(!agent.stderr.contains("broker did not acknowledge everything"), "\(agent.stderr)")
    }

    /// Both copies of device-state.json unreadable: `boot` and `seq` still go on from the ledger.
    @Test func anUnreadableDeviceStateNeverSendsBootOrSeqBack() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        for run in 1...2 {
            let agent = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: 4, every: 20).path,
                                                "--broker", broker.url, "--outbox", outbox])
            #expect(eventually(15) { subscriber.events().filter { $0["boot"] as? Int == run }.count >= 4 }, "\(agent.stderr)")
            agent.signal(SIGTERM)
            #expect(agent.wait(10) == 0)
            for name in ["device-state.json", "device-state.json.bak"] {
                try Data("{\"boot\": tru".utf8).write(to: URL(fileURLWithPath: outbox + "/" + name))
            }
        }
        try subscriber.drain()
        let events = subscriber.events()
        let seqs = events.compactMap { $0["seq"] as? Int }
        #expect(seqs == Array(1...8), "one count across both runs, no gap: \(seqs)")
        #expect(events.map { $0["boot"] as? Int } == [1, 1, 1, 1, 2, 2, 2, 2])
        subscriber.stop()
    }
}
