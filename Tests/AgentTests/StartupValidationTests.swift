import Foundation
import Testing
import TestSupport
@testable import Uplink

/// What a start reads from its state directory is checked before it is trusted (issue 24): each file only when it is a
/// regular file of a size the agent could have written, every range in range and in order, every count below the last
/// one the agent hands out, and in a format this agent knows. A damaged state is repaired or declared (never a crash,
/// a hang or an undeclared gap); a newer agent's state is refused with exit 78, as it is.
@Suite(.serialized) struct StartupValidationTests {
    static let files = ["outbox.log", "device-state.json", "device-state.json.bak", "seq.ledger"]

    /// Run 1 with no broker: `count` events of the busy garage, then SIGKILL (`kill`) or a clean stop.
    func firstRun(_ dir: URL, config: String, outbox: String, count: Int, kill: Bool) throws {
        let first = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: count).path,
                                            "--broker", "mqtt://127.0.0.1:\(freePort())", "--outbox", outbox])
        #expect(eventually(15) { first.stderr.contains("trace finished") }, "\(first.stderr)")
        first.signal(kill ? SIGKILL : SIGTERM)
        let code = first.wait(10)
        if !kill { #expect(code == 0, "\(first.stderr)") }
    }

    /// Seqs below the later run's first one that neither arrived nor lie in a declared `outbox.dropped` range.
    func undeclared(_ events: [[String: Any]]) -> [Int] {
        // (The later run's first event may be its declaration: its own events may be given up by a full outbox.)
        let laterRun = events.filter { ($0["boot"] as? Int ?? 0) >= 2 }
        guard let start = laterRun.compactMap({ $0["seq"] as? Int }).min() else { return [-1] }   // not started yet
        let arrived = Set(events.compactMap { $0["seq"] as? Int })
        let declared = events.filter { $0["type"] as? String == "outbox.dropped" }.reduce(into: Set<Int>()) { set, e in
            if let a = e["first_seq"] as? Int, let b = e["last_seq"] as? Int, a <= b { set.formUnion(a...b) }
        }
        return Set(1..<start).subtracting(arrived).subtracting(declared).sorted()
    }

    /// Run 2 with a broker: it must start (no signal, no hang), keep the promise (every seq of the earlier run arrives
    /// or is declared) and stop cleanly. Returns its log and the memory it took at most (VmHWM, KiB).
    @discardableResult
    func secondRunKeepsThePromise(_ dir: URL, config: String, outbox: String, what: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) throws -> (stderr: String, peakKiB: Int) {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let second = try Child(agentBinary, ["run", "--config", config, "--replay",
                                             try busyTrace(dir, count: 2, every: 40, name: "second.jsonl").path,
                                             "--broker", broker.url, "--outbox", outbox])
        let started = eventually(15) { second.stderr.contains("agent running") }
        #expect(started, "\(what): the start goes through: \(second.stderr)", sourceLocation: sourceLocation)
        var peak = 0
        if started {
            peak = peakMemoryKiB(second.pid)
            #expect(eventually(20) { undeclared(subscriber.events()).isEmpty },
                    "\(what): every seq arrived or declared, missing \(undeclared(subscriber.events()).prefix(40)): \(second.stderr)",
                    sourceLocation: sourceLocation)
        }
        second.signal(SIGTERM)
        #expect(second.wait(10) == 0, "\(what): a clean stop: \(second.stderr)", sourceLocation: sourceLocation)
        subscriber.stop()
        return (second.stderr, peak)
    }

    /// The most resident memory the process has had (VmHWM, KiB).
    func peakMemoryKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Rewrites both copies of the state file through `change`.
    func editState(_ outbox: String, _ change: (inout [String: Any]) -> Void) throws {
        for name in ["device-state.json", "device-state.json.bak"] {
            let path = outbox + "/" + name
            var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            change(&object)
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        }
    }

    // MARK: - 1. Ranges out of order

    /// A state file whose pending drop range is no range (first after last, or starting at seq 0) used to kill every
    /// start with SIGILL before any log line (a crash loop under systemd). Both copies are set aside as impossible, and
    /// the ledger's count decides: the drops they held are declared with the rest of what the last run left unsettled.
    @Test(arguments: [[9, 5], [0, 5]])
    func aStateFileWithAnImpossibleDropRangeIsSetAsideAndDeclared(range: [Int]) throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir, capacity: 3)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 13, kill: false)
        try editState(outbox) { $0["unannounced_drops"] = ["count": 3, "first_seq": range[0], "last_seq": range[1]] }
        let (stderr, _) = try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "drops \(range)")
        #expect(stderr.contains("device state unreadable, kept aside"), "\(stderr)")
        #expect(stderr.contains("which is no range of seqs"), "\(stderr)")
        #expect(FileManager.default.fileExists(atPath: outbox + "/device-state.json.corrupt"))
    }

    // MARK: - 2. Not a regular file, or too large

    /// A symbolic link to /dev/zero, or a FIFO, where a state file should be: it used to be read without end (an abort
    /// at 2.2 GB, the service's 64 MiB kill at every start) or to block the start in `open` (SIGTERM ignored). Now it is
    /// moved aside as it is (a FIFO holds nothing, and the agent never makes a link), a new file takes its place, and
    /// what the last run left unsettled is declared; the start stays within the service's memory.
    /// A directory in its place is set aside too (issue 32, defect 4: `device-state.json` or its `.bak` as a directory
    /// refused every save for ever, so no declaration was ever announced: silent gaps, again at every start).
    @Test(arguments: StartupValidationTests.files.flatMap { [($0, "symlink"), ($0, "fifo"), ($0, "directory")] })
    func aStateFileThatIsNotARegularFileIsSetAsideNotRead(file: String, kind: String) throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 6, kill: true)
        let path = outbox + "/" + file
        try FileManager.default.removeItem(atPath: path)
        switch kind {
        case "symlink": try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/dev/zero")
        case "fifo": #expect(mkfifo(path, 0o640) == 0)
        default: try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        }
        let (stderr, peak) = try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "\(file) as a \(kind)")
        #expect(stderr.contains("not a regular file: moved aside as \(path).not-regular-"), "\(stderr)")
        #expect(peak > 0 && peak < 64 * 1024, "within the service's MemoryMax=64M: VmHWM \(peak) KiB")
        let aside = try FileManager.default.contentsOfDirectory(atPath: outbox).filter { $0.hasPrefix(file + ".not-regular-") }
        #expect(aside.count == 1, "\(aside)")
        var kept = stat()
        #expect(lstat(outbox + "/" + (aside.first ?? ""), &kept) == 0
                && kept.st_mode & S_IFMT == ["symlink": S_IFLNK, "fifo": S_IFIFO, "directory": S_IFDIR][kind], "kept aside as it was")
        var st = stat()
        #expect(lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG, "a regular file in its place")
    }

    /// An outbox file larger than any the agent writes (20000 events at most) is kept aside unread: reading it whole
    /// would take more memory than the service has.
    @Test func anOutboxFileLargerThanTheAgentWritesIsKeptAsideUnread() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 6, kill: true)
        #expect(truncate(outbox + "/outbox.log", 256 << 20) == 0)   // sparse: no disk used
        let (stderr, peak) = try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "a 256 MiB outbox")
        #expect(stderr.contains("more than the \(OutboxLog.sizeLimit(events: 20_000)) it can hold"), "\(stderr)")
        #expect(peak > 0 && peak < 64 * 1024, "within the service's MemoryMax=64M: VmHWM \(peak) KiB")
    }

    // MARK: - 3. A ledger slot that settles more than it reserved

    /// Writes the ledger's newest slot again with `change` applied, under a valid CRC.
    func forgeNewestSlot(_ outbox: String, _ change: (inout SeqLedger.Entry) -> Void) throws {
        let path = outbox + "/seq.ledger"
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let slots = [0, 1].compactMap { SeqLedger.decode(Array(bytes[($0 * SeqLedger.slotSize)..<(($0 + 1) * SeqLedger.slotSize)])) }
        let (generation, entry) = try #require(slots.max { $0.0 < $1.0 })
        var forged = entry
        change(&forged)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(Int(generation % 2) * SeqLedger.slotSize))
        try handle.write(contentsOf: SeqLedger.encode(generation: generation, forged))
        try handle.close()
    }

    /// A slot with a valid CRC whose `settled` is above its `reserved` used to hide the unused rest of the reservation
    /// (a silent gap): its `settled` is not trusted, and the gap is declared.
    @Test func aLedgerSlotSettledBeyondItsReservationHidesNoGap() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 6, kill: true)
        try forgeNewestSlot(outbox) { $0.settled = $0.reserved + 20 }
        let (stderr, _) = try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "settled > reserved")
        #expect(stderr.contains("sequence ledger repaired at start"), "\(stderr)")
    }

    /// In-process: the ledger read back gives a `settled` no higher than its `reserved`, the older slot's.
    @Test func aLedgerReadBackNeverSettlesBeyondItsReservation() throws {
        let path = temporaryDirectory().path + "/seq.ledger"
        let (ledger, first, _, _) = try SeqLedger.open(path: path)
        #expect(first == nil)
        try ledger.write(SeqLedger.Entry(boot: 1, reserved: 64, settled: 10, clean: false))
        try ledger.write(SeqLedger.Entry(boot: 1, reserved: 128, settled: 200, clean: false))
        let (_, last, damaged, problems) = try SeqLedger.open(path: path)
        #expect(last == SeqLedger.Entry(boot: 1, reserved: 128, settled: 10, clean: false))
        #expect(!damaged)
        #expect(problems.count == 1 && problems[0].contains("settled taken as 10"), "\(problems)")
    }

    /// One bit flipped in the older, stale slot, where the magic's digit says the format: that slot's checksum does
    /// not hold, so it is damage, not a newer agent's slot (issue 32, defect 5: exit 78 at every start although the
    /// newest slot was intact). The newest slot decides.
    @Test func aFlippedBitInTheStaleLedgerSlotIsDamageNotANewerFormat() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 6, kill: true)
        let path = outbox + "/seq.ledger"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let slots = [0, 1].map { Array(bytes[($0 * SeqLedger.slotSize)..<(($0 + 1) * SeqLedger.slotSize)]) }
        let generations = slots.map { SeqLedger.decode($0)?.0 }
        let stale = try #require(generations[0].flatMap { g0 in generations[1].map { g1 in g0 < g1 ? 0 : 1 } },
                                 "both slots written by the first run: \(generations)")
        bytes[stale * SeqLedger.slotSize + 5] ^= 0x04   // "1" becomes "5"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "a flipped bit in the stale slot")
    }

    /// An outbox file cut inside its first record, or to nothing, after an overflow gave up an event above one still
    /// held: the state file's declaration of the drop says nothing of the events the file held below it, and they are
    /// declared (issue 32, defect 3: events below the highest declaration were lost with no declaration).
    @Test(arguments: [0, 6, 14])
    func anOutboxFileCutBelowItsFirstRecordLeavesNoSilentGap(cut: Int) throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir, capacity: 3)
        let outbox = dir.path + "/outbox"
        // P1-A-02's first change (seq 2) is superseded by its second (seq 4): given up when the fourth event comes,
        // while seq 1 stays held, below that drop.
        let trace = try writeTrace(dir, [(0, 2, 1), (10, 3, 1), (20, 4, 1), (30, 3, 0)]
            .map { #"{"t_ms": \#($0.0), "input": "GPIO\#($0.1)", "value": \#($0.2)}"# }.joined(separator: "\n"))
        let first = try Child(agentBinary, ["run", "--config", config, "--replay", trace,
                                            "--broker", "mqtt://127.0.0.1:\(freePort())", "--outbox", outbox])
        #expect(eventually(15) { first.stderr.contains("trace finished") }, "\(first.stderr)")
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0, "\(first.stderr)")
        #expect(pendingOnDisk(outbox + "/outbox.log").pending == [1, 3, 4])
        #expect(truncate(outbox + "/outbox.log", off_t(cut)) == 0)
        try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "outbox.log cut at \(cut)")
    }

    /// An outbox file older than the sequence ledger (a copy put back, an SD card that lost writes it had acknowledged)
    /// holds an event at or below the ledger's settled seq: acknowledged since, or declared by an acknowledged
    /// announcement. It is never sent again: a declared one would arrive after its declaration. (It was sent.)
    @Test func anEventAtOrBelowTheSettledSeqIsNeverSentAgain() throws {
        let dir = temporaryDirectory()
        let outbox = dir.path + "/outbox"
        try writeLedger(outbox, reserved: 20)   // everything up to 20 settled
        do {
            let (file, _) = try DurableOutbox.open(directory: outbox, capacity: 200)
            #expect(file.append([entry(3), entry(21, spot: "P2-A-02")], sparing: []).failure == nil)
        }
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir), "--broker", broker.url,
                                            "--outbox", outbox, "--replay", try busyTrace(dir, count: 1).path])
        let seqs = { Set(subscriber.events().compactMap { $0["seq"] as? Int }) }
        #expect(eventually(15) { seqs().contains(21) }, "\(agent.stderr)")
        #expect(!seqs().contains(3), "sent in seq order: had 3 been sent, it would have come before 21")
        #expect(agent.stderr.contains("events the backend already has or had declared dropped, not sent"), "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0, "\(agent.stderr)")
        subscriber.stop()
    }

    // MARK: - 4. The state file lost, the ledger intact

    /// Both copies of the state file unreadable after the outbox overflowed: its drops (kept nowhere else once the outbox
    /// compacted their records away) used to go undeclared. Now every seq the ledger says the last run may have handed
    /// out beyond what it had settled is declared, but for those still in the outbox or acknowledged in it.
    @Test(arguments: [false, true])
    func aLostStateFileDeclaresWhatTheLedgerSaysWasUnsettled(kill: Bool) throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir, capacity: 3)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 40, kill: kill)
        for name in ["device-state.json", "device-state.json.bak"] {
            try Data("{\"boot\": tru".utf8).write(to: URL(fileURLWithPath: outbox + "/" + name))
        }
        let (stderr, _) = try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "state lost, kill \(kill)")
        #expect(stderr.contains("device state lost, the sequence ledger decides"), "\(stderr)")
    }

    // MARK: - 5. Counts at the end of the seq space

    /// Writes a ledger whose both slots say `reserved`, all settled, after a clean stop of boot 1.
    func writeLedger(_ outbox: String, reserved: UInt64) throws {
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let (ledger, _, _, _) = try SeqLedger.open(path: outbox + "/seq.ledger")
        for _ in 0..<2 { try ledger.write(SeqLedger.Entry(boot: 1, reserved: reserved, settled: reserved, clean: true)) }
    }

    /// 2^53 - 2^32: the last seq the agent hands out.
    static let lastSeq = 9_007_194_959_773_696

    /// A ledger reserved just under 2^53 used to be accepted: the run then published seqs past 2^53 (beyond exact JSON
    /// numbers) and the next start refused its own state. A count past the last seq is refused at once, as it is.
    @Test func aLedgerPastTheLastSeqIsRefusedAsItIs() throws {
        let dir = temporaryDirectory()
        let outbox = dir.path + "/outbox"
        try writeLedger(outbox, reserved: (1 << 53) - 100)
        let before = try Data(contentsOf: URL(fileURLWithPath: outbox + "/seq.ledger"))
        let r = try runAgent(["run", "--config", try writeBusyGarage(dir), "--replay", try busyTrace(dir, count: 4).path,
                              "--broker", "mqtt://127.0.0.1:9", "--outbox", outbox])
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("seq.ledger holds seq 9007199254740892, beyond \(Self.lastSeq), the last seq this agent counts to"), "\(r.err)")
        #expect(r.err.contains("hint: "), "\(r.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: outbox + "/seq.ledger")) == before, "left as it was")
    }

    /// The same for a state file's seq between the last seq and 2^53.
    @Test func aStateFilePastTheLastSeqIsRefusedAsItIs() throws {
        let dir = temporaryDirectory()
        let outbox = dir.path + "/outbox"
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let state = "{\"boot\": 3, \"seq\": \(Self.lastSeq + 1)}"
        try state.write(toFile: outbox + "/device-state.json", atomically: true, encoding: .utf8)
        let r = try runAgent(["run", "--config", try writeBusyGarage(dir), "--replay", try writeTrace(dir, ""),
                              "--broker", "mqtt://127.0.0.1:9", "--outbox", outbox])
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("device-state.json holds seq \(Self.lastSeq + 1), beyond \(Self.lastSeq)"), "\(r.err)")
        #expect(try String(contentsOfFile: outbox + "/device-state.json", encoding: .utf8) == state, "left as it was")
    }

    /// A run that reaches the last seq stamps no more events (and says so) instead of going past it: every seq it
    /// publishes is at most the last, and the next start reads its state and delivers what it kept.
    @Test func aRunAtTheLastSeqStopsStampingAndTheNextStartReadsItsState() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try writeLedger(outbox, reserved: UInt64(Self.lastSeq) - 3)
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let run = try Child(agentBinary, ["run", "--config", config, "--replay", try busyTrace(dir, count: 8, every: 20).path,
                                          "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(15) { run.stderr.contains("trace finished") }, "\(run.stderr)")
        #expect(eventually(10) { subscriber.events().count >= 3 }, "\(run.stderr)")
        run.signal(SIGTERM)
        #expect(run.wait(10) == 0, "\(run.stderr)")
        #expect(run.stderr.contains("sequence numbers used up, events not stamped"), "\(run.stderr)")
        let seqs = subscriber.events().compactMap { $0["seq"] as? Int }
        #expect(Set(seqs) == [Self.lastSeq - 2, Self.lastSeq - 1, Self.lastSeq], "the three seqs left, none past: \(seqs)")
        let again = try Child(agentBinary, ["run", "--config", config, "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", outbox])
        #expect(eventually(10) { again.stderr.contains("agent running") }, "the next start reads its own state: \(again.stderr)")
        again.signal(SIGTERM)
        #expect(again.wait(10) == 0, "\(again.stderr)")
        subscriber.stop()
    }

    // MARK: - 6. Newer formats

    /// What a start of this agent must refuse, as a newer agent would write it.
    static let newerFiles = ["device-state.json", "outbox.log", "seq.ledger"]

    /// A state directory one of whose files is of a newer format (a rollback) is refused with exit 78 and a message
    /// that says so; nothing in it is changed, set aside or declared.
    @Test(arguments: StartupValidationTests.newerFiles)
    func aNewerFormatIsRefusedNotRepaired(file: String) throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 6, kill: false)
        let path = outbox + "/" + file
        switch file {
        case "device-state.json":
            try editState(outbox) { $0["format"] = 2 }
        case "outbox.log":
            // A newer outbox begins with its version record.
            let json = Array(#"{"format":2}"#.utf8)
            var record: [UInt8] = []
            for field in [UInt32(json.count), CRC32.checksum(json)] { withUnsafeBytes(of: field.littleEndian) { record += $0 } }
            let old = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            try Data(record + json + old).write(to: URL(fileURLWithPath: path))
        default:
            // As a newer agent writes it: the digit says the version, and the slot's checksum holds.
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            for slot in 0..<2 {
                let at = slot * SeqLedger.slotSize
                bytes[at + 5] = UInt8(ascii: "2")
                withUnsafeBytes(of: CRC32.checksum(bytes[at..<(at + SeqLedger.bodySize)]).littleEndian) {
                    bytes.replaceSubrange((at + SeqLedger.bodySize)..<(at + SeqLedger.frameSize), with: $0)
                }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        func snapshot() throws -> [String: Data] {
            try Dictionary(uniqueKeysWithValues: FileManager.default.contentsOfDirectory(atPath: outbox)
                .filter { $0 != "agent.lock" }.map { ($0, try Data(contentsOf: URL(fileURLWithPath: outbox + "/" + $0))) })
        }
        let before = try snapshot()
        let r = try runAgent(["run", "--config", config, "--replay", try writeTrace(dir, ""),
                              "--broker", "mqtt://127.0.0.1:9", "--outbox", outbox])
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("\(path) has format version 2, newer than the 1 this agent reads"), "\(r.err)")
        #expect(r.err.contains("hint: install the newer parkwise-agent again"), "\(r.err)")
        #expect(try snapshot() == before, "nothing changed, set aside or added")
    }

    /// Version 1 has no marker: what this agent writes is what every earlier release reads; a marker of version 1
    /// (as a later release may write it when it rolls back) is read as version 1.
    @Test func aFormatOneMarkerIsReadAsVersionOne() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let outbox = dir.path + "/outbox"
        try firstRun(dir, config: config, outbox: outbox, count: 6, kill: false)
        try editState(outbox) { $0["format"] = 1 }
        try secondRunKeepsThePromise(dir, config: config, outbox: outbox, what: "format 1")
        let state = try String(contentsOfFile: outbox + "/device-state.json", encoding: .utf8)
        #expect(!state.contains("format"), "version 1 is written without a marker: \(state)")
    }
}

