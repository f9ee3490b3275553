import ConfigFile
import ParkWiseCLI
import ParkWiseCore

enum CheckConfigCommand {
    static let spec = CommandSpec(
        name: "check-config", abstract: "Check a config file and list every problem in it.",
        discussion: "Prints each problem as FILE:LINE:COL with a hint, all at once, then checks the credentials and\nTLS files it names as `run` would. Exit 0 when the file is valid, 78 when it is not.",
        arguments: [.init(name: "file", help: "The config file to check (YAML).")])

    static func run(_ args: ParsedArguments) -> Int32 {
        let path = args.positionals[0]
        do {
            let config = try ConfigFile.load(path: path)
            _ = try LinkFiles.check(config.mqtt, configPath: path)
            say("\(path): ok: site \(config.site), device \(config.device), \(count(config.levels.count, "level")) "
                + "(\(config.levels.map(\.capacity).reduce(0, +)) spaces), \(count(config.lanes.count, "lane")), "
                + "\(count(config.spots.count, "spot")), \(count(config.inputs.count, "input")), board \(describe(config.board))")
            return ExitCode.success
        } catch {
            printConfigProblems(error, path: path)
            return ExitCode.config
        }
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
