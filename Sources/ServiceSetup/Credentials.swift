import SystemIO
import FoundationEssentials
import Glibc

/// MQTT username and password from a file of `username=...` and `password=...` lines. Like ssh,
/// the agent and the bridge refuse a secrets file that group or others may read.
public struct Credentials: Sendable {
    public var username: String
    public var password: String?

    /// A file the agent's user can read, and its status.
    @discardableResult
    public static func checkReadable(_ path: String, what: String) throws(ServiceSetupError) -> stat {
        var st = stat()
        guard stat(path, &st) == 0, access(path, R_OK) == 0 else {
            let errno = Errno.current
            throw ServiceSetupError(message: "cannot read \(what) \(path): \(errno.text)",
                          hint: "check the path in the config, and that the agent's user may read the file", errno: errno)
        }
        if st.st_mode & S_IFMT == S_IFDIR {
            throw ServiceSetupError(message: "\(what) \(path) is a directory", hint: "give the path of the file itself")
        }
        return st
    }

    /// Refuses a secret (credentials, private key) that group or others may read, as ssh does.
    public static func checkPrivate(_ path: String, what: String) throws(ServiceSetupError) {
        let st = try checkReadable(path, what: what)
        if st.st_mode & 0o077 != 0 {
            throw ServiceSetupError(message: "\(what) \(path) is readable by group or others (mode "
                          + String(st.st_mode & 0o777, radix: 8) + ")", hint: "chmod 600 \(path)")
        }
    }

    public static func load(path: String) throws(ServiceSetupError) -> Credentials {
        try checkPrivate(path, what: "credentials file")
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceSetupError(message: "cannot read credentials file \(path): permission denied",
                          hint: "the file must belong to the user the program runs as")
        }
        return try parse(String(decoding: data, as: UTF8.self), path: path)
    }

    /// `username=…` and `password=…` lines. Blank lines and `#` comments are skipped; spaces around a key and its
    /// value and a Windows line end (CR LF) are not part of them. Anything else is refused, with its line: a key
    /// the agent would ignore is a password it would never send.
    static func parse(_ text: String, path: String) throws(ServiceSetupError) -> Credentials {
        var username: String?, password: String?
        var problems: [(line: Int, message: String, hint: String)] = []
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = String(raw).trimmed
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            guard let equals = line.firstIndex(of: "=") else {
                problems.append((index + 1, "a line without '='", "write key=value: username=DEVICE-ID or password=…"))
                continue
            }
            let key = String(line[..<equals]).trimmed, value = String(line[line.index(after: equals)...]).trimmed
            switch key {
            case "username" where username == nil: username = value
            case "password" where password == nil: password = value
            case "username", "password":
                problems.append((index + 1, "a second \(key)= line", "keep one \(key)= line"))
            default:
                let close = ["username", "password"].first { $0.hasPrefix(key.lowercased().prefix(4)) && key.count >= 2 }
                problems.append((index + 1, "unknown key '\(key)'",
                                 (close.map { "did you mean '\($0)'? " } ?? "") + "the file holds username= and password= lines only"))
            }
        }
        if let first = problems.first {
            let more = problems.count > 1 ? " (and \(problems.count - 1) more problem\(problems.count == 2 ? "" : "s") in the file)" : ""
            throw ServiceSetupError(message: "credentials file \(path):\(first.line): \(first.message)\(more)", hint: first.hint)
        }
        guard let username, !username.isEmpty else {
            throw ServiceSetupError(message: "credentials file \(path) has no username= line", hint: "add username=DEVICE-NAME")
        }
        return Credentials(username: username, password: password)
    }

    /// The broker's ACL (deploy/mosquitto/acl.conf) lets a device write only under its own id, taken from the
    /// username: with another username every publish is denied, and under MQTT 3.1.1 a denied publish is still
    /// acknowledged, so events would be lost without a word.
    public func checkUsername(device: String, path: String) throws(ServiceSetupError) {
        guard username != device else { return }
        throw ServiceSetupError(message: "credentials file \(path) has username=\(username) but the config's device is '\(device)'",
                      hint: "the broker's ACL needs the device id as username: username=\(device) (and that user in the "
                        + "broker's password file), or set `device: \(username)`")
    }
}

/// What is wrong with a file the link needs, and how to fix it.
public struct ServiceSetupError: Error, CustomStringConvertible {
    public var message: String
    public var hint: String
    /// The errno of a failed stat() or access(), when that was the problem.
    public var errno: Errno?
    public var description: String { "\(message)\n    hint: \(hint)" }

    public init(message: String, hint: String, errno: Errno? = nil) {
        self.message = message
        self.hint = hint
        self.errno = errno
    }
}
