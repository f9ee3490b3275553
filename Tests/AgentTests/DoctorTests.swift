import Foundation
import TestSupport
import Testing

/// `parkwise-agent doctor` against real brokers (a private mosquitto, the deployed site broker with passwords,
/// ACL and TLS) and real files. The board is simulated: this machine has no GPIO (the VM tests cover the lines).
@Suite struct DoctorTests {
    /// A config for device p2-east of site uniandes (the deployed ACL's site) with these `mqtt:` lines.
    func writeConfig(_ dir: URL, mqtt: String, device: String = "p2-east") throws -> String {
        let path = dir.appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: \(device)
        board: simulated
        mqtt:
        \(mqtt)
        outbox: { path: \(dir.path)/outbox }
        levels: [ { id: P1, capacity: 20 } ]
        spots: [ { id: P1-A-01, input: GPIO2 } ]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func credentials(_ dir: URL, user: String, password: String, mode: Int = 0o600) throws -> String {
        let path = dir.appendingPathComponent("credentials").path
        try "username=\(user)\npassword=\(password)\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode_t(mode))
        return path
    }

    /// Runs doctor with --json; the exit code, the parsed report and stderr.
    func doctor(_ config: String, timeout: String = "3") throws -> (Int32, [String: Any], String) {
        let (code, out, err) = try runAgent(["doctor", "--config", config, "--json", "--timeout", timeout], timeout: 30)
        let report = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] ?? [:]
        return (code, report, err + out)
    }

    /// Every check as "status title", section by section.
    func checks(_ report: [String: Any], section prefix: String) -> [[String: Any]] {
        ((report["sections"] as? [[String: Any]]) ?? []).filter { ($0["name"] as? String)?.hasPrefix(prefix) == true }
            .flatMap { ($0["checks"] as? [[String: Any]]) ?? [] }
    }

    func failed(_ report: [String: Any]) -> [String] {
        ((report["sections"] as? [[String: Any]]) ?? []).flatMap { ($0["checks"] as? [[String: Any]]) ?? [] }
            .filter { $0["status"] as? String == "failed" }.map { "\($0["title"] ?? "") \($0["detail"] ?? "")" }
    }

