import Delivery
import Foundation
import SystemIO
import Testing
import TestSupport
@testable import AgentKit

/// The device state's start-up accounting, in-process against real files (real fsync) in a fresh state directory:
/// what a start finds after a clean stop, a crash in the middle of a reserved block, a lost state file, and what the
/// delivery ledger declares from it.
@Suite struct DeviceStateTests {
    /// What the delivery ledger declares at a start that finds this state and an outbox holding `pending`, whose
    /// highest seq ever stored is `highest`.
    private func declaredAtStart(_ state: DeviceState, pending: [UInt64] = [], highest: UInt64) -> [ClosedRange<UInt64>] {
        var disk = DeliveryLedger.StartContents()
        disk.settled = state.previousRun?.settled ?? 0
        disk.stateLost = state.stateLost
        disk.top = state.seq
        var outbox = DeliveryLedger.StartContents.Outbox()
        outbox.pending = pending
        outbox.highest = highest
        disk.outbox = outbox
        return DeliveryLedger(start: disk).newlyDeclared
    }

    @Test func aCleanStopLeavesNothingToDeclareAndCountsOn() throws {
        let dir = temporaryDirectory().path
        var first = try DeviceState(directory: dir)
        for _ in 0..<10 { _ = first.nextSeq() }
        first.settled = 10
        first.stoppedCleanly()
        let next = try DeviceState(directory: dir)
        #expect(next.boot == 2)
        #expect(next.seq == 10)
        #expect(declaredAtStart(next, highest: 10) == [])
    }

    /// A crash after 10 of a block of 64: the next start counts on above the whole block and declares its unused
    /// rest (never sent: an event is stored before it is sent), so no seq is used twice and none is missing silently.
    @Test func aCrashInsideAReservedBlockDeclaresItsUnusedRest() throws {
        let dir = temporaryDirectory().path
        var crashed = try DeviceState(directory: dir)
        for _ in 0..<10 { _ = crashed.nextSeq() }
        crashed.settled = 0   // events 1…10 still in the outbox
        crashed.save()
        var next = try DeviceState(directory: dir)
        #expect(next.boot == 2)
        #expect(next.seq == DeviceState.seqBlock)
        #expect(declaredAtStart(next, pending: Array(1...10), highest: 10) == [11...DeviceState.seqBlock])
        #expect(next.nextSeq() == DeviceState.seqBlock + 1, "a seq of the crashed run's block was handed out again")
    }

    /// Both copies of device-state.json lost (the ledger intact): the ledger alone still carries boot and seq on.
    @Test func theLedgerAloneCarriesTheCountsOnWhenTheStateFileIsGone() throws {
        let dir = temporaryDirectory().path
        var first = try DeviceState(directory: dir)
        for _ in 0..<70 { _ = first.nextSeq() }
        first.settled = 70
        first.stoppedCleanly()
        for name in ["device-state.json", "device-state.json.bak"] { try FileManager.default.removeItem(atPath: dir + "/" + name) }
        let next = try DeviceState(directory: dir)
        #expect(next.boot == 2)
        #expect(next.seq == 70)
        #expect(next.stateLost)
        #expect(declaredAtStart(next, highest: 0) == [], "a clean stop settled every seq")
    }
}
