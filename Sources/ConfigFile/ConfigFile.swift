import FoundationEssentials
import ParkWiseCore

/// Reads an installer's config file from disk and validates it.
public enum ConfigFile {
    /// Every problem is reported at once (`ConfigIssues`), each with file:line:col and a hint.
    public static func load(path: String) throws(ConfigIssues) -> AgentConfig {
        try ConfigReader.read(try tree(path: path), file: path)
    }

    /// The file's YAML as a `ConfigNode` tree, for other readers (the bridge's config); the same
    /// file:line:col problems as `load`.
    public static func tree(path: String) throws(ConfigIssues) -> ConfigNode {
        let files = FileManager.default
        var isDirectory = false
        let problem: String? =
            !files.fileExists(atPath: path, isDirectory: &isDirectory) ? "no such file"
            : isDirectory ? "it is a directory"
            : !files.isReadableFile(atPath: path) ? "permission denied" : nil
        guard problem == nil, let data = try? Data(contentsOf: URL(fileURLWithPath: path)) else {
            throw ConfigIssues([ConfigIssue(file: path, mark: Mark(line: 1, column: 1),
                                            message: "cannot read the config file: \(problem ?? "read error")",
                                            hint: "check the path, and that the agent's user may read the file")])
        }
        return try YAMLParser.parse(Array(data), file: path)
    }

    public static func parse(_ bytes: [UInt8], file: String) throws(ConfigIssues) -> AgentConfig {
        let root = try YAMLParser.parse(bytes, file: file)
        return try ConfigReader.read(root, file: file)
    }

    /// A stable fingerprint of the file's bytes (FNV-1a 64), announced in the birth message so a
    /// backend can tell which config a device runs.
    public static func hash(path: String) -> String? {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: path)) else { return nil }
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
