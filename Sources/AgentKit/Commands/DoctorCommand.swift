import ConfigFile
import FoundationEssentials
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import MQTT

/// One command, every check a technician needs before (and while) the agent runs, each with its fix.
enum DoctorCommand {
    static let defaultConfig = "/etc/parkwise-agent/agent.yaml"

    static let spec = CommandSpec(
        name: "doctor", abstract: "Check everything the agent needs, top to bottom, each problem with its fix.",
        discussion: """
        A checklist, ✓ ok, ✗ failed, ! warning (ok/FAIL/warn where the locale is not UTF-8): the config (as
        check-config), the credentials and TLS files (as run checks them; certificates' expiry), whether the
        service runs and what its status socket reports, the board against the config, every configured line
        (present, requestable, level at rest; read from the running service's status instead while it runs; the
        polarity is judged only from evidence that tells wiring from traffic: a lane loop held active far longer
        than a vehicle takes to cross it, a spot that never changed in a day, or --empty-garage), the
        clock (adjtimex), the outbox directory (write + fsync, free space, pending events and the oldest one's age;
        whether the installed systemd unit's sandbox lets the service write it),
        and each broker: name resolution, TCP, TLS handshake and certificate (expiry date), authentication,
        publishing in the device's tree (QoS 1 to .../doctor, MQTT 5 PUBACK reason code, and the message coming
        back: the broker's ACL must allow .../doctor both ways, see deploy/mosquitto/acl.conf), and subscribing to
        its commands (SUBACK). Every network step is bounded by --timeout.
        Run it as the service's user (sudo -u parkwise parkwise-agent doctor); a member of group parkwise gets
        the service's state from its status socket, and what it cannot read is marked "not checked", with why
        and how to get it (never a guess, never ✗). Exit 0 when everything needed
        to run is right (warnings allowed), 1 when a check failed, 78 when the config or the files it names
        are not usable (as check-config).
        """,
        options: [
            .config(help: "The config file (default \(defaultConfig))."),
            .init(name: "json", value: nil, help: "Print the checklist as JSON (ok, exit_code, sections of checks with status, title, detail, fix)."),
            .init(name: "timeout", value: "seconds", help: "Bound of each network step, 0.1 to 60 (default 5)."),
            .init(name: "empty-garage", value: nil,
                  help: "The garage is empty now: every input that reads a vehicle is a wiring or polarity (active_low) mistake. "
                      + "Without it, no polarity advice is drawn from inputs reading occupied, as a full garage reads the same."),
        ])

    static func run(_ args: ParsedArguments) async -> Int32 {
        guard let timeout = Double(args.option("timeout") ?? "5"), timeout >= 0.1, timeout <= 60 else {
            printError(UsageError(command: spec, message: "--timeout must be a number of seconds between 0.1 and 60").text)
            return ExitCode.usage
        }
        let path = args.option("config") ?? defaultConfig
        let json = args.flag("json")
        let emptyGarage = args.flag("empty-garage")
        let symbols = DoctorReport.Symbols.fromLocale(ProcessInfo.processInfo.environment)
        // Every check blocks (files, GPIO, sockets): they run on a thread of their own, off the Swift pool.
        let report: DoctorReport = await withCheckedContinuation { done in
            _ = DedicatedThread {
                done.resume(returning: checkAll(path: path, timeout: timeout, emptyGarage: emptyGarage) { section in
                    if !json { say(DoctorReport.text(section, symbols: symbols)) }
                })
            }
        }
        if json {
            say(report.json)
        } else {
            let checks = report.sections.flatMap(\.checks)
            let count = { (status: ProbeStep.Status) in checks.count(where: { $0.status == status.rawValue }) }
            say("\(StatusWords.plural(checks.count, "check")): \(count(.ok)) ok, \(StatusWords.plural(count(.warning), "warning")), "
                + "\(count(.failed)) failed in "
                + "\(Double(Int(report.wallSeconds * 100)) / 100) s: "
                + (report.ok ? "ready to run" : "NOT ready to run (exit \(report.exitCode))"))
        }
        return report.exitCode
    }

    /// The checklist, top to bottom; `show` gets each section as it is done.
    static func checkAll(path: String, timeout: Double, emptyGarage: Bool = false, show: (DoctorReport.Section) -> Void) -> DoctorReport {
        let start = AgentClock.read(CLOCK_MONOTONIC)
        var report = DoctorReport(config: path)
        func add(_ name: String, _ steps: [ProbeStep]) {
            report.add(name, steps)
            show(report.sections[report.sections.count - 1])
        }
        let config: AgentConfig
        do {
            config = try ConfigFile.load(path: path)
        } catch {
            add("config \(path)", error.issues.map {
                ProbeStep(.failed, "\($0.file):\($0.mark.line):\($0.mark.column): \($0.message)", fix: $0.hint)
            })
            report.exitCode = ExitCode.config
            report.wallSeconds = Double(AgentClock.read(CLOCK_MONOTONIC) - start) / 1e9
            return report
        }
        report.site = config.site
        report.device = config.device
        add("config \(path)", [ProbeStep(.ok, "valid", detail: "site \(config.site), device \(config.device), "
                                         + "\(CheckConfigCommand.count(config.inputs.count, "input")), \(CheckConfigCommand.count(config.mqtt.brokers.count, "broker"))")])
        add("credentials and TLS files", HostChecks.linkFiles(config))
        let filesOK = report.ok
        // (Not a file problem: the broker checks below still run, and show what the broker does with the wrong name.)
        if !config.mqtt.files.isEmpty { add("device identity", HostChecks.identity(config)) }
        let service = ServiceChecks.check(config, configPath: path)
        add("service", service.steps)
        add("board", BoardChecks.board(config))
        add("inputs", BoardChecks.lines(config, service: service, emptyGarage: emptyGarage))
        add("clock", HostChecks.clock())
        add("outbox", HostChecks.outbox(config, status: service.status) + SandboxCheck.steps(config))
        if config.board == .simulated && config.mqtt.brokers.isEmpty {
            add("brokers", [ProbeStep(.ok, "none configured")])
        } else if filesOK, case .success(let credentials) = Result(catching: { () throws(ConfigError) in
            try LinkFiles.check(config.mqtt, configPath: path)
        }) {
            let topics = Topics(site: config.site, device: config.device)
            var settings = LinkSettings(brokers: [], clientID: "parkwise-doctor-\(config.device)-\(getpid())",
                                        keepaliveSeconds: Int(config.mqtt.keepalive.components.seconds), will: nil,
                                        username: credentials?.username, password: credentials?.password, subscriptions: [])
            settings.tls = config.mqtt.tls.map { ($0.ca, $0.cert, $0.key) }
            for broker in config.mqtt.brokers {
                add("broker \(broker)", BrokerProbe.run(
                    settings: settings, broker: .init(host: broker.host, port: broker.port, tls: broker.tls),
                    topics: .init(echo: topics.doctor, commands: topics.commands), timeout: timeout))
            }
        } else if filesOK {
            // The files are right as far as this user may see; the broker checks need what only the agent's user may read.
            add("brokers", [ProbeStep(.warning, "not checked: the brokers, with credentials or keys this user may not read",
                                      fix: "run doctor as the agent's user: sudo -u parkwise parkwise-agent doctor")])
        } else {
            add("brokers", [ProbeStep(.failed, "not checked: the credentials and TLS files above must be right first")])
        }
        report.exitCode = !filesOK ? ExitCode.config : report.ok ? ExitCode.success : ExitCode.failure
        report.wallSeconds = Double(AgentClock.read(CLOCK_MONOTONIC) - start) / 1e9
        return report
    }
}
