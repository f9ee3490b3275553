import Foundation

/// The broker of deploy/mosquitto (mosquitto.conf, acl.conf, make-certs.sh) on free loopback ports:
/// only the ports and file locations are changed; the ACL file is used as it is, and the password
/// file is made with mosquitto_passwd. Ended by its PID.
public final class SiteBroker {
    public static let deploy = packageRoot + "/deploy/mosquitto"
    public static let passwords = ["p2-east": "pw-of-p2-east", "p3-west": "pw-of-p3-west", "parkwise-backend": "pw-of-backend",
                                     "parkwise-admin": "pw-of-admin"]

    public let directory = temporaryDirectory()
    public private(set) var plain = 0, tls = 0, mutual = 0
    public var certs: String { directory.path + "/certs" }
    private var child: Child?

    public init() throws {
        try run("/bin/bash", [SiteBroker.deploy + "/make-certs.sh", certs, "p2-east", "p3-west"])
        let passwd = directory.path + "/passwd"
        guard FileManager.default.createFile(atPath: passwd, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw HarnessError("cannot create \(passwd)")
        }
        for (user, password) in SiteBroker.passwords.sorted(by: { $0.key < $1.key }) {
            try run("/usr/bin/mosquitto_passwd", ["-b", passwd, user, password])
        }
        try FileManager.default.copyItem(atPath: SiteBroker.deploy + "/acl.conf", toPath: directory.path + "/acl.conf")

        let deployed = try String(contentsOfFile: SiteBroker.deploy + "/mosquitto.conf", encoding: .utf8)
        try withFreePorts(3) { ports in
            (plain, tls, mutual) = (ports[0], ports[1], ports[2])
            var config = deployed
            for (from, to) in [("/etc/mosquitto/parkwise/", directory.path + "/"),
                               ("\nlistener 1883 127.0.0.1\n", "\nlistener \(plain) 127.0.0.1\n"),
                               ("\nlistener 8883\n", "\nlistener \(tls) 127.0.0.1\n"),
                               ("\nlistener 8884\n", "\nlistener \(mutual) 127.0.0.1\n")] {
                guard config.contains(from) else { throw HarnessError("deploy/mosquitto/mosquitto.conf has no '\(from)'") }
                config = config.replacingOccurrences(of: from, with: to)
            }
            // What Debian's main mosquitto.conf adds to the conf.d file (persistence), and for the test:
            // run as root (mosquitto would switch to the user 'mosquitto', who cannot read the temporary
            // files); log to stderr so a test can see what it denied.
            config += "\nuser root\nlog_dest stderr\nlog_type all\npersistence true\npersistence_location \(directory.path)/\n"
            child = try startMosquitto(config: config, at: directory.path + "/mosquitto.conf")
        }
    }

    public var log: String { child?.stderr ?? "" }

    public func stop() {
        child?.signal(SIGTERM)
        _ = child?.wait(5)
        child = nil
    }

    deinit { stop() }

    private func run(_ tool: String, _ arguments: [String]) throws {
        let c = try Child(tool, arguments)
        guard c.wait(60) == 0 else { throw HarnessError("\(tool) \(arguments) failed: \(c.stderr)") }
    }

    /// Client options: the plain loopback listener with a user's password (nil: anonymous).
    public func login(_ user: String?) -> [String] {
        var options = ["-h", "127.0.0.1", "-p", "\(plain)"]
        if let user { options += ["-u", user, "-P", SiteBroker.passwords[user] ?? "wrong"] }
        return options
    }

    /// TLS listener: server verified against the test CA, then a password.
    public func loginTLS(_ user: String, ca: String? = nil) -> [String] {
        ["-h", "localhost", "-p", "\(tls)", "--cafile", ca ?? certs + "/ca.crt", "-u", user,
         "-P", SiteBroker.passwords[user] ?? "wrong"]
    }

    /// Mutual TLS listener: the client certificate is the identity.
    public func loginCertificate(_ name: String?) -> [String] {
        var options = ["-h", "localhost", "-p", "\(mutual)", "--cafile", certs + "/ca.crt"]
        if let name { options += ["--cert", certs + "/\(name).crt", "--key", certs + "/\(name).key"] }
        return options
    }

    /// Publishes one QoS 1 message with MQTT 5, so the broker's refusal comes back in the PUBACK.
    /// Returns mosquitto_pub's exit code and whether the broker accepted the message.
    @discardableResult
    public func publish(_ login: [String], _ topic: String, _ payload: String,
                 retain: Bool = false) throws -> (code: Int32, accepted: Bool, err: String) {
        let c = try Child("/usr/bin/mosquitto_pub", login + ["-V", "mqttv5", "-q", "1", "-t", topic, "-m", payload]
                          + (retain ? ["-r"] : []))
        let code = c.wait(10) ?? -1
        return (code, code == 0 && !c.stderr.contains("Not authorized"), c.stderr)
    }
}
