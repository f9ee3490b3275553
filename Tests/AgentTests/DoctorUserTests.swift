import Foundation
import TestSupport
import Testing

/// `doctor` run by someone other than the service's user, on a healthy board: real users (useradd), the state
/// directory owned by a test service user with mode 0750, the agent run as that user. A member of the service's group
/// gets what the status socket tells and no ✗; a stranger is told what was not checked and why, never a guess
/// (issue 22, item 3). Root passes every permission check: the doctors run through runuser.
@Suite(.serialized) struct DoctorUserTests {
    /// A group, a service user in it, a member of it and a stranger, with names of their own; removed by `remove()`.
    struct Users {
        let tag = String(UInt32.random(in: 0..<UInt32.max), radix: 36)
        var group: String { "pwg\(tag)" }
        var service: String { "pwsvc\(tag)" }
        var member: String { "pwmem\(tag)" }
        var stranger: String { "pwout\(tag)" }

        func create() throws {
            for (program, arguments) in [("/usr/sbin/groupadd", ["-r", group]),
                                         ("/usr/sbin/useradd", ["-r", "-M", "-N", "-g", group, "-s", "/usr/sbin/nologin", service]),
                                         ("/usr/sbin/useradd", ["-M", "-N", "-G", group, "-s", "/bin/sh", member]),
                                         ("/usr/sbin/useradd", ["-M", "-N", "-s", "/bin/sh", stranger])] {
                let r = try runAgentProgram(program, arguments)
                guard r.code == 0 else { throw HarnessError("\(program) \(arguments): \(r.err)") }
            }
        }

        func remove() {
            for user in [service, member, stranger] { _ = try? runAgentProgram("/usr/sbin/userdel", [user]) }
            _ = try? runAgentProgram("/usr/sbin/groupdel", [group])
        }
    }

    /// doctor --json as `user`: its exit code, report and output.
    func doctor(as user: String, _ config: String) throws -> (Int32, [String: Any], String) {
        let r = try runAgentProgram("/usr/sbin/runuser", ["-u", user, "--", agentBinary, "doctor", "--config", config, "--json",
                                                           "--timeout", "2"], timeout: 30)
        return (r.code, (try? JSONSerialization.jsonObject(with: Data(r.out.utf8))) as? [String: Any] ?? [:], r.out + r.err)
    }

    func all(_ report: [String: Any]) -> [[String: Any]] {
        ((report["sections"] as? [[String: Any]]) ?? []).flatMap { ($0["checks"] as? [[String: Any]]) ?? [] }
    }

