import ParkWiseCore
import ServiceSetup
import SystemIO

/// The credentials and TLS files a config names, checked as `run` needs them: `check-config` and `doctor` report
/// the same problems (through these same functions), at the line that names the file, before anything runs.
enum LinkFiles {
    /// The credentials (when the config names a file), or every problem found.
    static func check(_ settings: MQTTSettings, configPath: String) throws(ConfigError) -> Credentials? {
        var credentials: Credentials?
        var issues: [ConfigIssue] = []
        for file in settings.files {
            do {
                if let loaded = try check(file) { credentials = loaded }
            } catch {
                issues.append(ConfigIssue(file: configPath, mark: file.mark, message: error.message, hint: error.hint))
            }
        }
        guard issues.isEmpty else { throw ConfigError(issues) }
        return credentials
    }

    /// Whether the names the broker knows the board by (the credentials' username, the client certificate's CN) are the
    /// config's device id: the broker's ACL lets a device write only under its own name, so a mismatch costs every
    /// event (refused with MQTT 5, acknowledged and dropped with 3.1.1). Each one that differs, at its file's line.
    static func identityIssues(_ files: [LinkFile], device: String, credentials: Credentials?,
                               configPath: String) -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        for file in files {
            do {
                switch file.role {
                case .credentials: try credentials?.checkUsername(device: device, path: file.path)
                case .cert: try DurableFile.read(path: file.path).flatMap(CertificateInfo.pem)?.checkCommonName(device: device, path: file.path)
                case .ca, .key: break
                }
            } catch {
                issues.append(ConfigIssue(file: configPath, mark: file.mark, message: error.message, hint: error.hint))
            }
        }
        return issues
    }

    /// One file: readable, and private when it is a secret; the credentials when it is the credentials file.
    static func check(_ file: LinkFile) throws(ServiceSetupError) -> Credentials? {
        switch file.role {
        case .credentials: return try Credentials.load(path: file.path)
        case .key: try Credentials.checkPrivate(file.path, what: file.role.rawValue)
        case .ca, .cert: try Credentials.checkReadable(file.path, what: file.role.rawValue)
        }
        return nil
    }
}
