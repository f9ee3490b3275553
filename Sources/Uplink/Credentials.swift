import FoundationEssentials
import Glibc

/// MQTT username and password from a file of `username=...` and `password=...` lines. Like ssh,
/// the agent and the bridge refuse a secrets file that group or others may read.
public struct Credentials: Sendable {
    public var username: String
    public var password: String?

    /// What is wrong with a file the link needs, and how to fix it.
    public struct Problem: Error, CustomStringConvertible {
        public var message: String
        public var hint: String
        /// The errno of a failed stat() or access(), when that was the problem.
        public var errno: Int32?
        public var description: String { "\(message)\n    hint: \(hint)" }
    }

    /// A file the agent's user can read, and its status.
    @discardableResult
    public static func checkReadable(_ path: String, what: String) throws(Problem) -> stat {
        var st = stat()
        guard stat(path, &st) == 0, access(path, R_OK) == 0 else {
            let number = Glibc.errno
            throw Problem(message: "cannot read \(what) \(path): \(String(cString: strerror(number)))",
                          hint: "check the path in the config, and that the agent's user may read the file", errno: number)
        }
        if st.st_mode & S_IFMT == S_IFDIR {
            throw Problem(message: "\(what) \(path) is a directory", hint: "give the path of the file itself")
        }
        return st
    }

    /// Refuses a secret (credentials, private key) that group or others may read, as ssh does.
    public static func checkPrivate(_ path: String, what: String) throws(Problem) {
        let st = try checkReadable(path, what: what)
        if st.st_mode & 0o077 != 0 {
            throw Problem(message: "\(what) \(path) is readable by group or others (mode "
                          + String(st.st_mode & 0o777, radix: 8) + ")", hint: "chmod 600 \(path)")
        }
    }

    public static func load(path: String) throws(Problem) -> Credentials {
        try checkPrivate(path, what: "credentials file")
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Problem(message: "cannot read credentials file \(path): permission denied",
                          hint: "the file must belong to the user the program runs as")
        }
        var username: String?, password: String?
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map { String($0) }
            guard parts.count == 2 else { continue }
            switch trimmed(parts[0]) {
            case "username": username = trimmed(parts[1])
            case "password": password = parts[1]
            default: continue
            }
        }
        guard let username, !username.isEmpty else {
            throw Problem(message: "credentials file \(path) has no username= line", hint: "add username=DEVICE-NAME")
        }
        return Credentials(username: username, password: password)
    }

    private static func trimmed(_ text: String) -> String {
        String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
