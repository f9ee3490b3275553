import Foundation
import TestSupport
import Testing

@Suite(.serialized) struct SessionTests {
    func config(_ dir: URL, brokers: [String], protocolVersion: String = "3.1.1") throws -> String {
        let path = dir.appendingPathComponent("session.yaml").path
        try """
        site: testsite
        device: busy
        board: simulated
        mqtt: { brokers: [\(brokers.map { "\"\($0)\"" }.joined(separator: ", "))], protocol: "\(protocolVersion)" }
        levels: [ { id: P1, capacity: 20 } ]
        spots: [ { id: P1-A-01, input: GPIO2, delayed_on: 0, delayed_off: 0 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Underground, the network gone: the broker's name lookup hangs (a name server that never
    /// answers, here a silent UDP socket the agent's resolv.conf points at, in a mount namespace of
    /// its own). A SIGTERM still ends the agent within its stop grace, not when the lookup gives up.
    @Test func aHangingNameLookupDoesNotHoldUpAStop() throws {
        let nameServer = "127.77.\(Int.random(in: 1...250)).\(Int.random(in: 1...250))"
        let silent = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(nameServer)
        address.sin_port = UInt16(53).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0, "binding \(nameServer):53 needs root (CI runs as root): errno \(errno)")
        let dir = temporaryDirectory()
        let resolv = dir.appendingPathComponent("resolv.conf").path
        try "nameserver \(nameServer)\noptions timeout:30 attempts:3\n".write(toFile: resolv, atomically: true, encoding: .utf8)
        let run = [agentBinary, "run", "--config", try config(dir, brokers: ["mqtt://broker.parkwise.invalid:1883"]),
                   "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"]
        let agent = try Child("/usr/bin/unshare", ["--mount", "/bin/sh", "-c",
                                                   "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"", resolv] + run)
        // The agent's lookup has reached the name server (and waits for an answer that never comes).
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var query = [UInt8](repeating: 0, count: 512)
        let received = query.withUnsafeMutableBytes { recv(silent, $0.baseAddress, $0.count, 0) }
        try #require(received > 0, "the agent never asked the name server: \(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0, "the stop waited for the lookup: \(agent.stderr)")
        #expect(agent.stderr.contains("uplink thread still busy after the stop grace"), "\(agent.stderr)")
    }

    /// The first broker of the list is down: the agent moves on to the next one.
    @Test func failsOverToTheNextBroker() throws {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: ["mqtt://127.0.0.1:\(freePort())", broker.url]),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 }, "\(agent.stderr)")
        #expect(agent.stderr.contains("uplink connected broker=\(broker.url)"))
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }

    /// A board's session is clean, so it subscribes to its commands at QoS 0: QoS 1 would keep nothing more across a
    /// disconnect, and on a NATS cluster each QoS 1 subscription is a replicated consumer (deploy/nats/README.md).
    @Test func aBoardSubscribesToItsCommandsAtQoS0() throws {
        let dir = temporaryDirectory()
        let log = dir.path + "/broker.log"
        // Each subscription in the broker's log file as "client qos filter"; its usual lines still on stderr.
        let logging = ["subscribe", "error", "warning", "notice", "information"].map { "log_type \($0)\n" }.joined()
        let broker = try Broker(extraConfig: logging + "log_dest stderr\nlog_dest file \(log)")
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: [broker.url], protocolVersion: "3.1.1"),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        func subscriptions() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(eventually(15) { subscriptions().contains("parkwise/v1/testsite/busy/cmd/+") }, "\(agent.stderr)")
        #expect(subscriptions().contains(" 0 parkwise/v1/testsite/busy/cmd/+"), "\(subscriptions())")
        #expect(!subscriptions().contains(" 1 parkwise/v1/testsite/busy/"), "\(subscriptions())")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }

    /// MQTT 5 where the broker supports it: the same contract.
    @Test func speaksMQTT5WhenAsked() throws {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: [broker.url], protocolVersion: "5"),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 }, "\(agent.stderr)")
        #expect(subscriber.events().map { $0["seq"] as? Int } == [1, 2, 3])
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        #expect(try retainedMessages(broker, "parkwise/v1/testsite/busy/status").first?.json["state"] as? String == "offline")
        subscriber.stop()
    }

    /// `rebirth` republishes status and every state; a command that is not JSON changes nothing.
    @Test func rebirthAndMalformedCommands() throws {
        let broker = try Broker()
        let subscriber = try Subscriber(broker)
        try subscriber.listen()
        let dir = temporaryDirectory()
        let prefix = "parkwise/v1/testsite/busy"
        let agent = try Child(agentBinary, ["run", "--config", try config(dir, brokers: [broker.url]),
                                            "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(eventually(15) { subscriber.events().count >= 3 })
        let before = subscriber.messages.filter { $0.topic == prefix + "/state/spot/P1-A-01" }.count
        try publish(broker, prefix + "/cmd/calibrate", "not json")
        try publish(broker, prefix + "/cmd/rebirth", #"{"id": "r1"}"#)
        #expect(eventually(5) { subscriber.messages.filter { $0.topic == prefix + "/reply" }.count == 2 })
        let replies = subscriber.messages.filter { $0.topic == prefix + "/reply" }.map(\.json)
        #expect(replies[0]["ok"] as? Bool == false)
        #expect(replies[1]["ok"] as? Bool == true)
        #expect(replies[1]["id"] as? String == "r1")
        #expect(eventually(5) { subscriber.messages.filter { $0.topic == prefix + "/state/spot/P1-A-01" }.count > before })
        #expect(subscriber.messages.filter { $0.topic == prefix + "/status" }.count >= 2)
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
        subscriber.stop()
    }
}

/// Under systemd (`Type=notify`, `WatchdogSec=`): READY=1 once running, WATCHDOG=1 from the event loop
/// at least every half watchdog period, STOPPING=1 at a graceful stop, STATUS= with the reason before a failed
/// exit. A real unix datagram socket plays systemd's notify socket.
@Suite struct ServiceNotifyTests {
    @Test func readinessWatchdogAndStoppingReachTheNotifySocket() throws {
        let dir = temporaryDirectory()
        let notify = try NotifySocket(dir)
        let broker = try Broker()
        // 2 s watchdog: fed at least every second.
        let agent = try Child("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", "WATCHDOG_USEC=2000000", agentBinary, "run",
                                               "--config", try SessionTests().config(dir, brokers: [broker.url]),
                                               "--replay", try writeTrace(dir, threeChanges), "--outbox", dir.path + "/outbox"])
        #expect(notify.next()?.hasPrefix("READY=1") == true, "\(agent.stderr)")
        #expect(notify.next() == "WATCHDOG=1")
        #expect(notify.next() == "WATCHDOG=1")
        agent.signal(SIGTERM)
        var rest: [String] = []
        while let message = notify.next() {
            rest.append(message)
            if message == "STOPPING=1" { break }
        }
        #expect(agent.wait(10) == 0)
        #expect(rest.last == "STOPPING=1" && rest.dropLast().allSatisfy { $0 == "WATCHDOG=1" }, "\(rest)")
    }

    /// A config error (exit 78) and an outbox another agent holds (exit 1) each tell systemd why in STATUS=, the
    /// line `systemctl status` shows: the file and line of the first problem, or the holder, never just a code.
    @Test func aFailedStartTellsSystemdWhyBeforeItExits() throws {
        let dir = temporaryDirectory()
        let notify = try NotifySocket(dir)
        let broken = dir.appendingPathComponent("broken.yaml").path
        try """
        site: testsite
        device: ""
        board: simulated
        levels: [ { id: P1, capacity: 20 } ]
        spots: [ { id: P1-A-01, input: GPIO2 }, { id: P1-A-02, input: GPIO2 } ]
        """.write(toFile: broken, atomically: true, encoding: .utf8)
        let refused = try Child("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", agentBinary, "run", "--config", broken])
        #expect(refused.wait(20) == 78)
        let status = notify.next() ?? ""
        #expect(status.hasPrefix("STATUS=exit 78: \(broken):") && status.contains("error") && status.contains("more)"),
                "\(status) / \(refused.stderr)")
        #expect(!status.dropFirst().contains("\n"), "one line: \(status)")

        // A second agent on the first one's outbox directory.
        let args = ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, ""),
                    "--broker", "mqtt://127.0.0.1:\(freePort())", "--outbox", dir.path + "/outbox"]
        let first = try Child(agentBinary, args)
        try #require(eventually(10) { first.stderr.contains("agent running") }, "\(first.stderr)")
        let second = try Child("/usr/bin/env", ["NOTIFY_SOCKET=\(notify.path)", agentBinary] + args)
        #expect(second.wait(20) == 1)
        let held = notify.next() ?? ""
        #expect(held.hasPrefix("STATUS=exit 1: error: another parkwise-agent"), "\(held) / \(second.stderr)")
        first.signal(SIGTERM)
        #expect(first.wait(10) == 0)
    }
}
