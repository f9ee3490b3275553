import Glibc
import ParkWiseContract
import MQTT
import Uplink

/// The highest event rate the uplink sustains without its outbox (200 events) overflowing, against a
/// broker whose answers come 5–20 ms late (`SlowBroker`), through the durable outbox with its syncs.
/// Events come every 10 ms, as the sensors' reads do: `grouped` stores each read's events with one
/// sync (group commit), otherwise every event gets its own sync.
func sustainedBench(port: Int, directory: String) async {
    guard let slow = SlowBroker(upstream: port) else {
        print("cannot start the slow relay")
        return
    }
    for (grouped, window) in [(false, Int32(20)), (true, Int32(20)), (true, Int32(100))] {
        var low = 50, high = 20_000
        var run = 0
        while high - low > max(25, low / 20) {
            let rate = (low + high) / 2
            run += 1
            let drops = await offer(rate: rate, seconds: 3, grouped: grouped, window: window, port: slow.port,
                                    directory: directory + "/run-\(grouped)-\(window)-\(run)")
            if drops == 0 { low = rate } else { high = rate }
        }
        print("sustained without drops, broker acking in 5-20 ms: \(low) events/s "
              + "(\(grouped ? "one sync per read" : "one sync per event"), \(window) in flight)")
    }
}

private enum Input { case uplink(LinkEvent), read }

/// Offers `rate` events a second for `seconds`, then waits for the outbox to empty (10 s at most).
/// Returns how many events the outbox gave up.
private func offer(rate: Int, seconds: Double, grouped: Bool, window: Int32, port: Int, directory: String) async -> Int {
    guard let (outbox, _) = try? DurableOutbox.open(directory: directory, capacity: 200) else { return Int.max }
    let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
    var settings = LinkSettings(brokers: [.init(host: "127.0.0.1", port: port, tls: false)],
                                clientID: "bench-sustained", keepaliveSeconds: 30, will: nil, subscriptions: [])
    settings.inFlightMaximum = window
    let link = MQTTLink(settings: settings) { continuation.yield(.uplink($0)) }
    let uplink = BenchUplink(session: UplinkSession(link: link, topics: Topics(site: "bench", device: "d2"), outbox: outbox,
                                                    birth: StatusPayload(state: "online")), capacity: 200)
    let session = uplink.session
    link.start()
    let reads = Task {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
            continuation.yield(.read)
        }
    }
    var started = 0.0, offered = 0, dropped = 0
    let total = Int(Double(rate) * seconds)
    var seq: UInt64 = 0
    for await input in stream {
        switch input {
        case .uplink(let event):
            uplink.handle(event)
            if case .connected = event, started == 0 { started = now() }
        case .read:
            guard started > 0 else { continue }
            let due = min(total, Int((now() - started) * Double(rate)))
            var batch: [OutboxEntry] = []
            while offered < due {
                seq += 1
                offered += 1
                batch.append(benchEntry(seq))
            }
            if grouped {
                dropped += uplink.accept(batch)
            } else {
                for entry in batch { dropped += uplink.accept([entry]) }
            }
            if offered == total && (session.outboxCount == 0 || now() - started > seconds + 10) {
                reads.cancel()
                link.stop()
                return dropped
            }
        }
    }
    return dropped
}
