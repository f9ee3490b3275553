#if canImport(Glibc)
import SystemIO
import Glibc
#endif
import ParkWiseCore
import ParkWiseLog

/// Reads an installer's config file from disk and validates it.
public enum ConfigFile {
    /// Every problem is reported at once (`ConfigError`), each with file:line:col and a hint.
    public static func load(path: String) throws(ConfigError) -> AgentConfig {
        try ConfigReader.read(try tree(path: path), file: path)
    }

    /// `load`, and the fingerprint (`hash`) of the very bytes it read: one read, so the two cannot
    /// come from different versions of a file being edited.
    public static func loadFingerprinted(path: String) throws(ConfigError) -> (config: AgentConfig, hash: String) {
        let bytes = try bytes(path: path)
        return (try parse(bytes, file: path), fingerprint(bytes))
    }

    /// The file's YAML as a `ConfigNode` tree, for other readers (the bridge's config); the same
    /// file:line:col problems as `load`.
    public static func tree(path: String) throws(ConfigError) -> ConfigNode {
        try YAMLParser.parse(try bytes(path: path), file: path)
    }

    private static func bytes(path: String) throws(ConfigError) -> [UInt8] {
        switch read(path) {
        case .success(let bytes):
            return bytes
        case .failure(let problem):
            throw ConfigError([ConfigIssue(file: path, mark: Mark(line: 1, column: 1),
                                            message: "cannot read the config file: \(problem.text)",
                                            hint: problem.denied ? deniedHint(path)
                                                : "check the path, and that the agent's user may read the file")])
        }
    }

    /// What kept a file from being read, in an installer's words.
    struct ConfigReadError: Error {
        let text: String
        /// EACCES: the file is there, but this user may not read it (or enter a directory on the way).
        var denied = false
    }

    /// Whom to run as: the group of the first directory on the way this user may not enter (or of the file), as the
    /// package installs /etc/parkwise-agent (0750 root:parkwise), whose service user has the group's name.
    static func deniedHint(_ path: String) -> String {
        var blocker = path
        var directory = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/").dropLast() {
            directory += "/" + part
            if access(directory, X_OK) != 0 {
                blocker = directory
                break
            }
        }
        var info = stat()
        guard stat(blocker, &info) == 0, let entry = getgrgid(info.st_gid), let name = entry.pointee.gr_name else {
            return "run the command as a user that may read the file (e.g. with sudo)"
        }
        let group = String(cString: name)
        return "run it as the service's user (sudo -u \(group) COMMAND), or as a member of group \(group) "
            + "(\(blocker) is mode \(String(info.st_mode & 0o777, radix: 8)), group \(group))"
    }

    /// The file's bytes, read with plain system calls (a config is read at every start: no URL, no FileManager).
    static func read(_ path: String) -> Result<[UInt8], ConfigReadError> {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let errno = Errno.current
            if errno == .permissionDenied { return .failure(ConfigReadError(text: "permission denied", denied: true)) }
            return .failure(ConfigReadError(text: errno == .noEntry || errno == Errno(ENOTDIR) ? "no such file" : errno.text))
        }
        if info.st_mode & S_IFMT == S_IFDIR { return .failure(ConfigReadError(text: "it is a directory")) }
        switch WholeFile.read(path) {
        case .success(let bytes):
            return .success(bytes)
        case .failure(let failure) where failure.errno == .permissionDenied:
            return .failure(ConfigReadError(text: "permission denied", denied: true))
        case .failure(let failure):
            return .failure(ConfigReadError(text: "read error: \(failure.errno?.text ?? "not a regular file")"))
        }
    }

    public static func parse(_ bytes: [UInt8], file: String) throws(ConfigError) -> AgentConfig {
        let root = try YAMLParser.parse(bytes, file: file)
        return try ConfigReader.read(root, file: file)
    }

    /// For `walk-test --learn`: the config without its `UNSET` spots, those spots, and the very bytes read (the
    /// text the learned inputs are written into).
    public static func loadForLearning(path: String) throws(ConfigError) -> (config: AgentConfig, unset: [UnsetSpot], text: [UInt8]) {
        let bytes = try bytes(path: path)
        let (config, unset) = try parseForLearning(bytes, file: path)
        return (config, unset, bytes)
    }

    public static func parseForLearning(_ bytes: [UInt8], file: String) throws(ConfigError) -> (config: AgentConfig, unset: [UnsetSpot]) {
        try ConfigReader.readForLearning(try YAMLParser.parse(bytes, file: file), file: file)
    }

    /// A stable fingerprint of the file's bytes (FNV-1a 64), announced in the birth message so a
    /// backend can tell which config a device runs.
    public static func hash(path: String) -> String? {
        guard case .success(let bytes) = read(path) else { return nil }
        return fingerprint(bytes)
    }

    private static func fingerprint(_ bytes: [UInt8]) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
