import Foundation
import Testing
import TestSupport

/// SIGTERM/SIGINT for `run`: the first stops gracefully (offline status, acknowledgements awaited for a few
/// seconds), a second one later forces the exit; the same request delivered twice at once (to the process and its
/// group) is still one graceful stop.
@Suite struct StopSignalTests {
    /// A running agent whose broker has stopped answering: a graceful stop waits for acknowledgements.
    private func agentWithFrozenBroker(_ dir: URL, _ broker: Broker) throws -> Child {
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        // Its online status on the broker: the event loop has taken the connection (not only the MQTT thread), so
        // a stop from now on has something to wait for.
        #expect(eventually(10) {
            (try? retainedMessages(broker, "parkwise/v1/testsite/p2-east/status"))?.first?.json["state"] as? String == "online"
        }, "\(agent.stderr)")
        broker.pause()
        return agent
    }

    @Test func aSecondSignalForcesTheExitWhileTheGracefulStopWaits() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let agent = try agentWithFrozenBroker(dir, broker)
        agent.signal(SIGTERM)
        #expect(eventually(5) { agent.stderr.contains("stop requested") })
        // A second signal within half a second counts as the same request: this one must come later.
        usleep(700_000)
        agent.signal(SIGTERM)
        let code = agent.wait(10)
        broker.resume()
        #expect(code == 1, "\(agent.stderr)")
        #expect(agent.stderr.contains("second stop signal, forced exit"))
        #expect(!agent.stderr.contains("info stopped "), "the graceful stop did not finish first: \(agent.stderr)")
    }

    @Test func theSameRequestDeliveredTwiceAtOnceIsOneGracefulStop() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let agent = try agentWithFrozenBroker(dir, broker)
        agent.signal(SIGTERM)
        agent.signal(SIGTERM)
        let code = agent.wait(20)
        broker.resume()
        #expect(code == 0, "\(agent.stderr)")
        #expect(!agent.stderr.contains("forced exit"))
        #expect(agent.stderr.contains("broker did not acknowledge everything before stopping"))
    }
}

extension StopSignalTests {
    /// `status --watch` on a terminal, held up by an agent that accepts but never answers: a second Ctrl-C forces
    /// the exit, and the terminal still gets its normal screen and cursor back.
    @Test func aForcedExitOfWatchGivesTheTerminalBack() throws {
        let dir = temporaryDirectory()
        let path = dir.path + "/hung.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 4) == 0)
        // script(1) gives the watch a terminal; its output (the escape sequences) comes back here. It runs the
        // command through $SHELL: `exec` makes the watch script's own child whatever the shell (dash, CI's /bin/sh,
        // would otherwise stay in between and take the signals meant for the watch).
        let script = try Child("/usr/bin/script", ["-qfec", "exec \(agentBinary) status --watch --socket \(path)", "/dev/null"])
        defer { script.signal(SIGKILL) }
        let watch = Self.watchOnScreen(script)
        #expect(watch > 0)
        // The first Ctrl-C just as a request starts: the fake agent takes the watch's connection and never answers, so
        // the watch is held in that request for its 2 s timeout, time enough for the second Ctrl-C. (A Ctrl-C in the
        // second between two requests ends the watch gracefully, no force needed.) The request already waiting when
        // the screen was taken is taken first: the next one is the one that has just started.
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for _ in 0..<2 {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            try #require(poll(&ready, 1, 10_000) == 1, "the watch made no request")
            held.append(accept(listener, nil, nil))
        }
        kill(watch, SIGINT)
        // The watch quits silently (no "stop requested"): the signal taken from its pending set is what says it came.
        #expect(eventually(5) { Self.noSignalPending(watch) })
        usleep(700_000)   // a second signal within half a second would be the same request
        kill(watch, SIGINT)
        #expect(script.wait(10) != nil)
        let out = script.stdout
        #expect(out.contains("forced exit"), "\(out.debugDescription)")
        let forced = try #require(out.range(of: "forced exit"))
        #expect(out[forced.upperBound...].contains("\u{1B}[?25h\u{1B}[?1049l"), "\(out.debugDescription)")
    }
}

extension StopSignalTests {
    /// The watch `script` runs, once it has taken the alternate screen (0 if not within 5 s).
    static func watchOnScreen(_ script: Child) -> Int32 {
        var watch: Int32 = 0
        let shown = eventually(5) {
            let children = (try? String(contentsOfFile: "/proc/\(script.pid)/task/\(script.pid)/children", encoding: .utf8)) ?? ""
            watch = children.split(separator: " ").first.flatMap { Int32($0) } ?? 0
            return watch > 0 && script.stdout.contains("\u{1B}[?1049h")
        }
        return shown ? watch : 0
    }

    /// Whether process `pid` has no signal waiting (its own or its thread group's): sigwait has taken it.
    static func noSignalPending(_ pid: Int32) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return false }
        let pending = text.split(separator: "\n").filter { $0.hasPrefix("SigPnd:") || $0.hasPrefix("ShdPnd:") }
        return pending.count == 2 && pending.allSatisfy { $0.split(separator: "\t").last.map { UInt64($0, radix: 16) == 0 } == true }
    }

    /// Quitting a technician's tool (Ctrl-C in `status --watch`, `diagnose`) is not news: nothing is logged. `run`
    /// still logs "stop requested" for the journal (the tests above).
    @Test func quittingTheWatchOrDiagnoseIsSilent() throws {
        let dir = temporaryDirectory()
        let watch = try Child("/usr/bin/script", ["-qfec", "exec \(agentBinary) status --watch --socket \(dir.path)/none.sock",
                                                  "/dev/null"])
        defer { watch.signal(SIGKILL) }
        let pid = Self.watchOnScreen(watch)
        #expect(pid > 0, "\(watch.stdout.debugDescription)")
        kill(pid, SIGINT)
        #expect(watch.wait(10) != nil)
        #expect(!watch.stdout.contains("stop requested"), "\(watch.stdout.debugDescription)")

        let diagnose = try Child(agentBinary, ["diagnose", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, "")])
        defer { diagnose.signal(SIGKILL) }
        #expect(eventually(10) { diagnose.stdout.contains("trace finished") }, "\(diagnose.stderr)")
        diagnose.signal(SIGINT)
        #expect(diagnose.wait(10) == 0, "\(diagnose.stderr)")
        #expect(diagnose.stdout.contains("summary after"), "\(diagnose.stdout)")
        #expect(!diagnose.stderr.contains("stop requested") && !diagnose.stdout.contains("stop requested"),
                "\(diagnose.stderr)")
    }
}
