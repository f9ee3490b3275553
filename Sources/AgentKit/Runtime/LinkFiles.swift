import ParkWiseCore
import ServiceSetup
import Uplink

/// The credentials and TLS files a config names, checked as `run` needs them: `check-config` and `doctor` report
/// the same problems (through these same functions), at the line that names the file, before anything runs.
enum LinkFiles {
    /// The credentials (when the config names a file), or every problem found.
    static func check(_ settings: MQTTSettings, configPath: String) throws(ConfigIssues) -> Credentials? {
        var credentials: Credentials?
        var issues: [ConfigIssue] = []
        for file in settings.files {
            do {
                if let loaded = try check(file) { credentials = loaded }
            } catch {
                issues.append(ConfigIssue(file: configPath, mark: file.mark, message: error.message, hint: error.hint))
            }
        }
        guard issues.isEmpty else { throw ConfigIssues(issues) }
        return credentials
    }

    /// One file: readable, and private when it is a secret; the credentials when it is the credentials file.
    static func check(_ file: LinkFile) throws(Credentials.Problem) -> Credentials? {
        switch file.role {
        case .credentials: return try Credentials.load(path: file.path)
        case .key: try Credentials.checkPrivate(file.path, what: file.role.rawValue)
        case .ca, .cert: try Credentials.checkReadable(file.path, what: file.role.rawValue)
        }
        return nil
    }
}
