@testable import AgentKit
import Foundation
import ParkWiseContract
import Testing
import TestSupport

/// A running agent: its status socket (`<outbox>/status.sock`), its broker, its output.
struct RunningAgent {
    let dir: URL
    let child: Child
    var socket: String { dir.path + "/outbox/status.sock" }

    /// Starts `run` with `arguments` (config, source) on `broker` and waits for the status endpoint.
    init(_ dir: URL, _ arguments: [String], broker: Broker?) throws {
        self.dir = dir
        child = try Child(agentBinary, ["run"] + arguments + ["--broker", broker?.url ?? "mqtt://127.0.0.1:9",
                                                              "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { child.stderr.contains("status endpoint listening") }, "\(child.stderr)")
    }

    func status() throws -> AgentStatus {
        switch StatusClient.fetch(path: socket) {
        case .success(let status): return status
        case .failure(let failure): throw HarnessError("\(failure) \(child.stderr)")
        }
    }

    func stop() {
        child.signal(SIGTERM)
        #expect(child.wait(10) == 0, "\(child.stderr)")
    }
}

/// A private broker, a subscriber listening on it, and an agent replaying `trace` on the contract garage.
struct ReplayRig {
    let dir = temporaryDirectory()
    let broker: Broker
    let subscriber: Subscriber
    let agent: RunningAgent

    /// `configTail` is appended to the config (e.g. an `mqtt:` section).
    init(trace: String, speed: String = "4", filter: String = "parkwise/#", configTail: String = "") throws {
        broker = try Broker()
        subscriber = try Subscriber(broker, filter: filter)
        try subscriber.listen()
        let config = try writeContractGarage(dir)
        if !configTail.isEmpty {
            try (try String(contentsOfFile: config, encoding: .utf8) + "\n" + configTail + "\n")
                .write(toFile: config, atomically: true, encoding: .utf8)
        }
        agent = try RunningAgent(dir, ["--config", config, "--replay", try writeTrace(dir, trace), "--speed", speed], broker: broker)
    }

    func stop() {
        agent.stop()
        subscriber.stop()
    }
}

/// Raw changes per input in a trace, counted as the agent counts them (a repeat of a level is no change).
func rawChanges(_ trace: String) -> [String: Int] {
    var level: [String: Int] = [:], changes: [String: Int] = [:]
    for line in trace.split(separator: "\n") {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
              let input = object["input"] as? String, let value = object["value"] as? Int else { continue }
        if level[input, default: 0] != value { changes[input, default: 0] += 1 }
        level[input] = value
    }
    return changes
}

@Suite(.serialized) struct StatusSocketTests {
    let prefix = "parkwise/v1/testsite/contract-dev"

    /// What the socket says is what the agent published: spot and level states, passages, link, outbox,
    /// and each input's changes as the trace made them.
    @Test func theStatusMatchesWhatWasPublished() throws {
        let rig = try ReplayRig(trace: contractTrace)
        let (broker, subscriber, agent) = (rig.broker, rig.subscriber, rig.agent)
        #expect(eventually(20) { agent.child.stderr.contains("trace finished") }, "\(agent.child.stderr)")
        // Settled: every health timer has run (the stuck input recovered) and the outbox is empty.
        #expect(eventually(15) {
            guard let s = try? agent.status() else { return false }
            return s.outbox.depth == 0 && s.faultedInputs == 0 && s.spots.allSatisfy { $0.state == "free" }
        }, "\((try? agent.status()).map { "\($0.outbox) \($0.inputs.map(\.health))" } ?? "no status")")
        try subscriber.drain()
        let status = try agent.status()

        #expect(status.site == "testsite" && status.device == "contract-dev" && status.mode == "replay")
        #expect(status.link.isConnected && status.link.broker == broker.url && status.link.reconnects == 0)
        #expect(status.clock == "simulated")
        let events = subscriber.events()
        #expect(status.outbox.lastSeq == UInt64(events.compactMap { $0["seq"] as? Int }.max() ?? -1))
        #expect(status.boot == 1)
        let passages = events.filter { $0["type"] as? String == "lane.passage" }
        #expect(status.lanes.map(\.passages) == [passages.count])
        #expect(status.lanes.first?.lastPassage?.at == passages.last?["at"] as? String)
        // Each input's raw changes, as the trace made them.
        let expected = rawChanges(contractTrace)
        for input in status.inputs {
            #expect(input.changes == expected[input.input, default: 0], "\(input.input)")
            #expect((input.lastChange == nil) == (input.changes == 0))
        }
        // Spots and levels as last published, retained (a state that changed within a second of its last publish
        // follows within that second, see StatePace).
        func matches(_ retained: [Received]) -> Bool {
            status.spots.allSatisfy { spot in
                retained.first { $0.topic == prefix + "/state/spot/" + spot.id }?.json["state"] as? String == spot.state
            } && status.levels.allSatisfy { level in
                let published = retained.first { $0.topic == prefix + "/state/level/" + level.id }?.json
                return published?["spots_unknown"] as? Int == level.spotsUnknown && published?["occupied"] as? Int == level.occupied
            }
        }
        #expect(eventually(5) { (try? retainedMessages(broker, prefix + "/state/#")).map(matches) == true })
        let retained = try retainedMessages(broker, prefix + "/state/#")
        for spot in status.spots {
            let published = retained.first { $0.topic == prefix + "/state/spot/" + spot.id }?.json
            #expect(published?["state"] as? String == spot.state, "\(spot.id)")
            #expect(published?["checked_in"] as? Bool == spot.checkedIn)
        }
        for level in status.levels {
            let published = try #require(retained.first { $0.topic == prefix + "/state/level/" + level.id }?.json)
            #expect(published["occupied"] as? Int == level.occupied && published["lane_count"] as? Int == level.laneCount)
            #expect(published["source"] as? String == level.source && published["spots_unknown"] as? Int == level.spotsUnknown)
            #expect(published["free"] as? Int == level.free && published["unknown"] as? Int == level.unknown)
        }
        agent.stop()
        #expect(!FileManager.default.fileExists(atPath: agent.socket), "a clean stop removes the socket")
        subscriber.stop()
    }

