/// The agent's version: `version` and `--version` print it (Program.versionLine), its status reports it.
enum AgentVersion {
    static let current = "0.2.0"
}
