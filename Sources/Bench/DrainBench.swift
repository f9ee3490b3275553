import Glibc
import MQTT
import ParkWiseContract
import ParkWiseCore
import Uplink

/// A full outbox at the largest capacity the agent keeps (`ConfigDefaults.outboxCapacityLimit`) drained after an
/// outage: the time from the connection to the last PUBACK, and the agent's own CPU in it (the broker's is not).
func drainBench(port: Int, directory: String) async {
    let capacity = ConfigDefaults.outboxCapacityLimit
    guard let (outbox, _) = try? DurableOutbox.open(directory: directory + "/drain-full", capacity: capacity) else {
        print("cannot open outbox in \(directory)")
        return
    }
    let (stream, continuation) = AsyncStream.makeStream(of: LinkEvent.self)
    let link = MQTTLink(settings: LinkSettings(brokers: [.init(host: "127.0.0.1", port: port, tls: false)],
                                               clientID: "bench-drain", keepaliveSeconds: 30, will: nil, subscriptions: []))
    { continuation.yield($0) }
    let uplink = BenchUplink(session: UplinkSession(link: link, topics: Topics(site: "bench", device: "d2"), outbox: outbox,
                                                    birth: StatusPayload(state: "online")), capacity: capacity)
    for first in stride(from: 1, through: capacity, by: 500) {
        uplink.accept((first..<first + 500).map { benchEntry(UInt64($0)) })
    }
    link.start()
    var connectedAt = 0.0
    var cpuAtConnect = 0.0
    for await event in stream {
        uplink.handle(event)
        if case .connected = event {
            connectedAt = now()
            cpuAtConnect = processCPU()
        }
        if connectedAt > 0 && uplink.session.outboxCount == 0 {
            let seconds = now() - connectedAt
            let cpu = processCPU() - cpuAtConnect
            print("drain of \(capacity) buffered events (the capacity limit): \(Int(seconds * 1000)) ms, "
                  + "\(Int(cpu * 1e6 / Double(capacity))) µs of the agent's CPU per event")
            break
        }
    }
    link.stop()
}

private func processCPU() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// An outbox full at the capacity limit (spot events of the campus's 156 spots) taking more events during an outage:
/// what `OverflowPolicy` costs for each event it makes room for (no disk: the memory outbox).
func overflowBench(events: Int) {
    let capacity = ConfigDefaults.outboxCapacityLimit
    let outbox = MemoryOutbox(capacity: capacity)
    _ = outbox.append((1...capacity).map { spotEntry(UInt64($0)) }, sparing: [])
    let start = now()
    var dropped = 0
    for seq in capacity + 1...capacity + events { dropped += outbox.append(spotEntry(UInt64(seq))).dropped.count }
    let seconds = now() - start
    print("overflow of a full outbox of \(capacity): \(Int(seconds * 1e6 / Double(events))) µs per event admitted "
          + "(\(dropped) given up for \(events))")
}

/// A spot event of one of 156 spots, as the agent stores it.
private func spotEntry(_ seq: UInt64) -> OutboxEntry {
    var entry = benchEntry(seq)
    entry.event.spot = "P\(seq % 3 + 1)-A-\(seq % 52)"
    return entry
}
