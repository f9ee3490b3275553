import ConfigFile
import ParkWiseCLI

enum CheckConfigCommand {
    static let spec = CommandSpec(
        name: "check-config", abstract: "Check a bridge config file and list every problem in it.",
        discussion: "Prints each problem as FILE:LINE:COL with a hint, all at once. Exit 0 when the file is\nvalid, 78 when it is not.",
        options: [.config(help: "The config file to check (YAML).", required: true, positional: true)])

    static func run(_ args: ParsedArguments) -> Int32 {
        let path = args.option("config")!
        do {
            let config = try BridgeConfigReader.read(try ConfigFile.tree(path: path), file: path)
            say("\(path): ok: sites \(config.sites.map { $0.sorted().joined(separator: ",") } ?? "all"), "
                + "devices \(config.devices.map { "\($0.count)" } ?? "all")"
                + (config.partition.map { " (partition \($0): this bridge's share of them)" } ?? "") + ", stale after \(config.staleAfter), "
                + "simulated feeds \(config.acceptSimulated ? "accepted" : "refused"), subscribes \(config.filters.joined(separator: " "))"
                + (config.metricsFile.map { ", metrics to \($0)" } ?? ""))
            return ExitCode.success
        } catch {
            printConfigProblems(error, path: path)
            return ExitCode.config
        }
    }
}
