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
}
