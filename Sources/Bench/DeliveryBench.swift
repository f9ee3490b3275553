import Delivery

/// The delivery ledger's cost per event: accepted, handed, acknowledged (the live path, one event per batch); the
/// overflow path (an outage: every batch gives up one event, declared); and a start over a large outbox's records.
func deliveryBench(count: Int) {
    var start = DeliveryLedger.StartContents()
    start.outbox = .init()
    var ledger = DeliveryLedger(start: start)
    _ = ledger.linkUp()
    var seconds = timed {
        for seq in 1...UInt64(count) {
            _ = ledger.accepted([seq], dropped: [], recorded: true)
            ledger.handed(seq)
            ledger.acknowledged(seq)
            if ledger.settled != seq { print("delivery: settled wrong at \(seq)") }
        }
    }
    print("delivery: live path: \(Int(seconds * 1e9 / Double(count))) ns per event (accepted, handed, acknowledged, settled read)")

    // Offline, 200 pending: each new event gives up the oldest unhanded one, and the ledger declares it.
    ledger = DeliveryLedger(start: start)
    let capacity: UInt64 = 200
    for seq in 1...capacity { _ = ledger.accepted([seq], dropped: [], recorded: true) }
    let outage = count / 10
    seconds = timed {
        for seq in (capacity + 1)...(capacity + UInt64(outage)) {
            if ledger.sparing.contains(seq - capacity) { print("delivery: an unhanded event spared") }
            _ = ledger.accepted([seq], dropped: [seq - capacity], recorded: true)
            _ = ledger.stateSaved()
        }
    }
    print("delivery: outage path: \(Int(seconds * 1e9 / Double(outage))) ns per event (sparing read, one given up and "
          + "declared, state saved); \(ledger.declarations.count) range(s) declared, \(ledger.declaredSeqCount) seqs")

    // A start over 20,000 pending events, 20,000 acknowledged removal records and 1,000 drop records.
    var disk = DeliveryLedger.StartContents()
    var held = DeliveryLedger.StartContents.Outbox()
    held.pending = (1...20_000).map { UInt64($0) * 2 }
    held.acknowledged = Set((1...20_000).map { UInt64($0) * 2 + 1 })
    held.dropRecords = (0..<UInt64(1_000)).map { (i: UInt64) -> ClosedRange<UInt64> in
        let seq = 50_000 + i * 3
        return seq...seq
    }
    held.highest = 60_000
    disk.outbox = held
    disk.top = 60_064
    disk.settled = 1
    var declared = 0
    seconds = timed { declared = DeliveryLedger(start: disk).newlyDeclared.count }
    print("delivery: start over 20000 pending, 20000 acknowledged, 1000 dropped: \(Int(seconds * 1000)) ms, "
          + "\(declared) ranges declared")
}

private func timed(_ body: () -> Void) -> Double {
    let start = now()
    body()
    return now() - start
}
