import ParkWiseContract
import MQTT
import Uplink

/// The uplink against a real broker on loopback: what an append to the durable outbox costs (with
/// its fsync), how long 200 buffered events take to drain after connecting, and how many QoS 1
/// events a second go through the whole outbox -> broker -> PUBACK path.
func uplinkBench(port: Int, directory: String) async {
    let topics = Topics(site: "bench", device: "d1")
    let entry = benchEntry

    // 1. Append cost.
    guard let (appendOutbox, _) = try? DurableOutbox.open(directory: directory + "/append", capacity: 2000) else {
        print("cannot open outbox in \(directory)")
        return
    }
    for batch in [1, 10, 50] {
        let start = now()
        for first in stride(from: 0, to: 500, by: batch) {
            _ = appendOutbox.append((first..<first + batch).map { entry(UInt64(10_000 * batch + $0)) }, sparing: [])
        }
        print("outbox append, \(batch) event(s) per sync: \(Int((now() - start) / 500 * 1e6)) µs per event")
    }

    // 2. Drain of 200 buffered events, and 3. sustained QoS 1.
    guard let (outbox, _) = try? DurableOutbox.open(directory: directory + "/drain", capacity: 200) else { return }
    let (stream, continuation) = AsyncStream.makeStream(of: LinkEvent.self)
    let link = MQTTLink(settings: LinkSettings(brokers: [.init(host: "127.0.0.1", port: port, tls: false)],
                                               clientID: "bench", keepaliveSeconds: 30, will: nil, subscriptions: []))
    { continuation.yield($0) }
    let uplink = BenchUplink(session: UplinkSession(link: link, topics: topics, outbox: outbox,
                                                    birth: StatusPayload(state: "online")), capacity: 200)
    let session = uplink.session
    for seq in 1...200 { uplink.accept([entry(UInt64(seq))]) }
    link.start()
    var connectedAt = 0.0
    var next: UInt64 = 201
    var sustainedStart = 0.0
    let sustained = 5000
    for await event in stream {
        uplink.handle(event)
        if case .connected = event { connectedAt = now() }
        if connectedAt > 0 && sustainedStart == 0 && session.outboxCount == 0 {
            print("drain of 200 buffered events (birth + replay + all PUBACKs): \(Int((now() - connectedAt) * 1000)) ms")
            sustainedStart = now()
        }
        if sustainedStart > 0 {
            // Keep 50 events in flight, each written to the outbox with fsync before it is sent.
            while next < 201 + UInt64(sustained) && session.outboxCount < 50 {
                uplink.accept([entry(next)])
                next += 1
            }
            if next == 201 + UInt64(sustained) && session.outboxCount == 0 {
                let seconds = now() - sustainedStart
                print("sustained QoS 1 through the durable outbox: \(Int(Double(sustained) / seconds)) events/s "
                      + "(\(sustained) events, fsync each)")
                break
            }
        }
    }
    link.stop()
}

/// A spot event with sequence number `seq`, as the agent stores it.
func benchEntry(_ seq: UInt64) -> OutboxEntry {
    var e = EventPayload(id: "00000000-0000-0000-0000-\(String(seq, radix: 16))", seq: seq, boot: 1,
                         type: "spot.occupied", at: "2026-11-29T12:00:00.000Z", clock: "synced")
    e.spot = "P2-A-\(seq % 48)"
    e.level = "P2"
    return OutboxEntry(event: e, atMonotonic: Int64(seq), arrivalMonotonic: nil, kernelBoot: "bench")
}
