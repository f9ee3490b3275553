import ConfigFile
import FoundationEssentials
import Glibc
import ParkWiseCLI
import ParkWiseCore
import ParkWiseLog
import Synchronization
import ServiceSetup

enum RunCommand {
    static let spec = CommandSpec(
        name: "run", abstract: "Run the agent: read the sensors and publish to the broker.",
        discussion: """
        With `board: simulated` in the config, or --simulate, a traffic simulator drives every
        configured input; with --replay, a recorded trace does. Both feed the same pipeline as GPIO.
        SIGTERM or SIGINT stops gracefully (offline status, clean disconnect); a second one forces.
        """,
        options: [
            .config(help: "The config file (YAML).", required: true),
        ] + SourceChoice.options + [
            .init(name: "broker", value: "url", help: "Use this broker instead of the config's (e.g. mqtt://127.0.0.1:1883)."),
            .init(name: "outbox", value: "dir", help: "Keep the outbox and counters here instead of the config's outbox.path."),
            .init(name: "line-queue", value: "n", help: "Line changes waiting for the event loop, at most (default 4096); "
                  + "beyond that an overloaded agent sheds changes, keeps each input's last level and says so (input.shed)."),
            .init(name: "verbose", value: nil, help: "Log every event (debug level)."),
        ])

    /// Runs on the calling (main) thread without Swift concurrency: see `AgentRuntime` and `StopSignals`.
    static func run(_ args: ParsedArguments) -> Int32 {
        let service = ServiceNotifier(environment: Environment.values(ServiceNotifier.variables))
        let code = run(args, service: service)
        if code != ExitCode.success { service.exiting(code: code, reason: LastError.text) }
        return code
    }

    private static func run(_ args: ParsedArguments, service: ServiceNotifier) -> Int32 {
        // A stop asked for while starting (systemd stops a service that is still starting) is kept, and the agent
        // stops gracefully as soon as it runs.
        let early = EarlyStop()
        StopSignals.handle(announce: true, onStop: { early.asked.store(true, ordering: .releasing) })
        let path = args.option("config")!
        if args.flag("verbose") || Environment.value("PARKWISE_LOG") == "debug" { Log.threshold = .debug }
        var config: AgentConfig
        let configHash: String
        do { (config, configHash) = try ConfigFile.loadFingerprinted(path: path) } catch {
            printConfigIssues(error)
            return ExitCode.config
        }
        if let url = args.option("broker") {
            guard let broker = BrokerAddress.parse(url) else {
                printError(UsageError(command: spec, message: "'\(url)' is not a broker address like mqtt://HOST:PORT").text)
                return ExitCode.usage
            }
            config.mqtt.brokers = [broker]
        }
        if let dir = args.option("outbox") { config.outbox.path = dir }
        if let lowered = config.outbox.capacityLowered {
            Log.warn("outbox.capacity lowered to what the service's memory holds",
                     ["set": config.outbox.capacity, "used": ConfigDefaults.outboxCapacityLimit, "hint": lowered.hint ?? ""])
            config.outbox.capacity = ConfigDefaults.outboxCapacityLimit
        }
        let credentials: Credentials?
        do { credentials = try LinkFiles.check(config.mqtt, configPath: path) } catch {
            printConfigIssues(error)
            return ExitCode.config
        }
        if let credentials, credentials.username != config.device {
            // check-config refuses this; a site with its own broker ACL may want it, so `run` only says it.
            Log.warn("credentials username is not the device id: the broker ACL this project ships refuses every publish",
                     ["username": credentials.username, "device": config.device])
        }

        var lineQueue = 4096
        if let text = args.option("line-queue") {
            guard let n = Int(text), n >= 1, n <= 1_000_000 else {
                printError(UsageError(command: spec, message: "--line-queue must be a whole number from 1 to 1000000").text)
                return ExitCode.usage
            }
            lineQueue = n
        }
        let opened = SourceChoice.open(args, config: config, command: spec)
        guard case .opened(let source, let clock) = opened else { return opened.exitCode }

        if let problem = StateDirectoryAccess.problem(directory: config.outbox.path) {
            printError("error: \(problem)")
            return ExitCode.config
        }
        let lock = StateDirectoryLock.acquire(directory: config.outbox.path)
        if case .held(let holder) = lock {
            printError("error: another parkwise-agent (\(holder)) is using \(config.outbox.path)\n"
                       + "    hint: stop it first (systemctl stop parkwise-agent), or give this one its own --outbox")
            return ExitCode.failure
        }
        defer { withExtendedLifetime(lock) {} }
        let readOnly = readOnlyDirectory(lock, config.outbox.path)
        // A file-size limit (or a full quota) must fail the write, not kill the agent.
        signal(SIGXFSZ, SIG_IGN)
        let runtime: AgentRuntime
        do {
            runtime = try AgentRuntime(config: config, source: source, clock: clock, credentials: credentials,
                                       options: .init(configHash: configHash, mode: source.mode,
                                                     service: service,
                                                     lineQueueBound: lineQueue, readOnly: readOnly))
        } catch {
            // Restarting cannot heal a count at its end: exit as for a config error, which systemd does not restart.
            printError("error: \(error)")
            return ExitCode.config
        }
        StopSignals.handle(announce: true, onStop: { runtime.requestStop() })
        if early.asked.load(ordering: .acquiring) { runtime.requestStop() }
        let statusPath = StatusSocket.path(runtimeDirectory: Environment.value("RUNTIME_DIRECTORY"),
                                           outboxPath: config.outbox.path)
        let statusServer = StatusServer.start(path: statusPath) { runtime.requestStatus($0) }
        let code = runtime.run()
        statusServer?.stop()
        return code
    }

    /// An outbox directory that refused its lock file with EROFS, said once and first (the state file's and the outbox's
    /// own errors follow, each with only its errno): why it is read-only, most likely the service's sandbox, and the fix.
    static func readOnlyDirectory(_ lock: StateDirectoryLock.Outcome, _ directory: String) -> ServiceSetupError? {
        guard case .unusable(let failure) = lock, failure.errno == .readOnlyFileSystem else { return nil }
        // systemd sets INVOCATION_ID for every service it runs.
        let problem = ServiceSandbox.readOnly(directory: directory, underService: Environment.value("INVOCATION_ID") != nil)
        Log.error("outbox directory read-only", ["dir": directory, "error": failure, "why": problem.message, "fix": problem.hint])
        return problem
    }
}

/// A stop signal that came before the runtime existed.
private final class EarlyStop: Sendable {
    let asked = Atomic<Bool>(false)
}
