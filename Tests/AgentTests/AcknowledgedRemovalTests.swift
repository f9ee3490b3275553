import Foundation
import TestSupport
import Testing

/// A PUBACK writes nothing to disk by itself: the event's removal record goes with the next event's write, or is
/// written alone once no event came for a moment, and at a graceful stop. Either way the file ends with nothing
/// pending that the broker has.
@Suite struct AcknowledgedRemovalTests {
    private func run(_ dir: URL, _ broker: Broker, trace: String) throws -> Child {
        try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir), "--replay", trace,
                                "--broker", broker.url, "--outbox", dir.path + "/outbox"])
    }

    @Test func removalsAreWrittenAfterAQuietMomentAndAtTheStop() throws {
        let dir = temporaryDirectory()
        let log = dir.path + "/outbox/outbox.log"
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        func arrived() -> Set<Int> { Set(subscriber.events().compactMap { $0["seq"] as? Int }) }

        // A quiet moment after the last acknowledgement: the removals are written without any new event.
        let first = try run(dir, broker, trace: try busyTrace(dir, count: 16, every: 20).path)
        #expect(eventually(20) { arrived().count >= 16 }, "\(first.stderr)")
        #expect(eventually(10) { pendingOnDisk(log).pending.isEmpty }, "still pending: \(pendingOnDisk(log).pending)")
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0, "\(first.stderr)")

        // Stopped right after the acknowledgements, before any quiet moment: the stop writes them.
        let second = try run(dir, broker, trace: try busyTrace(dir, count: 16, every: 20, name: "again.jsonl").path)
        #expect(eventually(20) { arrived().count >= 32 }, "\(second.stderr)")
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0, "\(second.stderr)")
        #expect(pendingOnDisk(log).pending.isEmpty, "still pending after the stop: \(pendingOnDisk(log).pending)")
        // Nothing came twice: no removal was lost on the way.
        let ids = checkDelivery(subscriber.events())
        #expect(Set(ids.keys) == Set(1...32), "\(ids.keys.sorted())")
        #expect(subscriber.events().count == 32, "an event came twice")
        subscriber.stop()
    }
}
