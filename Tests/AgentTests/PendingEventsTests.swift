import TestSupport
import Testing
import Uplink

/// The pending events after acknowledgements of the oldest (which move nothing: see `PendingEvents`), of others, and
/// the appends, discards and rewrites between them: every outbox reads and finds exactly the events still pending.
struct PendingEventsTests {
    /// A drain past the compaction points (32 removed, then half), an acknowledgement out of order, appends and a
    /// discard while removed events are still held, then the outbox emptied and used again.
    private func drain(_ outbox: any Outbox) -> [UInt64] {
        for first in stride(from: 1, through: 300, by: 50) {
            #expect(outbox.append((first..<first + 50).map { entry(UInt64($0)) }, sparing: []).failure == nil)
        }
        var expected = Array(UInt64(1)...300)
        for seq in UInt64(1)...200 {
            outbox.remove(seq: seq)
            expected.removeFirst()
            #expect(outbox.count == expected.count)
            #expect(outbox.pending.first?.event.seq == seq + 1)
            if seq % 25 == 0 || seq == 31 || seq == 32 || seq == 33 {
                #expect(outbox.pending.map(\.event.seq) == expected, "after the acknowledgement of \(seq)")
                #expect(outbox.entry(seq: seq + 1) == entry(seq + 1))
                #expect(outbox.wire(seq: 300) == entry(300).wire)
                #expect(outbox.entry(seq: seq) == nil, "an acknowledged event found again")
            }
        }
        outbox.remove(seq: 250)   // (not the oldest)
        expected.removeAll { $0 == 250 }
        outbox.remove(seq: 201)
        expected.removeFirst()
        #expect(outbox.append((301...310).map { entry(UInt64($0)) }, sparing: []).failure == nil)
        expected += Array(301...310)
        #expect(outbox.pending.map(\.event.seq) == expected)
        outbox.remove(seq: 202)
        expected.removeFirst()
        #expect(outbox.discard([205, 206]) == nil)
        expected.removeAll { $0 == 205 || $0 == 206 }
        #expect(outbox.pending.map(\.event.seq) == expected)
        #expect(outbox.writeChanges() == nil)
        return expected
    }

    @Test func theDurableOutboxFindsWhatIsPendingThroughADrainAndOnDiskAfterIt() throws {
        let dir = temporaryDirectory().path
        let expected: [UInt64]
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 400)
            expected = drain(outbox)
        }
        let (reopened, problems) = try DurableOutbox.open(directory: dir, capacity: 400)
        #expect(problems.isEmpty)
        #expect(reopened.pending.map(\.event.seq) == expected)
        #expect(reopened.pending.map(\.event) == expected.map { entry($0).event })
        for seq in expected { reopened.remove(seq: seq) }
        #expect(reopened.count == 0 && reopened.pending.isEmpty)
        #expect(reopened.append(entry(311)).failure == nil)
        #expect(reopened.pending.map(\.event.seq) == [311])
        #expect(reopened.writeChanges() == nil)
        #expect(pendingOnDisk(dir + "/outbox.log").pending == [311])
    }

    @Test func theMemoryOutboxFindsWhatIsPendingThroughADrain() {
        let outbox = MemoryOutbox(capacity: 400)
        let expected = drain(outbox)
        for seq in expected.reversed() { outbox.remove(seq: seq) }   // (newest first: none is the oldest but the last)
        #expect(outbox.count == 0 && outbox.pending.isEmpty)
        #expect(outbox.append(entry(311)).failure == nil)
        #expect(outbox.pending.map(\.event.seq) == [311])
    }
}
