import ParkWiseCLI
import ParkWiseContract

/// The subcommands, in the order `help` lists them.
public enum Commands {
    static let program = Program(
        summary: """
        ParkWise gate & sensor agent: reads a garage's lane loops and spot sensors and
        publishes occupancy, passages, check-ins and faults over MQTT.
        """,
        version: AgentVersion.current, contract: Topics.root,
        commands: [RunCommand.spec, CheckConfigCommand.spec, DoctorCommand.spec, LinesCommand.spec, DiagnoseCommand.spec,
                   WalkTestCommand.spec, StatusCommand.spec, MonitorCommand.spec],
        onSite: [
            ("doctor", "Checks config, files, inputs, outbox, broker; each failure with its fix."),
            ("walk-test", "Trigger each loop and spot in turn: is each sensor on its line?"),
            ("status", "What the running service sees: link, counts, inputs (--watch: live)."),
        ])

    /// The commands that need no Swift concurrency (`run` above all: an agent that never touches Dispatch's worker
    /// pool has no timer waking it every second), run on the calling thread; nil for the others.
    public static func mainWithoutConcurrency(_ args: [String]) -> Int32? {
        switch program.resolve(args) {
        case .exit(let code): return code
        case .run(let spec, let parsed):
            switch spec.name {
            case RunCommand.spec.name: return RunCommand.run(parsed)
            case CheckConfigCommand.spec.name: return CheckConfigCommand.run(parsed)
            case LinesCommand.spec.name: return LinesCommand.run(parsed)
            case DiagnoseCommand.spec.name: return DiagnoseCommand.run(parsed)
            default: return nil
            }
        }
    }

    /// Runs the command line; returns the exit code.
    public static func main(_ args: [String]) async -> Int32 {
        let spec: CommandSpec, parsed: ParsedArguments
        switch program.resolve(args) {
        case .exit(let code): return code
        case .run(let s, let p): (spec, parsed) = (s, p)
        }
        switch spec.name {
        case DoctorCommand.spec.name: return await DoctorCommand.run(parsed)
        case WalkTestCommand.spec.name: return await WalkTestCommand.run(parsed)
        case StatusCommand.spec.name: return await StatusCommand.run(parsed)
        case MonitorCommand.spec.name: return await MonitorCommand.run(parsed)
        default: return mainWithoutConcurrency(args) ?? ExitCode.usage
        }
    }
}
