import ConfigFile
import FoundationEssentials
import ParkWiseCLI
import ParkWiseContract
import ParkWiseLog
import Postgres
import ServiceSetup
import MQTT

enum RunCommand {
    static let spec = CommandSpec(
        name: "run", abstract: "Apply the agents' MQTT feed to the backend's database.",
        discussion: """
        Subscribes with a fixed client id and a persistent session, so the broker queues the feed
        while the bridge is away. Writes spots (source 'sensor'), reservation check-ins and
        check-outs, and occupancy snapshots; see deploy/backend/README.md. The database must have
        been migrated (parkwise-bridge migrate); --migrate migrates one behind this bridge first
        (when its role may: exit 78 with the fix when not). SIGTERM or SIGINT stops gracefully (what
        was received is committed first; a failing database holds the stop at most stop_grace,
        then it exits 1); a second one forces. With `metrics_file` in the config, the figures operators
        scrape (events applied, commit lag, database errors, the broker link, each device's state) go
        there for node-exporter's textfile collector, rewritten only when they change
        (deploy/prometheus/README.md).
        """,
        options: [
            .init(name: "broker", value: "url", help: "The broker, e.g. mqtt://127.0.0.1:1883 or mqtts://broker:8883; the nodes of a clustered broker separated by commas (mqtt://a:1883,mqtt://b:1883,mqtt://c:1883), tried in turn.", required: true),
            Connections.databaseOption,
            .config(help: "Bridge settings (YAML): sites, devices, stale_after, metrics_file, …"),
            .init(name: "start-timeout", value: "seconds", help: "Give up when the broker cannot be reached this long at start (default 10)."),
            .init(name: "migrate", value: nil, help: "Migrate a database behind this bridge's schema before running (as `migrate`)."),
            .init(name: "verbose", value: nil, help: "Log every batch (debug level)."),
        ])

    /// Under systemd (`Type=notify`): READY=1 once the broker is reached, so `systemctl start` waits for it and fails
    /// when the bridge exits first; STATUS= with the last error line before a failed exit.
    static func run(_ args: ParsedArguments) -> Int32 {
        let service = ServiceNotifier(environment: Environment.values(ServiceNotifier.variables))
        let code = run(args, service: service)
        if code != ExitCode.success { service.exiting(code: code, reason: LastError.text) }
        return code
    }

    private static func run(_ args: ParsedArguments, service: ServiceNotifier) -> Int32 {
        if args.flag("verbose") || Environment.value("PARKWISE_LOG") == "debug" { Log.threshold = .debug }
        guard let brokers = Connections.brokers(args.option("broker")!, command: spec) else { return ExitCode.usage }
        guard let timeout = Double(args.option("start-timeout") ?? "10"), timeout > 0 else {
            printError(UsageError(command: spec, message: "--start-timeout must be a number of seconds").text)
            return ExitCode.usage
        }
        var config = BridgeConfig()
        if let path = args.option("config") {
            do { config = try BridgeConfigReader.read(try ConfigFile.tree(path: path), file: path) } catch {
                printConfigProblems(error, path: path)
                return ExitCode.config
            }
        }
        let credentials: Credentials?
        do {
            credentials = try config.credentials.map(Credentials.load)
            if let key = config.tls?.key { try Credentials.checkPrivate(key, what: "TLS key file") }
        } catch {
            printError("error: \(error)")
            return ExitCode.config
        }
        let db: PostgresConnection, url: String
        switch Connections.database(args, command: spec) {
        case .failed(let code): return code
        case .ok(let connection, let text): (db, url) = (connection, text)
        }
        let migrate = args.flag("migrate")
        if let code = Connections.checkSchema(db, url: url, needVersion: migrate ? nil : Migrations.latest) { return code }
        if migrate, let code = MigrateCommand.upgrade(db, url: url) { return code }
        let known: [DeviceKey: DeviceGate.Feed]
        do {
            known = Dictionary(try db.query(SQL.deviceModes).rows.compactMap { row -> (DeviceKey, DeviceGate.Feed)? in
                guard let site = row[0], let device = row[1] else { return nil }
                return (DeviceKey(site: site, device: device), row[2].map { .marked($0) } ?? .live)
            }, uniquingKeysWith: { a, _ in a })
        } catch {
            printError("error: cannot read sensor_devices: \(error)" + Connections.privilegeHint(error, db))
            return ExitCode.failure
        }

        var link = LinkSettings(brokers: brokers.map { .init(host: $0.host, port: $0.port, tls: $0.tls) },
                                clientID: config.clientID, keepaliveSeconds: 30, will: nil,
                                username: credentials?.username, password: credentials?.password,
                                subscriptions: config.filters)
        link.cleanSession = false
        link.unreachableMessage = "broker unreachable, it queues for this session meanwhile"
        link.tls = config.tls
        let databaseURL = args.option("database") ?? Environment.value("DATABASE_URL") ?? ""
        let runtime = BridgeRuntime(settings: .init(databaseURL: databaseURL, link: link, config: config,
                                                    startTimeout: timeout, service: service))
        Log.info("bridge starting", ["database": url, "broker": brokers.map(\.description).joined(separator: ","), "accept_simulated": config.acceptSimulated])
        StopSignals.handle(announce: true, onStop: { runtime.requestStop() })
        let code = runtime.run(db: db, knownFeeds: known)
        StopSignals.release()
        return code
    }
}
