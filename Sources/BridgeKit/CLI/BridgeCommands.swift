import ParkWiseCLI
import ParkWiseContract

/// The bridge's subcommands, in the order `help` lists them.
public enum BridgeCommands {
    static let version = "0.2.0"

    static let program = Program(
        summary: """
        ParkWise backend bridge: applies the agents' MQTT feed (occupancy, check-ins, faults)
        to ParkWise's PostgreSQL tables in place of the occupancy simulator.
        """,
        version: version, contract: Topics.root,
        commands: [RunCommand.spec, MigrateCommand.spec, CheckConfigCommand.spec, ExportConfigCommand.spec, FleetCommand.spec])

    /// Runs the command line; returns the exit code.
    public static func main(_ args: [String]) -> Int32 {
        switch program.resolve(args) {
        case .exit(let code): return code
        case .run(let spec, let parsed):
            switch spec.name {
            case RunCommand.spec.name: return RunCommand.run(parsed)
            case MigrateCommand.spec.name: return MigrateCommand.run(parsed)
            case CheckConfigCommand.spec.name: return CheckConfigCommand.run(parsed)
            case ExportConfigCommand.spec.name: return ExportConfigCommand.run(parsed)
            case FleetCommand.spec.name: return FleetCommand.run(parsed)
            default: return ExitCode.usage
            }
        }
    }
}
