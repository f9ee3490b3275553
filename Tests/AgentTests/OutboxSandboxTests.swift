@testable import AgentKit
import Foundation
import Testing
import TestSupport

/// An outbox.path outside /var/lib/parkwise-agent against the shipped unit's sandbox (ProtectSystem=strict). This
/// machine has no systemd: check-config and doctor read the unit under PARKWISE_SYSTEMD_ROOT, and `run` meets a directory
/// made read-only the way systemd makes it (a read-only bind mount in a mount namespace of its own).
@Suite struct OutboxSandboxTests {
    /// A root with the shipped unit in /lib/systemd/system and these drop-ins (name: text) in /etc.
    func unitRoot(dropIns: [String: String] = [:]) throws -> String {
        let root = temporaryDirectory().path
        let lib = root + "/lib/systemd/system", etc = root + "/etc/systemd/system/parkwise-agent.service.d"
        try FileManager.default.createDirectory(atPath: lib, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: packageRoot + "/deploy/systemd/parkwise-agent.service",
                                         toPath: lib + "/parkwise-agent.service")
        for (name, text) in dropIns { try text.write(toFile: etc + "/" + name, atomically: true, encoding: .utf8) }
        return root
    }

    /// A config whose line 5, column 17, sets outbox.path.
    func writeConfig(outbox: String) throws -> String {
        let path = temporaryDirectory().appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: p2-east
        board: simulated
        mqtt: { brokers: ["mqtt://127.0.0.1:1"] }
        outbox: { path: \(outbox) }
        levels: [ { id: P2, capacity: 4 } ]
        spots: [ { id: P2-A-01, input: GPIO22 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func agent(root: String, _ arguments: [String]) throws -> (code: Int32, out: String, err: String) {
        try runAgentProgram("/usr/bin/env", ["PARKWISE_SYSTEMD_ROOT=\(root)", agentBinary] + arguments, timeout: 30)
    }

    static let dropInHint = "sudo systemctl edit parkwise-agent, add the two lines `[Service]` and `ReadWritePaths="

    /// The postinst's check: an outbox the service could not write is an error at its line, with the drop-in as the
    /// fix; the drop-in's directory must exist; a machine without the unit has nothing to say.
    @Test(.enabled(if: getuid() == 0, "check-config reads the installed unit only as root"))
    func checkConfigAsRootRefusesAnOutboxTheUnitMakesReadOnly() throws {
        let elsewhere = "/srv/parkwise-test-\(UUID().uuidString)"
        let config = try writeConfig(outbox: elsewhere + "/outbox")
        let refused = try agent(root: try unitRoot(), ["check-config", config])
        #expect(refused.code == 78, "\(refused.err)")
        #expect(refused.err.contains("\(config):5:17: error: outbox directory \(elsewhere)/outbox is read-only for the service "
                                     + "(parkwise-agent.service has ProtectSystem=strict: it keeps files only in "
                                     + "/var/lib/parkwise-agent)"), "\(refused.err)")
        #expect(refused.err.contains(Self.dropInHint + "\(elsewhere)/outbox`"), "\(refused.err)")

        let missing = try agent(root: try unitRoot(dropIns: ["override.conf": "[Service]\nReadWritePaths=\(elsewhere)\n"]),
                                ["check-config", config])
        #expect(missing.code == 78, "\(missing.err)")
        #expect(missing.err.contains("error: parkwise-agent.service has ReadWritePaths=\(elsewhere), which does not exist: "
                                     + "systemd does not start the service (status=226/NAMESPACE) until it does"), "\(missing.err)")
        #expect(missing.err.contains("hint: sudo install -d -o parkwise -g parkwise -m 750 \(elsewhere)"))

        let nothingInstalled = try agent(root: temporaryDirectory().path, ["check-config", config])
        #expect(nothingInstalled.code == 0, "\(nothingInstalled.err)")