    /// `status` prints the same status as text and as JSON; without an agent it says why and what to do.
    @Test func theStatusCommandPrintsTextAndJSON() throws {
        let dir = temporaryDirectory()
        let config = try writeContractGarage(dir)
        let agent = try RunningAgent(dir, ["--config", config, "--replay", try writeTrace(dir, contractTrace)], broker: nil)
        let json = try runAgent(["status", "--config", config, "--outbox", dir.path + "/outbox", "--json"])
        #expect(json.code == 0, "\(json.err)")
        let decoded = try JSONDecoder().decode(AgentStatus.self, from: Data(json.out.utf8))
        #expect(decoded.device == "contract-dev" && decoded.spots.count == 3 && decoded.inputs.count == 5)
        #expect(decoded.link.state == "connecting", "no broker listens on port 9")
        let text = try runAgent(["status", "--socket", agent.socket])
        #expect(text.code == 0, "\(text.err)")
        #expect(text.out.contains("testsite/contract-dev  mode replay"))
        #expect(text.out.contains("link       connecting (brokers: mqtt://127.0.0.1:9)"))
        #expect(text.out.contains("P2-ramp"))
        #expect(text.out.contains("inputs     5,"))
        #expect(text.out.contains("GPIO22         spot P2-A-01"))
        agent.stop()

        // The agent gone: the socket is too, and the command says so (exit 1).
        let gone = try runAgent(["status", "--config", config, "--outbox", dir.path + "/outbox"])
        #expect(gone.code == 1)
        #expect(gone.err.contains("error: no agent is running: no status socket at \(dir.path)/outbox/status.sock nor /run/parkwise-agent/status.sock"),
                "\(gone.err)")
        #expect(gone.err.contains("hint: start it"))
    }

    /// A socket nobody listens on (an agent killed with SIGKILL leaves one): refused, said as such.
    @Test func aDeadAgentsSocketIsConnectionRefused() throws {
        let dir = temporaryDirectory()
        let agent = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, "")], broker: nil)
        agent.child.signal(SIGKILL)
        _ = agent.child.wait(5)
        #expect(FileManager.default.fileExists(atPath: agent.socket))
        let r = try runAgent(["status", "--socket", agent.socket])
        #expect(r.code == 1)
        #expect(r.err.contains("no agent is answering on \(agent.socket) (connection refused"), "\(r.err)")
        // The next start takes the stale socket over.
        let again = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, "")], broker: nil)
        #expect(try again.status().boot == 2)
        again.stop()
    }

    /// Permission denied names the group to join. (Root passes every permission check: run as nobody.)
    @Test func permissionDeniedSaysWhichGroup() throws {
        let dir = temporaryDirectory()
        let agent = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, "")], broker: nil)
        defer { agent.stop() }
        // Others may pass through the directories to the socket (mode 0660), but not connect.
        for path in [dir.path, dir.path + "/outbox"] { chmod(path, 0o755) }
        let child = try Child("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", agentBinary,
                                                    "status", "--socket", agent.socket])
        #expect(child.wait(10) == 1, "\(child.stdout) \(child.stderr)")
        #expect(child.stderr.contains("permission denied on \(agent.socket)"), "\(child.stderr)")
        #expect(child.stderr.contains("sudo usermod -aG parkwise"))
    }

    /// Clients that connect and say nothing, or ask and never read, cost the socket's thread a
    /// timeout each: events flow on, and the next client gets its answer.
    @Test func clientsThatNeverReadDoNotStallEvents() throws {
        let rig = try ReplayRig(trace: contractTrace, speed: "1")
        let (subscriber, agent) = (rig.subscriber, rig.agent)
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for i in 0..<8 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var addr = try #require(StatusSocket.address(agent.socket))
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(rc == 0)
            if i % 2 == 0 { _ = send(fd, "status\n", 7, 0) }   // asks, never reads
            idle.append(fd)
        }
        // Served side by side: the next client does not wait for the silent ones' timeouts (1 s each).
        if case .failure(let failure) = StatusClient.fetch(path: agent.socket, timeout: 2) {
            Issue.record("a client behind the idle ones: \(failure)")
        }
        // The trace's events all arrive meanwhile (P2-A-03 is released at 11 s: its recovery is the last).
        #expect(eventually(25) {
            subscriber.events().filter { $0["type"] as? String == "sensor.recovered" }.count >= 2
        }, "\(subscriber.events().count) events; \(agent.child.stderr)")
        let status = try agent.status()
        #expect(status.outbox.lastSeq > 10)
        agent.stop()
        subscriber.stop()
    }

    /// The status is answered before the next queued input: with tens of thousands of line changes
    /// waiting for the event loop (each stored with a disk sync), `status` still answers at once.
    @Test func theStatusOvertakesABacklog() throws {
        let dir = temporaryDirectory()
        let trace = try busyTrace(dir, count: 40_000, every: 1)
        let agent = try RunningAgent(dir, ["--config", try writeBusyGarage(dir), "--replay", trace.path, "--speed", "10000"],
                                     broker: nil)
        #expect(eventually(10) { agent.child.stderr.contains("agent running") })
        // The first answer may come before the loop has taken its first batch (a loaded host): asked until it has.
        var seen = 0
        #expect(eventually(10) {
            seen = (try? agent.status())?.inputs.map(\.changes).reduce(0, +) ?? 0
            return seen > 0
        })
        #expect(seen > 0 && seen < 40_000, "answered while changes were still queued: \(seen) of 40000 taken")
        agent.stop()
    }

    /// Anything but `status` and a newline gets an error, never a hang; the socket goes on answering.
    @Test func aBadRequestGetsAnError() throws {
        let dir = temporaryDirectory()
        let agent = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, "")], broker: nil)
        func ask(_ request: String) throws -> String {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var addr = try #require(StatusSocket.address(agent.socket))
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(rc == 0)
            _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var answer: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                answer += buffer[..<n]
            }
            return String(decoding: answer, as: UTF8.self)
        }
        #expect(try ask("hello\n") == #"{"error":"unknown request; send \"status\" and a newline"}"# + "\n")
        #expect(try ask(String(repeating: "x", count: 10_000)) == #"{"error":"request longer than 256 bytes"}"# + "\n")
        #expect(try ask("status\n").hasPrefix("{\"boot\":1,"))
        agent.stop()
    }
}


