import Foundation
import Testing
import TestSupport

/// The credentials and TLS files a config names: what `run` refuses, `check-config` reports first,
/// at the line that names the file, with exit 78.
@Suite struct LinkFileCheckTests {
    func writeConfig(_ dir: URL, mqtt: String) throws -> String {
        let path = dir.appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: p2-east
        board: simulated
        mqtt: \(mqtt)
        levels: [ { id: P2, capacity: 4 } ]
        spots: [ { id: P2-A-01, input: GPIO22 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func checkConfigReportsACredentialsFileOthersCanRead() throws {
        let dir = temporaryDirectory()
        let secrets = dir.appendingPathComponent("credentials").path
        try "username=p2-east\npassword=hunter2\n".write(toFile: secrets, atomically: true, encoding: .utf8)
        chmod(secrets, 0o644)
        let mqtt = "{ brokers: [\"mqtt://127.0.0.1:1\"], credentials: \(secrets) }"
        let path = try writeConfig(dir, mqtt: mqtt)
        let column = "mqtt: ".count + mqtt.distance(from: mqtt.startIndex, to: mqtt.range(of: secrets)!.lowerBound) + 1
        for command in [["check-config", path], ["run", "--config", path]] {
            let r = try runAgent(command)
            #expect(r.code == 78, "\(command[0])")
            #expect(r.err.contains("\(path):4:\(column): error: credentials file \(secrets) is readable by group or others (mode 644)"),
                    "\(command[0]): \(r.err)")
            #expect(r.err.contains("hint: chmod 600 \(secrets)"))
            #expect(!r.err.contains("hunter2"))
        }
        chmod(secrets, 0o600)
        let ok = try runAgent(["check-config", path])
        #expect(ok.code == 0, "\(ok.err)")
    }

    @Test func checkConfigReportsEveryMissingTLSFileAndACredentialsFileWithoutUsername() throws {
        let dir = temporaryDirectory()
        let secrets = dir.appendingPathComponent("credentials").path
        try "password=hunter2\n".write(toFile: secrets, atomically: true, encoding: .utf8)
        chmod(secrets, 0o600)
        let path = try writeConfig(dir, mqtt: """
            { brokers: ["mqtts://127.0.0.1:8883"], credentials: \(secrets),
                    tls: { ca: /nonexistent/ca.pem, cert: /nonexistent/device.pem, key: /nonexistent/device.key } }
            """)
        let r = try runAgent(["check-config", path])
        #expect(r.code == 78)
        let errors = r.err.split(separator: "\n").filter { $0.contains(": error: ") }
        #expect(errors.count == 4, "\(r.err)")
        #expect(r.err.contains("error: credentials file \(secrets) has no username= line"))
        #expect(r.err.contains("agent.yaml:5:20: error: cannot read TLS CA file /nonexistent/ca.pem: No such file or directory"))
        #expect(r.err.contains("error: cannot read TLS certificate file /nonexistent/device.pem: No such file or directory"))
        #expect(r.err.contains("error: cannot read TLS key file /nonexistent/device.key: No such file or directory"))
        #expect(r.err.contains("4 problems found"))
    }

    /// A credentials file and a config naming it; the config's line 4 names the file.
    func withCredentials(_ text: String) throws -> (config: String, secrets: String) {
        let dir = temporaryDirectory()
        let secrets = dir.appendingPathComponent("credentials").path
        try text.write(toFile: secrets, atomically: true, encoding: .utf8)
        chmod(secrets, 0o600)
        return (try writeConfig(dir, mqtt: "{ brokers: [\"mqtt://127.0.0.1:1\"], credentials: \(secrets) }"), secrets)
    }

    /// A key the agent would ignore is a password it never sends: refused at its line, with what was meant.
    @Test func anUnknownKeyInTheCredentialsFileIsAnErrorAtItsLine() throws {
        let (path, secrets) = try withCredentials("# p2-east's login\nusername=p2-east\npass=hunter2\nnot a key\n")
        let outbox = temporaryDirectory().path   // should run start after all, not in this machine's /var/lib
        for command in [["check-config", path], ["run", "--config", path, "--outbox", outbox]] {
            let r = try runAgent(command, timeout: 10)
            #expect(r.code == 78, "\(command[0]): \(r.err)")
            #expect(r.err.contains("\(path):4:"), "\(r.err)")
            #expect(r.err.contains("error: credentials file \(secrets):3: unknown key 'pass' (and 1 more problem in the file)"), "\(r.err)")
            #expect(r.err.contains("hint: did you mean 'password'? the file holds username= and password= lines only"))
            #expect(!r.err.contains("hunter2"))
        }
    }

    /// The ACL lets a device write only under its username: another username loses every event without a word.
    @Test func aUsernameThatIsNotTheDeviceIdIsAnError() throws {
        let (path, secrets) = try withCredentials("username=p3-west\npassword=hunter2\n")
        let r = try runAgent(["check-config", path])
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("error: credentials file \(secrets) has username=p3-west but the config's device is 'p2-east'"), "\(r.err)")
        #expect(r.err.contains("hint: the broker's ACL needs the device id as username: username=p2-east"))
        // `run` goes on (a site may have its own ACL) but says it.
        let agent = try Child(agentBinary, ["run", "--config", path, "--replay", try writeTrace(temporaryDirectory(), ""),
                                            "--outbox", temporaryDirectory().path])
        #expect(eventually(10) { agent.stderr.contains("credentials username is not the device id") }, "\(agent.stderr)")
        agent.signal(SIGTERM)
        #expect(agent.wait(10) == 0)
    }

    /// check-config as root (the postinst's command): root reads anything, the service's user may not. The user is
    /// `nobody` here (PARKWISE_AGENT_USER), as a test machine has no `parkwise`.
    @Test(.enabled(if: getuid() == 0, "needs root: only root can give a file to another user"))
    func asRootAFileTheServiceUserCannotReadIsAnError() throws {
        let (path, secrets) = try withCredentials("username=p2-east\npassword=hunter2\n")
        let asNobody = ["/usr/bin/env", "PARKWISE_AGENT_USER=nobody", agentBinary, "check-config", path]
        let r = try runAgentProgram(asNobody[0], Array(asNobody.dropFirst()))
        #expect(r.code == 78, "\(r.err)")
        #expect(r.err.contains("\(path):4:"), "\(r.err)")
        #expect(r.err.contains("error: credentials file \(secrets) is not readable by the service's user nobody "
                               + "(mode 600, owner root, group root)"), "\(r.err)")
        #expect(r.err.contains("hint: chown nobody: \(secrets) && chmod 0600 \(secrets)"))

