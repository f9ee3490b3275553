import Glibc
import ParkWiseCLI
import ParkWiseCore
import ServiceSetup

/// `check-config` run as root (as the package's postinst says): root reads every file, so whether the service's user
/// could read the config and the files it names is decided from their owner, group and mode (`ServiceUser`).
enum ServiceUserCheck {
    /// The service's user, `parkwise` as the systemd unit says; a unit changed to another `User=` names it here.
    static let variable = "PARKWISE_AGENT_USER"

    /// Each of the files the service's user could not read, at the line that names it; none when not root, or when
    /// there is no such user (not installed from the package).
    static func issues(config: AgentConfig, configPath: String) -> [ConfigIssue] {
        guard getuid() == 0, let user = ServiceUser.lookup(Environment.value(variable) ?? "parkwise") else { return [] }
        var issues: [ConfigIssue] = []
        if let problem = user.readProblem(configPath, what: "config file", secret: false) {
            issues.append(ConfigIssue(file: configPath, mark: Mark(line: 1, column: 1), message: problem.message, hint: problem.hint))
        }
        for file in config.mqtt.files {
            guard let problem = user.readProblem(file.path, what: file.role.rawValue, secret: file.isSecret) else { continue }
            issues.append(ConfigIssue(file: configPath, mark: file.mark, message: problem.message, hint: problem.hint))
        }
        return issues
    }
}
