#if canImport(Glibc)
import Glibc
#endif

/// The process environment, read a variable at a time (getenv), where `ProcessInfo.environment` would build a
/// dictionary of every variable at each call: a start-up cost the agent does not need to pay.
public enum Environment {
    /// The variable's value, if set.
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// The named variables that are set, by name.
    public static func values(_ names: [String]) -> [String: String] {
        var found: [String: String] = [:]
        for name in names { found[name] = value(name) }
        return found
    }
}