/// `status --config FILE` speaks of FILE's board or of none: an agent of another board answering on the socket asked
/// (the service's, found when FILE's own is not there) is refused with both boards named, never shown as FILE's.
@Suite struct StatusBoardTests {
    @Test func statusForAConfigIsNeverAnotherBoardsAnswer() throws {
        let dir = temporaryDirectory()
        let config = try writeBusyGarage(dir)
        let agent = try RunningAgent(dir, ["--config", config, "--replay", try busyTrace(dir, count: 2).path], broker: nil)
        defer { agent.stop() }
        let other = dir.appendingPathComponent("other.yaml").path
        try (try String(contentsOfFile: config, encoding: .utf8)).replacingOccurrences(of: "device: busy", with: "device: busy-2")
            .write(toFile: other, atomically: true, encoding: .utf8)

        let refused = try Child(agentBinary, ["status", "--config", other, "--socket", agent.socket])
        #expect(refused.wait(10) == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("is testsite/busy, not testsite/busy-2 of \(other)"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty, "another board's status shown: \(refused.stdout)")

        let own = try Child(agentBinary, ["status", "--config", config, "--socket", agent.socket, "--json"])
        #expect(own.wait(10) == 0, "\(own.stderr)")
        #expect(own.stdout.contains(#""device":"busy""#), "\(own.stdout)")
    }
}
