import Foundation
import SystemIO
import Testing
import TestSupport
@testable import AgentKit

/// The device state's start-up accounting, in-process against real files (real fsync) in a fresh state directory:
/// what a start finds after a clean stop, a crash in the middle of a reserved block, a lost state file.
@Suite struct DeviceStateTests {
    @Test func aCleanStopLeavesNothingToDeclareAndCountsOn() throws {
        let dir = temporaryDirectory().path
        var first = try DeviceState(directory: dir)
        for _ in 0..<10 { _ = first.nextSeq() }
        first.settle(oldestPending: nil)
        first.stoppedCleanly()
        let next = try DeviceState(directory: dir)
        #expect(next.boot == 2)
        #expect(next.seq == 10)
        #expect(next.unaccounted(outboxHighest: 10) == nil)
    }

    /// A crash after 10 of a block of 64: the next start counts on above the whole block and declares its unused
    /// rest (never sent: an event is stored before it is sent), so no seq is used twice and none is missing silently.
    @Test func aCrashInsideAReservedBlockDeclaresItsUnusedRest() throws {
        let dir = temporaryDirectory().path
        var crashed = try DeviceState(directory: dir)
        for _ in 0..<10 { _ = crashed.nextSeq() }
        crashed.settle(oldestPending: 1)   // events 1…10 still in the outbox
        crashed.save()
        var next = try DeviceState(directory: dir)
        #expect(next.boot == 2)
        #expect(next.seq == DeviceState.seqBlock)
        #expect(next.unaccounted(outboxHighest: 10) == 11...DeviceState.seqBlock)
        #expect(next.nextSeq() == DeviceState.seqBlock + 1, "a seq of the crashed run's block was handed out again")
    }

    /// Both copies of device-state.json lost (the ledger intact): the ledger alone still carries boot and seq on.
    @Test func theLedgerAloneCarriesTheCountsOnWhenTheStateFileIsGone() throws {
        let dir = temporaryDirectory().path
        var first = try DeviceState(directory: dir)
        for _ in 0..<70 { _ = first.nextSeq() }
        first.settle(oldestPending: nil)
        first.stoppedCleanly()
        for name in ["device-state.json", "device-state.json.bak"] { try FileManager.default.removeItem(atPath: dir + "/" + name) }
        let next = try DeviceState(directory: dir)
        #expect(next.boot == 2)
        #expect(next.seq == 70)
        #expect(next.unaccounted(outboxHighest: 0) == nil, "a clean stop settled every seq")
    }
}
