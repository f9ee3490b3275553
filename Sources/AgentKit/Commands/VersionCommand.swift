import ParkWiseCLI

enum AgentVersion {
    static let current = "0.2.0"
}

enum VersionCommand {
    static let spec = CommandSpec(name: "version", abstract: "Print the agent's version.")

    static func run(_ args: ParsedArguments) -> Int32 {
        say("parkwise-agent \(AgentVersion.current) (wire contract parkwise/v1)")
        return ExitCode.success
    }
}
