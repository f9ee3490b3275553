import Foundation
import TestSupport
import ParkWiseContract
import Testing
import Delivery
import Uplink

/// An outbox entry for a spot or lane event with sequence number `seq`.
func entry(_ seq: UInt64, type: String = "spot.occupied", spot: String? = "P2-A-01", lane: String? = nil) -> OutboxEntry {
    var event = EventPayload(id: "id-\(seq)", seq: seq, boot: 1, type: type, at: "2026-11-29T12:00:00.000Z", clock: "synced")
    event.spot = spot
    event.lane = lane
    return OutboxEntry(event: event, atMonotonic: Int64(seq), arrivalMonotonic: nil, kernelBoot: "k")
}

/// The records of an outbox file, read the way the format says (length, CRC-32 skipped, JSON),
/// independently of the agent's reader; stops at a torn record.
func outboxRecords(_ path: String) -> [[String: Any]] {
    let bytes = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
    var offset = 0
    var records: [[String: Any]] = []
    while offset + 8 <= bytes.count {
        let length = Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
        guard length > 0, offset + 8 + length <= bytes.count else { break }   // zero: the reserve after the records
        let json = Data(bytes[(offset + 8)..<(offset + 8 + length)])
        records.append((try? JSONSerialization.jsonObject(with: json)) as? [String: Any] ?? [:])
        offset += 8 + length
    }
    return records
}

/// Where an outbox file's records end: the zeroed reserve after them is no record (every record ends in a `}`).
func recordsEnd(_ bytes: [UInt8]) -> Int {
    (bytes.lastIndex { $0 != 0 } ?? -1) + 1
}

/// Makes every write through the descriptor this process holds on `path` fail with ENOSPC, as on a full disk: the
/// descriptor is pointed at /dev/full (the file itself stays as it is).
func failWrites(to path: String) throws {
    for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
        guard let fd = Int32(name),
              (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) == path else { continue }
        let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(full >= 0 && dup2(full, fd) == fd)
        close(full)
        return
    }
    Issue.record("no descriptor open on \(path)")
}

/// The added event of a record, if it is an `add`.
func addedEvent(_ record: [String: Any]) -> [String: Any]? {
    (record["add"] as? [String: Any])?["event"] as? [String: Any]
}

/// The events still pending in an outbox file, and the number of intact records.
func pendingOnDisk(_ path: String) -> (pending: [UInt64], records: Int) {
    let records = outboxRecords(path)
    var pending: [UInt64] = []
    for record in records {
        if let seq = addedEvent(record)?["seq"] as? Int { pending.append(UInt64(seq)) }
        if let del = record["del"] as? Int { pending.removeAll { $0 == UInt64(del) } }
        if let drop = record["drop"] as? Int {
            let to = record["drop_to"] as? Int ?? drop
            pending.removeAll { (UInt64(drop)...UInt64(max(drop, to))).contains($0) }
        }
    }
    return (pending, records.count)
}

@Suite struct OutboxTests {
    @Test func eventsSurviveAReopenInOrderUntilAcknowledged() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
            #expect(problems.isEmpty)
            for seq in 1...5 { #expect(outbox.append(entry(UInt64(seq))).failure == nil) }
            outbox.remove(seq: 2)
            #expect(outbox.writeChanges() == nil)
            #expect(!outbox.hasUnwrittenChanges)
        }
        let (reopened, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(problems.isEmpty)
        #expect(reopened.pending.map(\.event.seq) == [1, 3, 4, 5])
        #expect(reopened.pending[0] == entry(1))
        #expect(pendingOnDisk(dir + "/outbox.log").pending == [1, 3, 4, 5])
    }