    @Test func aGoodSetupPassesEveryCheckAndExitsZero() throws {
        let broker = try SiteBroker()
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: """
              brokers: ["mqtt://127.0.0.1:\(broker.plain)"]
              credentials: \(try credentials(dir, user: "p2-east", password: SiteBroker.passwords["p2-east"]!))
            """)
        let (code, report, output) = try doctor(config)
        #expect(code == 0, "\(failed(report)) \(output)")
        #expect(report["ok"] as? Bool == true)
        let titles = checks(report, section: "broker").map { "\($0["status"] ?? "") \($0["title"] ?? "")" }
        #expect(titles == ["ok 127.0.0.1 resolves", "ok TCP connect to 127.0.0.1:\(broker.plain)", "ok authenticated as p2-east",
                           "ok publish QoS 1 to parkwise/v1/uniandes/p2-east/doctor: PUBACK",
                           "ok the message came back through a subscription to parkwise/v1/uniandes/p2-east/doctor",
                           "ok subscribe to its commands parkwise/v1/uniandes/p2-east/cmd/+: granted QoS 1"], "\(output)")
        #expect(checks(report, section: "outbox").first?["title"] as? String == "outbox directory \(dir.path)/outbox does not exist yet")
    }

    /// A credentials file written on Windows (CR LF) with spaces around `=`: the login is the one meant.
    @Test func windowsLineEndsAndSpacesInTheCredentialsFileStillLogIn() throws {
        let broker = try SiteBroker()
        let dir = temporaryDirectory()
        let secrets = dir.appendingPathComponent("credentials").path
        try "username = p2-east\r\npassword = \(SiteBroker.passwords["p2-east"]!) \r\n".write(toFile: secrets, atomically: true, encoding: .utf8)
        chmod(secrets, 0o600)
        let config = try writeConfig(dir, mqtt: """
              brokers: ["mqtt://127.0.0.1:\(broker.plain)"]
              credentials: \(secrets)
            """)
        let (code, report, output) = try doctor(config)
        #expect(code == 0, "\(failed(report)) \(output)")
        #expect(checks(report, section: "broker").contains { $0["title"] as? String == "authenticated as p2-east" }, "\(output)")
    }

    @Test func theTextFormIsAChecklistWithFixes() throws {
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: "  brokers: [\"mqtt://127.0.0.1:\(freePort())\"]")
        let (code, out, _) = try runAgent(["doctor", "--config", config, "--timeout", "2"], timeout: 30)
        #expect(code == 1)
        // ✗ on a UTF-8 locale, FAIL elsewhere (the agent inherits this process's locale).
        let env = ProcessInfo.processInfo.environment
        let locale = [env["LC_ALL"], env["LC_CTYPE"], env["LANG"]].compactMap { $0 }.first { !$0.isEmpty } ?? ""
        let mark = locale.lowercased().contains("utf") ? "✗" : "FAIL"
        #expect(out.contains("\(mark) TCP connect to port"), "\(out)")
        #expect(out.contains("fix: nothing listens on port"))
        #expect(out.contains("NOT ready to run (exit 1)"))
    }

    @Test func withoutAUTF8LocaleTheMarksAreWords() throws {
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: "  brokers: [\"mqtt://127.0.0.1:\(freePort())\"]")
        let (code, out, _) = try runAgentProgram("/usr/bin/env", ["LC_ALL=C", "LANG=C", agentBinary, "doctor", "--config", config])
        #expect(code == 1)
        #expect(out.contains("FAIL TCP connect to port") && out.contains("ok   valid") && out.contains("warn "), "\(out)")
        #expect(!out.contains("✗") && !out.contains("✓"))
    }

    @Test func aBadConfigExits78WithEveryProblem() throws {
        let dir = temporaryDirectory()
        let path = dir.appendingPathComponent("bad.yaml").path
        try "site: uniandes\ndevice: p2-east\nlevels: [ { id: P1, capacity: -3 } ]\nspots: [ { id: P1-A-01, input: NOPE } ]\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let (code, report, output) = try doctor(path)
        #expect(code == 78, "\(output)")
        #expect(report["exit_code"] as? Int == 78)
        let problems = failed(report)
        #expect(problems.count >= 2 && problems.allSatisfy { $0.hasPrefix(path + ":") }, "\(problems)")
    }

    @Test func aCredentialsFileOthersCanReadExits78AsRunWould() throws {
        let broker = try Broker()
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: """
              brokers: ["\(broker.url)"]
              credentials: \(try credentials(dir, user: "p2-east", password: "x", mode: 0o644))
            """)
        let (code, report, output) = try doctor(config)
        #expect(code == 78, "\(output)")
        let files = checks(report, section: "credentials")
        #expect(files.contains { ($0["detail"] as? String)?.contains("is readable by group or others (mode 644)") == true
            && ($0["fix"] as? String)?.hasPrefix("chmod 600") == true }, "\(files)")
        // run refuses the same file, with the same words.
        let run = try runAgent(["run", "--config", config, "--outbox", dir.path + "/outbox"])
        #expect(run.code == 78 && run.err.contains("is readable by group or others (mode 644)"))
    }

    @Test func wrongCredentialsFailAuthentication() throws {
        let broker = try SiteBroker()
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: """
              brokers: ["mqtt://127.0.0.1:\(broker.plain)"]
              credentials: \(try credentials(dir, user: "p2-east", password: "not-the-password"))
            """)
        let (code, report, output) = try doctor(config)
        #expect(code == 1, "\(output)")
        let auth = checks(report, section: "broker").last
        #expect(auth?["status"] as? String == "failed" && (auth?["title"] as? String) == "authentication as p2-east", "\(output)")
        #expect((auth?["fix"] as? String)?.contains("mosquitto_passwd") == true)
    }

    @Test func anotherDevicesTreeIsRefusedInThePuback() throws {
        let broker = try SiteBroker()
        let dir = temporaryDirectory()
        // p3-west's login in a config that says p2-east: the ACL lets it write only parkwise/v1/uniandes/p3-west/...
        let config = try writeConfig(dir, mqtt: """
              brokers: ["mqtt://127.0.0.1:\(broker.plain)"]
              credentials: \(try credentials(dir, user: "p3-west", password: SiteBroker.passwords["p3-west"]!))
            """)
        let (code, report, output) = try doctor(config)
        #expect(code == 1, "\(output)")
        let publish = checks(report, section: "broker").first { ($0["title"] as? String)?.hasPrefix("publish") == true }
        #expect(publish?["status"] as? String == "failed" && (publish?["detail"] as? String)?.contains("0x87") == true, "\(output)")
        // Which name is wrong, before the broker says it (issue 32).
        let identity = checks(report, section: "device identity").first
        #expect(identity?["status"] as? String == "failed"
                && (identity?["title"] as? String)?.contains("has username=p3-west but the config's device is 'p2-east'") == true,
                "\(output)")
        // (mosquitto 2.0 grants a subscription its acl_file will not deliver: the SUBACK cannot show that refusal.)
    }

    @Test func tlsWithTheRightCAShowsTheExpiryAndWithAWrongCAFails() throws {
        let pki = try TestPKI()
        let other = try TestPKI()
        let tlsPort = freePort()
        let broker = try Broker(extraConfig: pki.listener(tlsPort))
        let dir = temporaryDirectory()
        let good = try writeConfig(dir, mqtt: """
              brokers: ["mqtts://127.0.0.1:\(tlsPort)"]
              tls: { ca: \(pki.ca) }
            """)
        let (code, report, output) = try doctor(good)
        #expect(code == 0, "\(failed(report)) \(output)")
        let broker0 = checks(report, section: "broker").map { "\($0["status"] ?? "") \($0["title"] ?? "")" }
        #expect(broker0.contains("ok TLS handshake, broker certificate verified"), "\(broker0)")
        // The test certificates live two days: a warning, with the date.
        #expect(broker0.contains { $0.hasPrefix("warning broker certificate (CN 127.0.0.1) expires on ") }, "\(broker0)")

        let badDir = temporaryDirectory()
        let bad = try writeConfig(badDir, mqtt: """
              brokers: ["mqtts://127.0.0.1:\(tlsPort)"]
              tls: { ca: \(other.ca) }
            """)
        let (badCode, badReport, badOutput) = try doctor(bad)
        #expect(badCode == 1, "\(badOutput)")
        let tls = checks(badReport, section: "broker").first { ($0["title"] as? String)?.hasPrefix("TLS") == true }
        #expect(tls?["status"] as? String == "failed" && tls?["title"] as? String == "TLS handshake and broker certificate",
                "\(badOutput)")
        #expect((tls?["fix"] as? String)?.contains("signed by the CA in mqtt.tls.ca") == true)
        _ = broker
    }

    /// mqtts:// to the broker's plain port: the fix says the port does not speak TLS, not what to change in the
    /// certificates (and there is no certificate expiry to read).
    @Test func mqttsToAPlainPortSaysThePortDoesNotSpeakTLS() throws {
        let broker = try Broker()
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: "  brokers: [\"mqtts://127.0.0.1:\(broker.port)\"]")
        let (code, report, output) = try doctor(config)
        #expect(code == 1, "\(output)")
        let steps = checks(report, section: "broker")
        let tls = try #require(steps.first { ($0["title"] as? String)?.hasPrefix("TLS") == true }, "\(output)")
        #expect(tls["status"] as? String == "failed")
        #expect(tls["title"] as? String == "TLS handshake: 127.0.0.1:\(broker.port) does not speak TLS", "\(tls)")
        #expect(tls["fix"] as? String == "use mqtt://127.0.0.1:\(broker.port) for this port, or keep mqtts:// with the "
                + "broker's TLS port (typically 8883)", "\(tls)")
        #expect(!output.contains("signed by the CA") && !output.contains("expiry date not read"), "\(output)")
        _ = broker
    }

    /// A broker certificate that expired: the handshake's fix says so with the date, not the CA and host name.
    @Test func anExpiredBrokerCertificateSaysRenewItWithItsDate() throws {
        let pki = try TestPKI(serverDays: -1)
        let tlsPort = freePort()
        let broker = try Broker(extraConfig: pki.listener(tlsPort))
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: """
              brokers: ["mqtts://127.0.0.1:\(tlsPort)"]
              tls: { ca: \(pki.ca) }
            """)
        let (code, report, output) = try doctor(config)
        #expect(code == 1, "\(output)")
        let steps = checks(report, section: "broker")
        let tls = try #require(steps.first { $0["title"] as? String == "TLS handshake and broker certificate" }, "\(output)")
        #expect(tls["status"] as? String == "failed")
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        let yesterday = day.string(from: Date(timeIntervalSinceNow: -86_400))   // the certificate's notAfter
        #expect(tls["fix"] as? String == "the broker's certificate (CN 127.0.0.1) expired on \(yesterday): renew it "
                + "(deploy/mosquitto/make-certs.sh makes new ones) and restart the broker", "\(tls)")
        #expect(steps.contains { $0["status"] as? String == "failed"
                    && $0["title"] as? String == "broker certificate (CN 127.0.0.1) expired on \(yesterday)" }, "\(output)")
        _ = broker
    }

    /// This board's own certificate expired (issue 33): the fix is a new certificate for this device and an agent restart,
    /// not a broker restart.
    @Test func anExpiredBoardCertificateSaysIssueOneForThisDeviceNotRestartTheBroker() throws {
        let pki = try TestPKI(deviceDays: -1)
        let tlsPort = freePort()
        let broker = try Broker(extraConfig: pki.listener(tlsPort, requireCertificate: true))
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: """
              brokers: ["mqtts://127.0.0.1:\(tlsPort)"]
              tls: { ca: \(pki.ca), cert: \(pki.deviceCert), key: \(pki.deviceKey) }
            """, device: "busy")
        let (code, report, output) = try doctor(config)
        #expect(code != 0, "\(output)")
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        let yesterday = day.string(from: Date(timeIntervalSinceNow: -86_400))
        let step = try #require(checks(report, section: "credentials").first {
            $0["title"] as? String == "TLS certificate file (CN busy) expired on \(yesterday)" }, "\(output)")
        #expect(step["status"] as? String == "failed")
        let fix = step["fix"] as? String ?? ""
        #expect(fix.contains("sudo deploy/mosquitto/reissue.sh uniandes busy --certificate")
                && fix.contains("sudo tar -xpf uniandes-busy-certificate.tar -C / && sudo systemctl restart parkwise-agent")
                && fix.contains("the broker needs no restart"), "\(fix)")
        #expect(!fix.contains("and restart the broker"), "\(fix)")
        _ = broker
    }

    /// A listener whose queue is full drops new connections' SYNs, as a black-holed address does: doctor ends anyway,
    /// with the TCP step failed after its timeout.
    @Test func aBlackHoledBrokerCannotHangTheDoctor() throws {
        let port = freePort()
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0 && listen(listener, 0) == 0)
        // Fill the accept queue (never accepted): further SYNs are dropped.
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(fd)
        }
        let dir = temporaryDirectory()
        let config = try writeConfig(dir, mqtt: "  brokers: [\"mqtt://127.0.0.1:\(port)\"]")
        let (code, report, output) = try doctor(config, timeout: "2")
        #expect(code == 1, "\(output)")
        let steps = checks(report, section: "broker")
        let last = steps.last
        #expect(last?["status"] as? String == "failed", "\(output)")
        let title = last?["title"] as? String ?? ""
        let detail = last?["detail"] as? String ?? ""
        #expect((title.hasPrefix("TCP connect") && detail.contains("no answer within 2 s"))
                || (title == "MQTT connection" && detail.contains("no CONNACK within 2 s")), "\(output)")
        #expect((report["wall_s"] as? Double ?? 99) < 20)
    }
}