/// `agent.lock` is truncated and written at every start: a symbolic link in its place (to a file of someone else's)
/// must not be followed, nor a FIFO waited on; it is moved aside and the agent starts with a lock of its own.
@Suite struct LockFileTests {
    @Test func aLinkOrAFifoInPlaceOfTheLockIsMovedAsideAndItsTargetKept() throws {
        for kind in ["symlink", "fifo"] {
            let dir = temporaryDirectory()
            let outbox = dir.appendingPathComponent("outbox").path
            try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
            let target = dir.appendingPathComponent("precious.txt").path
            try "keep me".write(toFile: target, atomically: true, encoding: .utf8)
            if kind == "symlink" {
                try FileManager.default.createSymbolicLink(atPath: outbox + "/agent.lock", withDestinationPath: target)
            } else {
                #expect(mkfifo(outbox + "/agent.lock", 0o600) == 0)
            }
            let agent = try Child(agentBinary, ["run", "--config", try writeBusyGarage(dir), "--replay",
                                                try busyTrace(dir, count: 2).path, "--broker", "mqtt://127.0.0.1:\(freePort())",
                                                "--outbox", outbox])
            #expect(eventually(15) { agent.stderr.contains("agent running") }, "\(kind): \(agent.stderr)")
            #expect(agent.stderr.contains("agent.lock was"), "\(kind): said and moved aside: \(agent.stderr)")
            #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep me", "\(kind): the link's target was written")
            let lock = try String(contentsOfFile: outbox + "/agent.lock", encoding: .utf8)
            #expect(lock.hasPrefix("pid "), "\(kind): a lock of its own: \(lock)")
            agent.signal(SIGTERM)
            #expect(agent.wait(10) == 0, "\(kind): \(agent.stderr)")
        }
    }
}
