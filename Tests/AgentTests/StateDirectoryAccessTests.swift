import Foundation
import Testing
import TestSupport

/// `run` refuses a state directory it would spoil or cannot keep, before it creates anything: run as root where the
/// service's user owns it, or run as a user who may not write what is in it (a root run's leftovers).
@Suite struct StateDirectoryAccessTests {
    /// A directory anyone may read, with a config for the simulated garage and an outbox directory owned by `nobody`.
    func setUp() throws -> (config: String, outbox: String, nobody: uid_t) {
        let dir = temporaryDirectory()
        #expect(chmod(dir.path, 0o755) == 0)
        let config = dir.appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: p2-east
        board: simulated
        mqtt: { brokers: ["mqtt://127.0.0.1:9"] }
        levels:
          - { id: P1, capacity: 1 }
        spots:
          - { id: P1-A-01, input: GPIO17 }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        #expect(chmod(config, 0o644) == 0)
        let outbox = dir.appendingPathComponent("outbox").path
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: false)
        let nobody = getpwnam("nobody")!.pointee
        #expect(chown(outbox, nobody.pw_uid, nobody.pw_gid) == 0 && chmod(outbox, 0o750) == 0)
        return (config, outbox, nobody.pw_uid)
    }

    @Test(.enabled(if: getuid() == 0, "needs root"))
    func aRunAsRootInTheServicesDirectoryIsRefusedWithWhomToRunAs() throws {
        let (config, outbox, _) = try setUp()
        let r = try runAgent(["run", "--config", config, "--outbox", outbox])
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("error: \(outbox) belongs to user nobody: run as root, the agent would leave files in it"), "\(r.err)")
        #expect(r.err.contains("hint: run it as that user (sudo -u nobody parkwise-agent run ...)"), "\(r.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outbox).isEmpty, "nothing created")
        // A directory of its own (not there yet, under one root owns) is root's to use.
        let own = (config as NSString).deletingLastPathComponent + "/root-outbox"
        let child = try Child(agentBinary, ["run", "--config", config, "--outbox", own])
        defer { child.signal(SIGKILL); _ = child.wait(5) }
        #expect(eventually(10) { FileManager.default.fileExists(atPath: own + "/agent.lock") }, "\(child.stderr)")
    }

    /// A capacity above what the service's memory holds (configs said up to 100000): check-config warns at its line and
    /// passes, and `run` keeps 20000 and says so, rather than stop a board that an upgrade finds with it.
    @Test func aLargeOutboxCapacityIsLoweredAndSaid() throws {
        let (config, _, _) = try setUp()
        try (String(contentsOfFile: config, encoding: .utf8) + "\noutbox: { capacity: 50000 }\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let check = try runAgent(["check-config", config])
        #expect(check.code == 0, "\(check.err)")
        #expect(check.err.contains("\(config):9:21: warning: outbox.capacity 50000 is more than the agent keeps: it uses 20000"),
                "\(check.err)")
        let own = (config as NSString).deletingLastPathComponent + "/own-outbox"
        let child = try Child(agentBinary, ["run", "--config", config, "--outbox", own])
        defer { child.signal(SIGKILL); _ = child.wait(5) }
        #expect(eventually(10) { child.stderr.contains("warn outbox.capacity lowered to what the service's memory holds set=50000 used=20000") },
                "\(child.stderr)")
    }

    @Test(.enabled(if: getuid() == 0, "needs root: to run the agent as another user"))
    func aFileTheAgentsUserMayNotWriteIsSaidWithTheChown() throws {
        let (config, outbox, _) = try setUp()
        let asNobody = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", agentBinary, "run", "--config", config, "--outbox", outbox]
        // What the agent never writes is no business of this check: a mount point's lost+found, a file a repair set aside.
        try FileManager.default.createDirectory(atPath: outbox + "/lost+found", withIntermediateDirectories: false)
        #expect(chmod(outbox + "/lost+found", 0o700) == 0)
        try Data("x".utf8).write(to: URL(fileURLWithPath: outbox + "/outbox.log.corrupt-1"))
        #expect(chmod(outbox + "/outbox.log.corrupt-1", 0o600) == 0)
        do {
            let child = try Child("/usr/bin/setpriv", asNobody)
            defer { child.signal(SIGKILL); _ = child.wait(5) }
            #expect(eventually(10) { FileManager.default.fileExists(atPath: outbox + "/agent.lock") }, "\(child.stderr)")
        }
        let leftover = outbox + "/outbox.log"
        try Data().write(to: URL(fileURLWithPath: leftover))
        #expect(chown(leftover, 0, 0) == 0 && chmod(leftover, 0o640) == 0)   // root's, as a run with sudo leaves it
        let r = try runAgentProgram("/usr/bin/setpriv", asNobody)
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("error: cannot write \(leftover) (mode 640, owner root, group root): the agent, running as nobody, would keep nothing on disk"), "\(r.err)")
        #expect(r.err.contains("hint: give the state directory back to nobody: sudo chown -R nobody: \(outbox)"), "\(r.err)")
    }
}