        // The service's private /tmp is writable, and emptied at every stop; a drop-in naming the directory allows it.
        let directory = temporaryDirectory().path
        let inTmp = try writeConfig(outbox: directory)
        let tmp = try agent(root: try unitRoot(), ["check-config", inTmp])
        #expect(tmp.code == 78)
        #expect(tmp.err.contains("error: outbox directory \(directory) is in the service's private /tmp (parkwise-agent.service "
                                 + "has PrivateTmp=yes): emptied at every stop"), "\(tmp.err)")
        let allowed = try agent(root: try unitRoot(dropIns: ["override.conf": "[Service]\nReadWritePaths=\(directory)\n"]),
                                ["check-config", inTmp])
        #expect(allowed.code == 0, "\(allowed.err)")
    }

    /// The outbox section of doctor's JSON report.
    func outboxChecks(root: String, config: String) throws -> (Int32, [[String: Any]]) {
        let r = try agent(root: root, ["doctor", "--config", config, "--json", "--timeout", "1"])
        let report = (try? JSONSerialization.jsonObject(with: Data(r.out.utf8))) as? [String: Any] ?? [:]
        let sections = (report["sections"] as? [[String: Any]]) ?? []
        return (r.code, sections.first { $0["name"] as? String == "outbox" }?["checks"] as? [[String: Any]] ?? [])
    }

    /// doctor writes the directory from outside the sandbox (and may succeed): it also says whether the service may.
    @Test func doctorSaysWhetherTheServiceMayWriteTheOutbox() throws {
        let directory = temporaryDirectory().path + "/outbox"
        let elsewhere = "/srv/parkwise-test-\(UUID().uuidString)"
        let (code, refused) = try outboxChecks(root: try unitRoot(), config: try writeConfig(outbox: elsewhere))
        #expect(code == 1)
        let failed = try #require(refused.first { $0["status"] as? String == "failed" }, "\(refused)")
        #expect(failed["title"] as? String == "outbox directory \(elsewhere) is read-only for the service (parkwise-agent.service "
                + "has ProtectSystem=strict: it keeps files only in /var/lib/parkwise-agent)")
        #expect((failed["fix"] as? String)?.contains(Self.dropInHint + "\(elsewhere)`") == true, "\(failed)")

        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let root = try unitRoot(dropIns: ["50-outbox.conf": "[Service]\nReadWritePaths=\(directory)\n"])
        let (_, allowed) = try outboxChecks(root: root, config: try writeConfig(outbox: directory))
        let ok = try #require(allowed.first { ($0["title"] as? String)?.hasPrefix("the service may write") == true }, "\(allowed)")
        #expect(ok["status"] as? String == "ok")
        #expect(ok["detail"] as? String == "ReadWritePaths=\(directory); read from \(root)/lib/systemd/system/parkwise-agent.service, "
                + "\(root)/etc/systemd/system/parkwise-agent.service.d/50-outbox.conf")

        // No unit (a laptop, this machine): a note, no failure.
        let (_, laptop) = try outboxChecks(root: temporaryDirectory().path, config: try writeConfig(outbox: elsewhere))
        #expect(laptop.contains { $0["status"] as? String == "ok" && $0["title"] as? String == "the service's sandbox not checked"
                    && $0["detail"] as? String == "no parkwise-agent.service installed on this machine" }, "\(laptop)")
        #expect(!laptop.contains { $0["status"] as? String == "failed" }, "\(laptop)")
    }

    /// Whether this machine lets a test make a directory read-only in a mount namespace of its own (root, and mounts
    /// allowed): the kernel's EROFS, as the service's sandbox gives it.
    static let canMountReadOnly: Bool = {
        guard getuid() == 0 else { return false }
        let dir = temporaryDirectory().path
        let probe = try? Child("/usr/bin/unshare", ["-m", "sh", "-c",
                                                    "mount --bind \(dir) \(dir) && mount -o remount,bind,ro \(dir) && ! touch \(dir)/x"])
        return probe?.wait(10) == 0
    }()

    /// `run` on an outbox directory made read-only (a read-only bind mount in its own mount namespace), `environment`
    /// set, its status socket in `runtime`.
    func agentOnAReadOnlyDirectory(_ directory: String, runtime: String, environment: [String]) throws -> Child {
        let config = try writeConfig(outbox: directory)
        let command = ["mount --bind \(directory) \(directory)", "mount -o remount,bind,ro \(directory)",
                       "exec /usr/bin/env RUNTIME_DIRECTORY=\(runtime) \(environment.joined(separator: " ")) \(agentBinary) run "
                        + "--config \(config) --simulate"].joined(separator: " && ")
        return try Child("/usr/bin/unshare", ["-m", "sh", "-c", command])
    }

    /// Under systemd (INVOCATION_ID set) a read-only outbox directory outside /var/lib/parkwise-agent is most likely the
    /// sandbox: the log's first error says so with the drop-in, and so does the status (`status`, doctor, storage_fault).
    /// Run by hand, it is the file system's mount.
    @Test(.enabled(if: canMountReadOnly, "needs root and mounts: a read-only bind mount in a private mount namespace"))
    func runOnAReadOnlyOutboxSaysWhyAndTheDropIn() throws {
        for underService in [true, false] {
            let directory = temporaryDirectory().path
            let runtime = temporaryDirectory().path
            let agent = try agentOnAReadOnlyDirectory(directory, runtime: runtime,
                                                      environment: underService ? ["INVOCATION_ID=0123abcd"] : [])
            #expect(eventually(15) { agent.stderr.contains("agent running") }, "\(agent.stderr)")
            let first = agent.stderr.split(separator: "\n").first { $0.hasPrefix("error ") }.map(String.init) ?? ""
            #expect(first.hasPrefix("error outbox directory read-only dir=\(directory) error=\"open \(directory)/agent.lock: "
                                    + "Read-only file system (errno 30)\""), "\(agent.stderr)")
            let why = underService
                ? "outbox directory \(directory) is read-only (EROFS): most likely the service's sandbox (ProtectSystem=strict "
                    + "in parkwise-agent.service) lets the agent write only /var/lib/parkwise-agent and its ReadWritePaths="
                : "outbox directory \(directory) is on a read-only file system (EROFS)"
            #expect(first.contains("why=\"\(why)\""), "\(first)")
            #expect(first.contains(underService ? Self.dropInHint + "\(directory)`" : "check findmnt -T \(directory) and dmesg"),
                    "\(first)")
            guard case .success(let status) = StatusClient.fetch(path: runtime + "/status.sock") else {
                Issue.record("no status from \(runtime)/status.sock: \(agent.stderr)")
                agent.signal(SIGTERM)
                _ = agent.wait(10)
                continue
            }
            #expect(status.outbox.problem?.contains("; \(why); fix: ") == true, "\(status.outbox.problem ?? "no problem")")
            agent.signal(SIGTERM)
            #expect(agent.wait(10) == 0, "\(agent.stderr)")
        }
    }

    /// `command` in a mount namespace of its own where `directory` is a file system mounted read-only in itself (a
    /// tmpfs remounted ro: its superblock, as ext4 after I/O errors), not only a read-only view of a writable one.
    func onReadOnlyFileSystem(_ directory: String, _ command: String) throws -> Child {
        try Child("/usr/bin/unshare", ["-m", "sh", "-c", "mount -t tmpfs none \(directory) && mount -o remount,ro \(directory) && "
                                        + "exec " + command])
    }

    /// A missing outbox directory on a file system mounted read-only: `install -d` would fail there, and a drop-in
    /// would not help; both check-config (the unit's ReadWritePaths= directory) and `run` (even under systemd, where a
    /// read-only directory is otherwise most likely the sandbox) say the file system is read-only and how to remount it.
    @Test(.enabled(if: canMountReadOnly, "needs root and mounts: a read-only file system in a private mount namespace"))
    func aMissingDirectoryOnAReadOnlyFileSystemSaysRemountNotInstall() throws {
        let directory = temporaryDirectory().path
        let outbox = directory + "/outbox"
        let config = try writeConfig(outbox: outbox)
        let root = try unitRoot(dropIns: ["override.conf": "[Service]\nReadWritePaths=\(outbox)\n"])
        let check = try onReadOnlyFileSystem(directory, "/usr/bin/env PARKWISE_SYSTEMD_ROOT=\(root) \(agentBinary) check-config \(config)")
        #expect(check.wait(30) == 78, "\(check.stderr)")
        #expect(check.stderr.contains("error: parkwise-agent.service has ReadWritePaths=\(outbox), which does not exist and "
                                      + "cannot be made: \(directory) is mounted read-only"), "\(check.stderr)")
        #expect(check.stderr.contains("hint: the file system at \(directory) is mounted read-only (findmnt -T \(directory); "),
                "\(check.stderr)")
        #expect(check.stderr.contains("sudo mount -o remount,rw \(directory)"), "\(check.stderr)")
        #expect(!check.stderr.contains("hint: sudo install -d"), "\(check.stderr)")

        let runtime = temporaryDirectory().path
        let agent = try onReadOnlyFileSystem(directory, "/usr/bin/env RUNTIME_DIRECTORY=\(runtime) INVOCATION_ID=0123abcd "
                                                + "\(agentBinary) run --config \(config) --simulate")
        defer { agent.signal(SIGKILL) }
        #expect(eventually(15) { agent.stderr.contains("agent running") }, "\(agent.stderr)")
        let first = agent.stderr.split(separator: "\n").first { $0.hasPrefix("error ") }.map(String.init) ?? ""
        #expect(first.hasPrefix("error outbox directory read-only dir=\(outbox) "), "\(agent.stderr)")
        #expect(first.contains("why=\"outbox directory \(outbox) is on a read-only file system (EROFS): \(directory) is "
                               + "mounted read-only\""), "\(first)")
        #expect(first.contains("sudo mount -o remount,rw \(directory)") && !first.contains("ReadWritePaths=")
                    && !first.contains("install -d"), "\(first)")
        // Issue 33: doctor said the service was not running (nobody holds the lock it cannot take); its status socket
        // says it runs, events in memory.
        let doctor = try runAgentProgram("/usr/bin/env", ["RUNTIME_DIRECTORY=\(runtime)", agentBinary, "doctor", "--config", config,
                                                          "--json", "--timeout", "1"], timeout: 30)
        let report = (try? JSONSerialization.jsonObject(with: Data(doctor.out.utf8))) as? [String: Any] ?? [:]
        let service = ((report["sections"] as? [[String: Any]]) ?? []).first { $0["name"] as? String == "service" }?["checks"]
            as? [[String: Any]] ?? []
        let running = service.first { $0["title"] as? String == "the agent service is running" }
        #expect(running?["status"] as? String == "ok"
                && (running?["detail"] as? String)?.contains("nobody holds \(outbox)/agent.lock: its state directory cannot be used") == true,
                "\(service) \(doctor.err)")
        #expect(!doctor.out.contains("the agent service is not running"), "\(doctor.out)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0, "\(agent.stderr)")
    }
}
