import Foundation
import TestSupport
import Testing

/// Simulated time played faster than real time (`--speed`): the times on the wire stay real ones.
@Suite(.serialized) struct SpeedTests {
    /// One message as an independent mosquitto_sub received it, with its own wall clock's time of receipt.
    struct Stamped {
        var receivedMs: Double
        var topic: String
        var json: [String: Any]
    }

    /// The simulated campus at --speed 600 from 07:30 (morning arrivals, stays of simulated hours in seconds): every
    /// time an event or state carries (`at`, `arrival`, `departure`, `since`) is at or before the moment the
    /// subscriber received it and after the agent started, and a spot's times keep their order: its check-in's arrival
    /// and time come before its checkout's departure, and `stay_s` is departure - arrival.
    @Test func simulatedTimesAreNeverAheadOfTheWallClockAndKeepTheirOrder() throws {
        let broker = try Broker()
        let ready = "parkwise-test/ready"
        try publish(broker, ready, "1", retain: true)
        let subscriber = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-q", "1", "-t", "parkwise/#", "-t", ready,
                                                              "-F", "%U\t%t\t%p"])
        defer { subscriber.signal(SIGTERM) }
        #expect(eventually(5) { subscriber.stdout.contains(ready) }, "subscribed: \(subscriber.stderr)")
        func received() -> [Stamped] {
            subscriber.stdout.split(separator: "\n").compactMap { line in
                let parts = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
                guard parts.count == 3, let seconds = Double(parts[0]), parts[1].hasPrefix("parkwise/v1/") else { return nil }
                let json = (try? JSONSerialization.jsonObject(with: Data(parts[2].utf8))) as? [String: Any] ?? [:]
                return Stamped(receivedMs: seconds * 1000, topic: String(parts[1]), json: json)
            }
        }
        func events(_ type: String) -> [[String: Any]] {
            received().filter { $0.topic.hasSuffix("/events") && $0.json["type"] as? String == type }.map(\.json)
        }

        let startedMs = Date().timeIntervalSince1970 * 1000
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", packageRoot + "/hardware/examples/campus.yaml", "--simulate",
                                            "--speed", "600", "--sim-start", "07:30", "--broker", broker.url,
                                            "--outbox", dir.path + "/outbox"])
        #expect(eventually(60) { events("spot.checkout").count >= 3 }, "\(events("spot.checkout").count) checkouts; \(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0, "\(agent.stderr)")

        // Only clock granularity may separate a time from its receipt (the wire keeps milliseconds).
        let tolerance = 5.0
        var times = 0
        for message in received() {
            for key in ["at", "arrival", "departure", "since"] {
                guard let t = isoMilliseconds(message.json[key]) else { continue }
                times += 1
                #expect(t <= message.receivedMs + tolerance,
                        "\(key) \(message.json[key] ?? "") is \(t - message.receivedMs) ms after its receipt: \(message.topic) \(message.json)")
                #expect(t >= startedMs - tolerance, "\(key) before the agent started: \(message.topic) \(message.json)")
            }
        }
        #expect(times > 100, "times checked: \(times)")

        // Per spot, in seq order: times never go back, and a check-in comes before its checkout.
        let all = received().filter { $0.topic.hasSuffix("/events") }.map(\.json)
            .sorted { ($0["seq"] as? Int ?? 0) < ($1["seq"] as? Int ?? 0) }
        var lastAt: [String: Double] = [:]
        var checkin: [String: (arrival: Double, at: Double)] = [:]
        var checkouts = 0
        for event in all {
            guard let spot = event["spot"] as? String, let at = isoMilliseconds(event["at"]) else { continue }
            let type = event["type"] as? String ?? "?"
            if type == "spot.occupied" || type == "spot.vacated" {
                #expect(at >= lastAt[spot, default: 0], "\(spot) went back in time: \(event)")
                lastAt[spot] = at
            }
            if type == "spot.checkin", let arrival = isoMilliseconds(event["arrival"]) {
                #expect(arrival <= at, "\(event)")
                checkin[spot] = (arrival, at)
            }
            if type == "spot.checkout", let arrival = isoMilliseconds(event["arrival"]),
               let departure = isoMilliseconds(event["departure"]), let stay = event["stay_s"] as? Double {
                checkouts += 1
                let seen = try #require(checkin[spot], "a checkout without its check-in: \(event)")
                #expect(seen.arrival == arrival, "\(event)")
                #expect(arrival <= departure && seen.at <= departure, "check-in \(seen), checkout \(event)")
                #expect(abs(stay * 1000 - (departure - arrival)) <= 1, "stay_s is departure - arrival: \(event)")
            }
        }
        #expect(checkouts >= 3)
    }
}