/// While the agent runs, doctor reads its status (link, inputs, outbox) instead of grabbing anything.
@Suite struct DoctorWithServiceTests {
    @Test func aRunningAgentIsReadThroughItsStatus() throws {
        let broker = try Broker()
        let dir = temporaryDirectory()
        let config = try DoctorTests().writeConfig(dir, mqtt: "  brokers: [\"\(broker.url)\"]")
        let agent = try Child(agentBinary, ["run", "--config", config, "--speed", "60"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        var report: [String: Any] = [:], output = ""
        let connected = eventually(15) {
            (_, report, output) = (try? DoctorTests().doctor(config)) ?? (0, [:], "")
            return DoctorTests().checks(report, section: "service").contains { $0["title"] as? String == "its link is connected" }
        }
        #expect(connected, "\(output)\n\(agent.stderr)")
        let service = DoctorTests().checks(report, section: "service")
        #expect((service.first?["detail"] as? String)?.contains("pid \(agent.pid)") == true, "\(service)")
        let inputs = DoctorTests().checks(report, section: "inputs")
        #expect(inputs.first?["title"] as? String == "1 input watched by the running service", "\(inputs)")
        let outbox = DoctorTests().checks(report, section: "outbox")
        #expect(outbox.contains { ($0["detail"] as? String)?.hasSuffix("(from the running service)") == true }, "\(outbox)")
        #expect(DoctorTests().failed(report).isEmpty, "\(output)")
    }
}

/// A full garage is not a wiring fault: doctor advises flipping `active_low` only from evidence that tells wiring
/// from traffic (issue 22, item 2).
@Suite struct DoctorPolarityTests {
    /// Eleven spot sensors and a ramp; the trace parks a vehicle on nine of the spots and leaves them there.
    func fullGarage(_ dir: URL) throws -> (config: String, trace: String) {
        let spots = (1...11).map { "  - { id: P1-A-\(String(format: "%02d", $0)), input: GPIO\($0 + 3) }" }.joined(separator: "\n")
        let config = dir.appendingPathComponent("agent.yaml").path
        try """
        site: uniandes
        device: p2-east
        board: simulated
        outbox: { path: \(dir.path)/outbox }
        levels: [ { id: P1, capacity: 11 } ]
        lanes:
          - { id: P1-ramp, from: outside, to: P1, loops: { a: GPIO20, b: GPIO21 } }
        spots:
        \(spots)
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let trace = "{\"parkwise_trace\": 1}\n" + (1...9).map { "{\"t_ms\": \(100 * $0), \"input\": \"GPIO\($0 + 3)\", \"value\": 1}" }
            .joined(separator: "\n") + "\n"
        return (config, try writeTrace(dir, trace))
    }

    @Test func aFullGarageGetsNoPolarityAdviceAndAnEmptyOneDoes() throws {
        let dir = temporaryDirectory()
        let (config, trace) = try fullGarage(dir)
        let agent = try Child(agentBinary, ["run", "--config", config, "--replay", trace, "--broker", "mqtt://127.0.0.1:9"])
        defer { agent.signal(SIGTERM); _ = agent.wait(10) }
        var inputs: [[String: Any]] = [], output = ""
        let parked = eventually(15) {
            let (_, report, out) = (try? DoctorTests().doctor(config)) ?? (0, [:], "")
            (inputs, output) = (DoctorTests().checks(report, section: "inputs"), out)
            return inputs.contains { ($0["title"] as? String)?.hasPrefix("9 of 13 inputs read occupied") == true }
        }
        #expect(parked, "\(output)\n\(agent.stderr)")
        // Nine parked cars: said, with why nothing is advised, and no config change suggested.
        let occupied = inputs.first { ($0["title"] as? String)?.hasPrefix("9 of 13") == true }
        #expect(occupied?["status"] as? String == "ok", "\(inputs)")
        #expect((occupied?["detail"] as? String)?.contains("no polarity advice") == true, "\(inputs)")
        #expect((occupied?["detail"] as? String)?.contains("--empty-garage") == true, "\(inputs)")
        #expect(!inputs.contains { (($0["fix"] as? String) ?? "").contains("active_low") }, "\(inputs)")
        #expect(!inputs.contains { $0["status"] as? String == "warning" }, "\(inputs)")

        // The technician says the garage is empty: the same nine readings are a wiring or polarity mistake.
        let (_, out, _) = try runAgent(["doctor", "--config", config, "--json", "--timeout", "3", "--empty-garage"], timeout: 30)
        let report = (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] ?? [:]
        let empty = DoctorTests().checks(report, section: "inputs")
        let advice = empty.first { ($0["title"] as? String)?.hasPrefix("9 of 13 inputs read occupied") == true }
        #expect(advice?["status"] as? String == "warning", "\(out)")
        #expect((advice?["title"] as? String)?.contains("--empty-garage") == true, "\(out)")
        #expect((advice?["fix"] as? String)?.contains("flip `active_low`") == true, "\(out)")
        #expect((advice?["detail"] as? String)?.contains("spot P1-A-01 (GPIO4)") == true, "\(out)")
    }
}
