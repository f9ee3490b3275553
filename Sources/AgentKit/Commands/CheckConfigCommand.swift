import ConfigFile
import ParkWiseCLI
import ParkWiseCore

enum CheckConfigCommand {
    static let spec = CommandSpec(
        name: "check-config", abstract: "Check a config file and list every problem in it.",
        discussion: """
            Prints each problem as FILE:LINE:COL with a hint, all at once, then checks the credentials and
            TLS files it names as `run` would, and that the credentials' username and the client certificate's
            CN are the device id (the broker's ACL needs it). Run as root, it also checks that the service's user (parkwise, or
            $PARKWISE_AGENT_USER) may read the config and those files, and that the installed systemd unit
            (with its drop-ins) lets the service write outbox.path. With --spots, every spot id must be in
            that list (the backend's spots, one id a line, as `parkwise-bridge export-config --spots`
            writes it). A spot whose input is still UNSET (as export-config leaves it) is refused as
            "input not set". Exit 0 when the file is valid, 78 when it is not.
            """,
        options: [.config(help: "The config file to check (YAML).", required: true, positional: true),
                  .init(name: "spots", value: "file",
                        help: "The backend's spot ids, one a line (# comments): refuse a spot id not in it.")])

    static func run(_ args: ParsedArguments) -> Int32 {
        let path = args.option("config")!
        let config: AgentConfig
        do { config = try ConfigFile.load(path: path) } catch {
            printConfigProblems(error, path: path)
            return ExitCode.config
        }
        var issues = ServiceUserCheck.issues(config: config, configPath: path) + SandboxCheck.issues(config: config, configPath: path)
        if let listPath = args.option("spots") {
            switch BackendSpotList.read(path: listPath) {
            case .failure(let problem):
                printError("error: \(problem.message)\n    hint: \(problem.hint)")
                return ExitCode.config
            case .success(let list):
                issues = list.unknownSpots(config, configPath: path) + issues
            }
        }
        do {
            let credentials = try LinkFiles.check(config.mqtt, configPath: path)
            issues += LinkFiles.identityIssues(config.mqtt.files, device: config.device, credentials: credentials, configPath: path)
        } catch {
            issues = error.issues + issues
        }
        guard issues.isEmpty else {
            printConfigProblems(ConfigError(issues), path: path)
            return ExitCode.config
        }
        if var lowered = config.outbox.capacityLowered {
            lowered.file = path
            printError(lowered.text(as: "warning"))
        }
        say("\(path): ok: site \(config.site), device \(config.device), \(count(config.levels.count, "level")) "
            + "(\(count(config.levels.map(\.capacity).reduce(0, +), "space"))), \(count(config.lanes.count, "lane")), "
            + "\(count(config.spots.count, "spot")), \(count(config.inputs.count, "input")), board \(describe(config.board))")
        return ExitCode.success
    }

    static func count(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }

    static func describe(_ board: BoardChoice) -> String {
        switch board {
        case .simulated: return "simulated"
        case .auto: return "auto"
        case .named(let name): return name
        }
    }
}