        let nobody = getpwnam("nobody")!.pointee
        #expect(chown(secrets, nobody.pw_uid, nobody.pw_gid) == 0)
        let ok = try runAgentProgram(asNobody[0], Array(asNobody.dropFirst()))
        #expect(ok.code == 0, "\(ok.err)")

        // A directory on the way it may not enter.
        let closed = temporaryDirectory()
        chmod(closed.path, 0o700)
        let ca = closed.path + "/ca.pem"
        try "-----BEGIN CERTIFICATE-----\n".write(toFile: ca, atomically: true, encoding: .utf8)
        let tls = try writeConfig(closed, mqtt: "{ brokers: [\"mqtts://127.0.0.1:1\"], tls: { ca: \(ca) } }")
        try FileManager.default.moveItem(atPath: tls, toPath: path + ".tls.yaml")
        let denied = try runAgentProgram("/usr/bin/env", ["PARKWISE_AGENT_USER=nobody", agentBinary, "check-config", path + ".tls.yaml"])
        #expect(denied.code == 78, "\(denied.err)")
        #expect(denied.err.contains("error: TLS CA file \(ca): user nobody may not enter the directory \(closed.path) "
                                    + "(mode 700, owner root, group root)"), "\(denied.err)")
        #expect(denied.err.contains("hint: chgrp nobody \(closed.path) && chmod g+x \(closed.path), or move the file"))
    }
}