    /// An acknowledgement writes nothing by itself: its removal goes with the next event's write (one write and
    /// one sync for both). Lost in a crash before that, it only means the event comes back, whole, to be sent
    /// once more (same id and seq); nothing pending is ever lost.
    @Test func aRemovalGoesWithTheNextWriteAndIfLostTheEventComesBack() throws {
        let dir = temporaryDirectory().path
        let log = dir + "/outbox.log"
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
            for seq in 1...3 { #expect(outbox.append(entry(UInt64(seq))).failure == nil) }
            outbox.remove(seq: 1)
            #expect(outbox.pending.map(\.event.seq) == [2, 3])
            #expect(outbox.hasUnwrittenChanges)
            #expect(pendingOnDisk(log).records == 3, "the acknowledgement wrote nothing")
        }
        // A crash here: the acknowledged event is still in the file.
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(outbox.pending.map(\.event.seq) == [1, 2, 3])
        #expect(outbox.pending[0] == entry(1))
        outbox.remove(seq: 1)
        outbox.remove(seq: 3)
        #expect(outbox.append(entry(4)).failure == nil)
        #expect(!outbox.hasUnwrittenChanges)
        let onDisk = pendingOnDisk(log)
        #expect(onDisk.pending == [2, 4])
        #expect(onDisk.records == 6, "two removals and the new event in one write: \(onDisk.records) records")
        let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(reopened.pending.map(\.event.seq) == [2, 4])
    }