    @Test func aGroupMemberReadsTheServiceAndAStrangerIsToldWhatWasNotChecked() throws {
        let users = Users()
        try users.create()
        defer { users.remove() }
        let dir = temporaryDirectory()
        chmod(dir.path, 0o755)
        let broker = try Broker()
        // The board's broker password as provisioning leaves it: the service's own, mode 0600 (issue 33: a member of
        // the group got 3 ✗ and exit 78 for it, and a fix inviting to make it group-readable).
        let secrets = dir.appendingPathComponent("credentials").path
        try "username=p2-east\npassword=hunter2\n".write(toFile: secrets, atomically: true, encoding: .utf8)
        #expect(try runAgentProgram("/usr/bin/chown", ["\(users.service):\(users.group)", secrets]).code == 0)
        chmod(secrets, 0o600)
        let config = dir.appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: p2-east
        board: simulated
        mqtt: { brokers: ["\(broker.url)"], credentials: \(secrets) }
        outbox: { path: \(dir.path)/outbox }
        levels: [ { id: P1, capacity: 20 } ]
        spots: [ { id: P1-A-01, input: GPIO2 } ]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        chmod(config, 0o644)
        let trace = try writeTrace(dir, "{\"parkwise_trace\": 1}\n{\"t_ms\": 100, \"input\": \"GPIO2\", \"value\": 1}\n")
        chmod(trace, 0o644)
        // The state directory as the package makes it: the service's, mode 0750, its group may look in.
        let outbox = dir.path + "/outbox"
        #expect(mkdir(outbox, 0o750) == 0)
        #expect(try runAgentProgram("/usr/bin/chown", ["\(users.service):\(users.group)", outbox]).code == 0)
        chmod(outbox, 0o750)
        let agent = try Child("/usr/bin/setpriv", ["--reuid=\(users.service)", "--regid=\(users.group)", "--init-groups", agentBinary,
                                                   "run", "--config", config, "--replay", trace])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        #expect(eventually(15) { agent.stderr.contains("status endpoint listening") }, "\(agent.stderr)")
        // The service writes its outbox as events come (the trace parks a car): a real outbox.log, the service's own.
        #expect(eventually(15) { FileManager.default.fileExists(atPath: outbox + "/outbox.log") }, "\(agent.stderr)")

        // A member of the service's group: the service's state through its status socket, no ✗, no chown advice.
        let (code, report, output) = try doctor(as: users.member, config)
        #expect(code == 0, "\(output)")
        #expect(DoctorTests().failed(report).isEmpty, "\(output)")
        let service = DoctorTests().checks(report, section: "service")
        #expect(service.first?["title"] as? String == "the agent service is running"
                && (service.first?["detail"] as? String)?.contains("pid \(agent.pid)") == true, "\(output)")
        let outboxChecks = DoctorTests().checks(report, section: "outbox")
        #expect(outboxChecks.contains { $0["status"] as? String == "ok"
            && $0["title"] as? String == "outbox directory \(outbox) written by the running service" }, "\(output)")
        #expect(outboxChecks.contains { ($0["detail"] as? String)?.hasSuffix("(from the running service)") == true }, "\(output)")
        #expect(!all(report).contains { (($0["fix"] as? String) ?? "").contains("chown") }, "\(output)")
        // The secret it may not read: said not checked, with whose it is and how to check it, never "make it readable".
        let secret = try #require(all(report).first { $0["title"] as? String == "not checked: credentials file \(secrets)" }, "\(output)")
        #expect(secret["status"] as? String == "warning")
        #expect((secret["detail"] as? String)?.contains("owned by \(users.service), mode 600") == true, "\(output)")
        #expect((secret["fix"] as? String)?.contains("sudo -u \(users.service) parkwise-agent doctor") == true, "\(output)")
        #expect(!all(report).contains { (($0["fix"] as? String) ?? "").contains("may read the file") }, "\(output)")
        #expect(all(report).contains { $0["status"] as? String == "warning"
            && ($0["title"] as? String)?.hasPrefix("not checked: the brokers") == true }, "\(output)")

        // A stranger: not the service's state, not a guess at it; what was not checked, why, and how to get it.
        let (strangerCode, strangerReport, strangerOutput) = try doctor(as: users.stranger, config)
        #expect(strangerCode == 0, "\(strangerOutput)")
        #expect(DoctorTests().failed(strangerReport).isEmpty, "\(strangerOutput)")
        let checks = all(strangerReport)
        #expect(!checks.contains { ($0["title"] as? String) == "nothing pending" }, "\(strangerOutput)")
        let pending = checks.first { ($0["title"] as? String) == "not checked: events pending in the outbox" }
        #expect(pending?["status"] as? String == "warning", "\(strangerOutput)")
        #expect((pending?["fix"] as? String)?.contains("members of group \(users.group)") == true, "\(strangerOutput)")
        #expect((pending?["fix"] as? String)?.contains("sudo -u \(users.service) parkwise-agent doctor") == true, "\(strangerOutput)")
        let runs = checks.first { ($0["title"] as? String) == "not checked: whether the agent service runs" }
        #expect((runs?["detail"] as? String)?.contains("permission denied") == true, "\(strangerOutput)")
        #expect(checks.contains { ($0["title"] as? String) == "not checked: write + fsync in outbox directory \(outbox)" }, "\(strangerOutput)")
    }
}
