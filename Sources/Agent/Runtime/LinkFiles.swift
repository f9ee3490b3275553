import ParkWiseCore
import Uplink

/// The credentials and TLS files a config names, checked as `run` needs them: `check-config` reports
/// the same problems, at the line that names the file, before anything runs.
enum LinkFiles {
    /// The credentials (when the config names a file), or every problem found.
    static func check(_ settings: MQTTSettings, configPath: String) throws(ConfigIssues) -> Credentials? {
        var credentials: Credentials?
        var issues: [ConfigIssue] = []
        for file in settings.files {
            do {
                switch file.role {
                case .credentials: credentials = try Credentials.load(path: file.path)
                case .key: try Credentials.checkPrivate(file.path, what: file.role.rawValue)
                case .ca, .cert: try Credentials.checkReadable(file.path, what: file.role.rawValue)
                }
            } catch {
                issues.append(ConfigIssue(file: configPath, mark: file.mark, message: error.message, hint: error.hint))
            }
        }
        guard issues.isEmpty else { throw ConfigIssues(issues) }
        return credentials
    }
}