    /// A floor record (an announcement's seq) and a discard's drop records are writes like an event's: the removals
    /// waiting for a write go with them, never forgotten by them (issue 32, defect 6: a clean stop after an
    /// announcement left every acknowledged event in the file, and the next start replayed them all).
    @Test func removalsWaitingForAWriteGoWithAFloorOrADropRecord() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
            for seq in 1...6 { #expect(outbox.append(entry(UInt64(seq))).failure == nil) }
            outbox.remove(seq: 1)
            outbox.remove(seq: 2)
            #expect(outbox.recordFloor(20) == nil)
            outbox.remove(seq: 3)
            #expect(outbox.discard([6]) == nil)
            outbox.remove(seq: 4)
            // The clean stop's write.
            #expect(outbox.writeChanges() == nil)
            #expect(!outbox.hasUnwrittenChanges)
        }
        #expect(pendingOnDisk(dir + "/outbox.log").pending == [5])
        let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(reopened.pending.map(\.event.seq) == [5], "acknowledged events are not sent again")
        #expect(reopened.acknowledgedAtOpen == [1, 2, 3, 4])
    }

    /// A compacted file cut at any record boundary (a disk that lost its tail) leaves no seq it held silently gone:
    /// the floor record, which vouches for every seq below it, is the rewrite's last, so a cut that loses an event's
    /// record loses the floor with it, and the start declares everything above what is left. (Written first, as it
    /// was, a cut after it lost the pending events' records while the floor still said their seqs were accounted for.)
    @Test func aCompactedFileCutAnywhereLosesNoSeqSilently() throws {
        let dir = temporaryDirectory().path
        let log = dir + "/outbox.log"
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 3)
            for seq in 1...4 { #expect(outbox.append(entry(UInt64(seq), spot: "P2-A-0\(seq)")).failure == nil) }
            outbox.remove(seq: 2)
            #expect(outbox.append([entry(5, spot: "P2-A-05"), entry(6, spot: "P2-A-06")], sparing: [3]).failure == nil)
            #expect(outbox.replaceAll(Array(outbox.pending)) == nil)   // the compaction's rewrite
        }
        let whole = try Data(contentsOf: URL(fileURLWithPath: log))
        let (full, _) = try DurableOutbox.open(directory: dir, capacity: 3)
        let held = Set(full.pending.map(\.event.seq))
        let dropped = SeqRuns(full.lostAtOpen)
        #expect(full.highestSeq == 6)
        // Every record boundary of the rewritten file.
        var boundaries: [Int] = [0]
        var offset = 0
        let bytes = [UInt8](whole)
        while offset + 8 <= bytes.count {
            let length = Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
            guard length > 0, offset + 8 + length <= bytes.count else { break }
            offset += 8 + length
            boundaries.append(offset)
        }
        #expect(boundaries.count >= 4, "floor, drop and adds: \(boundaries)")
        for cut in boundaries {
            try whole.prefix(cut).write(to: URL(fileURLWithPath: log))
            let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 3)
            let pending = Set(reopened.pending.map(\.event.seq))
            let lost = SeqRuns(reopened.lostAtOpen)
            for seq in held.union(dropped.ranges.flatMap { Array($0) }) where seq <= reopened.highestSeq {
                #expect(pending.contains(seq) || lost.contains(seq),
                        "cut at \(cut): seq \(seq) lies below the floor \(reopened.highestSeq), neither pending nor declared")
            }
        }
    }

    /// A write that fails (a full disk) leaves the events in memory and the outbox degraded: the next write, whatever
    /// asks for it, first tries to put everything pending on disk again; once the disk has room, one such retry does
    /// it, acknowledgements made meanwhile included.
    @Test func aFailedWriteIsTriedAgainWholeUntilTheDiskHasRoom() throws {
        let dir = temporaryDirectory().path
        let log = dir + "/outbox.log"
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        for seq in 1...3 { #expect(outbox.append(entry(UInt64(seq))).failure == nil) }
        try failWrites(to: log)
        #expect(outbox.append(entry(4)).failure != nil)
        #expect(outbox.pending.map(\.event.seq) == [1, 2, 3, 4])
        outbox.remove(seq: 1)
        #expect(outbox.hasUnwrittenChanges, "the disk misses event 4")
        // The retry's rewrite cannot create its temp file either (a directory stands in its way): still degraded,
        // nothing lost.
        try FileManager.default.createDirectory(atPath: log + ".tmp", withIntermediateDirectories: false)
        #expect(outbox.writeChanges() != nil)
        #expect(outbox.hasUnwrittenChanges)
        #expect(outbox.pending.map(\.event.seq) == [2, 3, 4])
        // Room again: one retry puts everything pending on disk.
        try FileManager.default.removeItem(atPath: log + ".tmp")
        #expect(outbox.writeChanges() == nil)
        #expect(!outbox.hasUnwrittenChanges)
        #expect(pendingOnDisk(log).pending == [2, 3, 4])
        let (reopened, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(problems.isEmpty, "\(problems)")
        #expect(reopened.pending.map(\.event.seq) == [2, 3, 4])
    }

    /// Records are written over a zeroed reserve the file already has, so the file keeps its size while events
    /// come and go (its sync then flushes data only, no filesystem journal); a reserve used up is renewed, and
    /// everything reads back the same across many renewals and compactions.
    @Test func recordsGoIntoAReserveAndTheFileKeepsItsSize() throws {
        let dir = temporaryDirectory().path
        let log = dir + "/outbox.log"
        func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: log))?[.size] as? Int) ?? -1 }
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(outbox.append(entry(1)).failure == nil)
        let first = size()
        #expect(first >= 65_536, "a reserve follows the first record: \(first) bytes")
        for seq in 2...20 { #expect(outbox.append(entry(UInt64(seq))).failure == nil) }
        outbox.remove(seq: 1)
        #expect(size() == first, "records went into the reserve")
        // Past several reserves and compactions, with some events left pending.
        for seq in 21...2000 {
            #expect(outbox.append(entry(UInt64(seq))).failure == nil)
            if seq % 7 != 0 { outbox.remove(seq: UInt64(seq)) }
        }
        #expect(outbox.writeChanges() == nil)
        let expected = outbox.pending.map(\.event.seq)
        #expect(expected.count > 100, "some events stay pending: \(expected.count)")
        #expect(pendingOnDisk(log).pending == expected)
        let (reopened, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(problems.isEmpty, "\(problems)")
        #expect(reopened.pending.map(\.event.seq) == expected)
        #expect(OutboxPeek.read(directory: dir)?.damaged == false)
    }

    @Test func aTornLastRecordIsDroppedAndEverythingBeforeKept() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
            for seq in 1...3 { _ = outbox.append(entry(UInt64(seq))) }
        }
        // Power lost half-way through writing the fourth record (over the reserve after the third).
        let log = dir + "/outbox.log"
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
        let records = Array(file[..<recordsEnd(file)])
        #expect(file.count > records.count, "a zeroed reserve follows the records")
        let extra = [200, 0, 0, 0, 1, 2, 3, 4] + Array("{\"add\":{\"ev".utf8)
        var torn = file
        torn.replaceSubrange(records.count..<records.count + extra.count, with: extra)
        try Data(torn).write(to: URL(fileURLWithPath: log))
        let (outbox, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(outbox.pending.map(\.event.seq) == [1, 2, 3])
        #expect(problems.count == 1)
        #expect(problems.first?.contains("torn record") == true)
        #expect(problems.first?.contains("\(extra.count) bytes dropped") == true, "\(problems)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: log))) == records, "the torn bytes are cut off, nothing else")
    }

    /// One flipped bit loses one record, not the rest of the file: reading resumes at the next
    /// intact record, and the seq the damaged record held is reported for declaration.
    @Test func aDamagedFileIsKeptAsideAndReadingResumesAfterTheDamage() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
            for seq in 1...4 { _ = outbox.append(entry(UInt64(seq))) }
        }
        let log = dir + "/outbox.log"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
        let recordSize = recordsEnd(bytes) / 4
        bytes[2 * recordSize + 20] ^= 0xFF          // bit rot in the third record
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        let (outbox, problems) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(outbox.pending.map(\.event.seq) == [1, 2, 4])
        #expect(outbox.lostAtOpen == [3...3])
        #expect(outbox.highestSeq == 4)
        #expect(problems.first?.contains("damaged") == true)
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("outbox.log.corrupt-") }
        #expect(aside.count == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/" + aside[0])) == Data(bytes), "kept whole")
        #expect(pendingOnDisk(log).pending == [1, 2, 4])
        // The new file says what the damage took, so a crash before the caller saves it elsewhere still declares it.
        let (again, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(again.lostAtOpen == [3...3])
    }

    /// Damage in a compacted file, whose records all lie below its floor record: the damaged event's seq is still
    /// found between the events around it and declared.
    @Test func aDamagedRecordInACompactedFileIsDeclared() throws {
        let dir = temporaryDirectory().path
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 200)
            for seq in 1...8 { _ = outbox.append(entry(UInt64(seq))) }
            for seq in [1, 2, 4, 6, 8] { outbox.remove(seq: UInt64(seq)) }
            #expect(outbox.replaceAll(Array(outbox.pending)) == nil)   // rewritten: floor 8, then 3, 5, 7
        }
        let log = dir + "/outbox.log"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
        var offset = 0, damaged = false
        for record in outboxRecords(log) {
            let length = Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
            if addedEvent(record)?["seq"] as? Int == 5 {
                bytes[offset + 8 + length / 2] ^= 0xFF
                damaged = true
                break
            }
            offset += 8 + length
        }
        #expect(damaged)
        try Data(bytes).write(to: URL(fileURLWithPath: log))
        let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 200)
        #expect(reopened.pending.map(\.event.seq) == [3, 7])
        #expect(reopened.lostAtOpen.contains { $0.contains(5) }, "\(reopened.lostAtOpen)")
    }

    @Test func neverMoreThanCapacityPendingOnDiskAndDropsAreSaid() throws {
        let dir = temporaryDirectory().path
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 20)
        var dropped: [UInt64] = []
        for seq in 1...60 {
            // Every third event is a passage; the rest are occupancy changes of three spots.
            let e = seq % 3 == 0 ? entry(UInt64(seq), type: "lane.passage", spot: nil, lane: "ramp")
                                 : entry(UInt64(seq), spot: "P2-A-0\(seq % 3)")
            let result = outbox.append(e)
            #expect(result.failure == nil)
            dropped += result.dropped.map(\.event.seq)
            let onDisk = pendingOnDisk(dir + "/outbox.log")
            #expect(onDisk.pending.count <= 20)
            #expect(onDisk.pending == outbox.pending.map(\.event.seq))
        }
        #expect(dropped.count == 40)
        // Superseded occupancy changes go first: every passage is still there, and each spot's latest change.
        let kept = outbox.pending.map(\.event)
        #expect(kept.filter { $0.type == "lane.passage" }.count == 20 - 2)
        #expect(kept.contains { $0.seq == 59 } && kept.contains { $0.seq == 58 })
    }

    @Test func overflowPolicyDropsSupersededBeforeOldest() {
        let events = [entry(1, type: "lane.passage", spot: nil, lane: "ramp"), entry(2, spot: "A"), entry(3, spot: "B"), entry(4, spot: "A")]
        #expect(OverflowPolicy.victim(in: events) == 1, "spot A's first change is superseded by seq 4")
        let facts = [entry(1, type: "lane.passage", spot: nil, lane: "ramp"), entry(2, type: "spot.checkout"), entry(3, spot: "A")]
        #expect(OverflowPolicy.victim(in: facts) == 0, "nothing superseded: the oldest")
    }

    /// Every stored event is in flight (sent, no PUBACK yet) when one more comes: whatever is given
    /// up, the file holds exactly what the outbox holds, never more than the capacity, also after a
    /// restart, and nothing the restart reads was declared dropped.
    @Test func aFullOutboxWithEverythingInFlightNeverHoldsMoreThanItsCapacity() throws {
        let dir = temporaryDirectory().path
        var dropped: [UInt64] = []
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 3)
            for seq in 1...3 { _ = outbox.append(entry(UInt64(seq))) }
            let result = outbox.append([entry(4, spot: "P2-A-04")], sparing: [1, 2, 3])
            dropped = result.dropped.map(\.event.seq)
            #expect(dropped.count == 1)
            #expect(pendingOnDisk(dir + "/outbox.log").pending == outbox.pending.map(\.event.seq))
        }
        let (reopened, problems) = try DurableOutbox.open(directory: dir, capacity: 3)
        #expect(problems.isEmpty, "\(problems)")
        #expect(reopened.pending.count == 3)
        #expect(Set(reopened.pending.map(\.event.seq)).isDisjoint(with: dropped), "a declared drop came back")
    }

    /// A batch is stored with one write: the file gains its records at once, and events of the
    /// batch given up at once leave no record at all.
    @Test func aBatchIsStoredWholeAndItsOwnVictimsAreNotWritten() throws {
        let dir = temporaryDirectory().path
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 4)
        let batch = (1...6).map { entry(UInt64($0), spot: "P2-A-0\($0)") }
        let result = outbox.append(batch, sparing: [])
        #expect(result.failure == nil)
        #expect(result.dropped.map(\.event.seq) == [1, 2])
        let onDisk = pendingOnDisk(dir + "/outbox.log")
        #expect(onDisk.pending == [3, 4, 5, 6])
        #expect(onDisk.records == 6, "the two given up at once were never added: only their drop records are written")
        let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 4)
        #expect(reopened.lostAtOpen == [1...1, 2...2], "the next start declares them")
    }

    /// Power lost at any byte of a batch's write: every seq the file held or was given is still pending, declared by
    /// the next open, acknowledged, or above the highest seq the file stored (which the agent's start declares). Here
    /// the batch's records are a removal, adds and drop records, and one event of the batch is given up at once
    /// between two that are added (superseded by a later change of its spot, while a passage before it is kept).
    @Test func aWriteTornAtAnyByteLeavesNoSilentGap() throws {
        let dir = temporaryDirectory().path
        let log = dir + "/outbox.log"
        let before: [UInt8]
        let after: [UInt8]
        do {
            let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 5)
            for seq in 1...2 { _ = outbox.append(entry(UInt64(seq), type: "lane.passage", spot: nil, lane: "L1")) }
            outbox.remove(seq: 1)   // acknowledged: its removal goes with the next write
            before = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
            let batch = [entry(3, type: "lane.passage", spot: nil, lane: "L1"), entry(4, spot: "P2-A-01"),
                         entry(5, type: "lane.passage", spot: nil, lane: "L2"), entry(6, type: "spot.vacated", spot: "P2-A-01"),
                         entry(7, spot: "P2-A-02")]
            let result = outbox.append(batch, sparing: [2])
            #expect(result.failure == nil)
            #expect(result.dropped.map(\.event.seq) == [4], "the superseded change of P2-A-01, given up at once")
            after = [UInt8](try Data(contentsOf: URL(fileURLWithPath: log)))
        }
        let start = recordsEnd(before), end = recordsEnd(after)
        #expect(end > start && after.count == before.count, "the write went into the reserve")
        for cut in start...end {
            var torn = after
            for i in cut..<end { torn[i] = before[i] }   // what the reserve held there: zeros
            try Data(torn).write(to: URL(fileURLWithPath: log))
            let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 5)
            let pending = Set(reopened.pending.map(\.event.seq))
            let declared = Set(reopened.lostAtOpen.flatMap { Array($0) })
            for seq in UInt64(2)...7 {
                let accounted = pending.contains(seq) || declared.contains(seq) || seq > reopened.highestSeq
                #expect(accounted, "cut at byte \(cut - start) of \(end - start): seq \(seq) neither pending (\(pending.sorted())) nor declared (\(declared.sorted())) and below the highest stored (\(reopened.highestSeq))")
            }
            #expect(pending.contains(2) || declared.contains(2), "cut at byte \(cut - start): an event stored before the write is never lost")
        }
    }

    /// An event the full outbox gives up leaves a drop record, synced with the batch that made it: the next open
    /// declares it, also after a compaction, until the broker has acknowledged the announcement of it.
    @Test func eventsGivenUpAreDeclaredByTheNextOpenUntilTheirAnnouncementIsAcknowledged() throws {
        let dir = temporaryDirectory().path
        func declaredAtOpen() throws -> Set<UInt64> {
            let (reopened, _) = try DurableOutbox.open(directory: dir, capacity: 4)
            return Set(reopened.lostAtOpen.flatMap { Array($0) })
        }
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 4)
        for seq in 1...5 { _ = outbox.append(entry(UInt64(seq))) }
        #expect(try declaredAtOpen() == [1], "the drop record of the append that gave 1 up")
        _ = outbox.append(entry(6))
        #expect(outbox.compactionDue)
        #expect(outbox.writeChanges() == nil)
        #expect(!outbox.compactionDue)
        #expect(try declaredAtOpen() == [1, 2], "a compaction keeps the drops not yet announced")
        outbox.dropsAnnounced(1...1)
        outbox.dropsAnnounced(2...2)
        _ = outbox.append(entry(7))
        _ = outbox.append(entry(8))
        #expect(outbox.writeChanges() == nil)
        #expect(try declaredAtOpen() == [3, 4], "once announced, the compaction leaves the earlier drops out")
    }

    @Test func compactionKeepsTheFileSmall() throws {
        let dir = temporaryDirectory().path
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 10)
        for seq in 1...1000 {
            _ = outbox.append(entry(UInt64(seq)))
            outbox.remove(seq: UInt64(seq))
        }
        #expect(outbox.writeChanges() == nil)
        let onDisk = pendingOnDisk(dir + "/outbox.log")
        #expect(onDisk.pending.isEmpty)
        #expect(onDisk.records <= 2 * 10 + 2)
    }

    /// Compaction (a rewrite with its syncs) waits for the caller's idle moment once the removed events' records
    /// are as many as the capacity, and happens at once only at twice that: the file stays bounded either way.
    @Test func compactionWaitsForAnIdleMomentUpToTwiceTheCapacity() throws {
        let dir = temporaryDirectory().path
        let log = dir + "/outbox.log"
        let (outbox, _) = try DurableOutbox.open(directory: dir, capacity: 10)
        var seq: UInt64 = 0
        while !outbox.compactionDue {
            seq += 1
            #expect(outbox.append(entry(seq)).failure == nil)
            outbox.remove(seq: seq)
            try #require(seq < 100)
        }
        let due = pendingOnDisk(log).records
        #expect(due >= 10, "\(due) records, half of them dead, when it became due")
        #expect(outbox.hasUnwrittenChanges)
        #expect(outbox.writeChanges() == nil)
        #expect(!outbox.compactionDue && !outbox.hasUnwrittenChanges)
        #expect(pendingOnDisk(log).records <= 1, "compacted to the floor record: \(pendingOnDisk(log).records)")
        // Never asked: at twice the capacity it compacts by itself.
        var most = 0
        for _ in 1...200 {
            seq += 1
            #expect(outbox.append(entry(seq)).failure == nil)
            outbox.remove(seq: seq)
            most = max(most, pendingOnDisk(log).records)
        }
        #expect(most <= 2 * 2 * 10 + 2, "the file stays bounded: at most \(most) records")
    }

    @Test func anUnusableDirectoryIsAClearError() {
        let file = temporaryDirectory().appendingPathComponent("not-a-dir").path
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        #expect(throws: UplinkError.self) { _ = try DurableOutbox.open(directory: file + "/outbox", capacity: 10) }
        do { _ = try DurableOutbox.open(directory: file + "/outbox", capacity: 10) } catch {
            #expect(error.message.contains("Not a directory"))
        }
    }
}
