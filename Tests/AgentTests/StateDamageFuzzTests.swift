import Foundation
import Simulation
import Testing
import TestSupport

/// Bounded fuzzing of what a start reads from disk: after a run has left events in its outbox, its
/// files are damaged at random (a flipped bit, a cut, zeros, garbage, a deleted file; one or two
/// files at a time) and the agent starts again with the broker up. The oracle: it starts (no signal,
/// no hang, exit 0 on SIGTERM), `boot` went up, and every seq below the new run's first one arrives
/// or lies in a declared `outbox.dropped` range. Fixed seeds; PARKWISE_FUZZ_CASES=N runs more (nightly).
@Suite(.serialized) struct StateDamageFuzzTests {
    static let files = ["outbox.log", "device-state.json", "device-state.json.bak", "seq.ledger"]
    static let cases = Int(ProcessInfo.processInfo.environment["PARKWISE_FUZZ_CASES"] ?? "") ?? 12

    /// One damage to one file; returns what was done, for the failure message.
    static func damage(_ path: String, _ random: inout SeededRandom) throws -> String {
        let name = (path as NSString).lastPathComponent
        guard var bytes = FileManager.default.contents(atPath: path).map([UInt8].init), !bytes.isEmpty else {
            return "\(name): absent"
        }
        let at = Int.random(in: 0..<bytes.count, using: &random)
        switch Int.random(in: 0..<5, using: &random) {
        case 0:
            bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return "\(name): bit flipped at \(at)"
        case 1:
            try Data(bytes[..<at]).write(to: URL(fileURLWithPath: path))
            return "\(name): cut at \(at) of \(bytes.count)"
        case 2:
            let end = min(bytes.count, at + Int.random(in: 1...64, using: &random))
            for i in at..<end { bytes[i] = 0 }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return "\(name): zeros \(at)..<\(end)"
        case 3:
            try Data((0..<bytes.count).map { _ in UInt8.random(in: 0...255, using: &random) }).write(to: URL(fileURLWithPath: path))
            return "\(name): replaced by garbage"
        default:
            try FileManager.default.removeItem(atPath: path)
            return "\(name): deleted"
        }
    }

    @Test(arguments: 1...cases) func aDamagedStateDirectoryStillKeepsTheSequencePromise(seed: Int) throws {
        var random = SeededRandom(seed: UInt64(seed) &* 7919)
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()

        // Run 1 delivers some events, then the broker goes and more wait in the outbox.
        let first = try Child(agentBinary, ["run", "--config", config, "--replay",
                                            try busyTrace(dir, count: 30, every: 40, name: "first.jsonl").path,
                                            "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(15) { subscriber.events().count >= 5 }, "\(first.stderr)")
        broker.stop()
        #expect(eventually(15) { first.stderr.contains("trace finished") }, "\(first.stderr)")
        if Bool.random(using: &random) {
            first.signal(SIGKILL)
            _ = first.wait(5)
        } else {
            first.signal(SIGTERM)
            #expect(first.wait(10) == 0, "\(first.stderr)")
        }
        var done: [String] = []
        for file in StateDamageFuzzTests.files.shuffled(using: &random).prefix(Int.random(in: 1...2, using: &random)) {
            done.append(try StateDamageFuzzTests.damage(outbox + "/" + file, &random))
        }

        // Run 2, broker back.
        try broker.start()
        let second = try Child(agentBinary, ["run", "--config", config, "--replay",
                                             try busyTrace(dir, count: 2, every: 40, name: "second.jsonl").path,
                                             "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(20) { subscriber.events().contains { $0["boot"] as? Int ?? 0 >= 2 && $0["type"] as? String != "outbox.dropped" } },
                "seed \(seed), \(done): \(second.stderr)")
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0, "seed \(seed), \(done): a clean stop; \(second.stderr)")
        try subscriber.drain()
        subscriber.stop()

        let events = subscriber.events()
        let boots = events.compactMap { $0["boot"] as? Int }
        #expect(boots == boots.sorted(), "seed \(seed), \(done): boot never goes back: \(boots)")
        let laterRun = events.filter { ($0["boot"] as? Int ?? 0) >= 2 }.compactMap { $0["seq"] as? Int }
        guard let start = laterRun.min() else { return }
        let arrived = Set(events.compactMap { $0["seq"] as? Int })
        let declared = events.filter { $0["type"] as? String == "outbox.dropped" }.reduce(into: Set<Int>()) { set, e in
            if let a = e["first_seq"] as? Int, let b = e["last_seq"] as? Int, a <= b { set.formUnion(a...b) }
        }
        let missing = Set(1..<start).subtracting(arrived).subtracting(declared)
        #expect(missing.isEmpty, "seed \(seed), \(done): seqs neither arrived nor declared: \(missing.sorted()); \(second.stderr)")
        let firstRun = events.filter { $0["boot"] as? Int == 1 }.compactMap { $0["seq"] as? Int }
        #expect(firstRun.allSatisfy { $0 < start }, "seed \(seed), \(done): a seq used twice")
    }
}
