import Foundation
import TestSupport
import Testing

/// Line changes far faster than the agent can store events (a trace at 10000x, all changes at once, a line queue
/// of 8): the agent sheds changes before they become events and says so (`input.shed`), every input ends at its
/// true level (the retained spot states), and no seq is missing without a declaration. Memory staying flat under
/// such load is a benchmark figure (deploy/dev/soak.sh), not asserted here.
@Suite struct OverloadTests {
    let prefix = "parkwise/v1/testsite/burst"

    @Test func aBurstBeyondTheLineQueueIsShedDeclaredAndEndsInTheTrueState() throws {
        let dir = temporaryDirectory()
        let config = dir.appendingPathComponent("agent.yaml").path
        var yaml = "site: testsite\ndevice: burst\nboard: simulated\nlevels:\n  - { id: L1, capacity: 4 }\nspots:\n"
        for i in 0..<4 {
            yaml += "  - { id: L1-S\(i), input: GPIO\(i + 2), delayed_on: 0, delayed_off: 0, chatter_limit: 10000 }\n"
        }
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        // 1,200 changes per input, all at the same instant; inputs 0 and 2 end active, 1 and 3 inactive.
        let perInput = 1200
        var trace = ""
        for n in 0..<perInput {
            for i in 0..<4 {
                let last = n == perInput - 1
                let value = last ? (i % 2 == 0 ? 1 : 0) : (n % 2 == 0 ? 1 : 0)
                trace += #"{"t_ms": 500, "input": "GPIO\#(i + 2)", "value": \#(value)}"# + "\n"
            }
        }
        let tracePath = dir.appendingPathComponent("burst.jsonl").path
        try trace.write(toFile: tracePath, atomically: true, encoding: .utf8)

        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", tracePath, "--speed", "10000",
                                            "--line-queue", "8", "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        let expected = ["L1-S0": "occupied", "L1-S1": "free", "L1-S2": "occupied", "L1-S3": "free"]
        func states() -> [String: String] {
            let retained = (try? retainedMessages(broker, prefix + "/state/spot/#")) ?? []
            return Dictionary(retained.map { (String($0.topic.split(separator: "/").last!), $0.json["state"] as? String ?? "?") },
                              uniquingKeysWith: { $1 })
        }
        #expect(eventually(30) { agent.stderr.contains("trace finished") }, "\(agent.stderr)")
        #expect(eventually(20) { states() == expected }, "retained: \(states()); \(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        try subscriber.drain()
        subscriber.stop()

        let events = subscriber.events()
        let shed = events.filter { $0["type"] as? String == "input.shed" }
        #expect(!shed.isEmpty, "4,800 changes at once through a queue of 8 must shed some; \(agent.stderr)")
        let shedCount = shed.reduce(0) { $0 + ($1["dropped"] as? Int ?? 0) }
        #expect(shedCount > 0 && shedCount < 4 * perInput)
        #expect(agent.stderr.contains("line changes shed"))
        // Every seq up to the highest arrived, or lies in a declared outbox.dropped range.
        let seqs = Set(events.compactMap { $0["seq"] as? Int })
        let declared = events.filter { $0["type"] as? String == "outbox.dropped" }.reduce(into: Set<Int>()) { set, e in
            if let first = e["first_seq"] as? Int, let last = e["last_seq"] as? Int { set.formUnion(first...last) }
        }
        let highest = try #require(seqs.max())
        let missing = (1...highest).filter { !seqs.contains($0) && !declared.contains($0) }
        #expect(missing.isEmpty, "undeclared gaps: \(missing.prefix(20))")
        // What reached the garage is consistent: per spot, occupied and vacated alternate.
        for spot in expected.keys {
            let kinds = events.filter { $0["spot"] as? String == spot }.compactMap { $0["type"] as? String }
                .filter { $0 == "spot.occupied" || $0 == "spot.vacated" }
            #expect(zip(kinds, kinds.dropFirst()).allSatisfy { $0 != $1 } || !declared.isEmpty, "\(spot): \(kinds.prefix(10))")
        }
    }
}
