#if canImport(Glibc)
import Glibc
#endif
import ParkWiseCore
import ParkWiseLog

/// Writes a line to stdout at once (unbuffered, so pipes and journald see it as it happens).
public func say(_ text: String) {
    var bytes = Array((text.hasSuffix("\n") ? text : text + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress, $0.count) }
}

/// Writes to stderr in one piece.
public func printError(_ text: String) {
    if text.prefix(while: { $0 != "\n" }).contains("error") { LastError.record(text) }
    var stream = StandardError()
    print(text, terminator: text.hasSuffix("\n") ? "" : "\n", to: &stream)
}

public struct StandardError: TextOutputStream {
    public init() {}

    public mutating func write(_ string: String) {
        var bytes = Array(string.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

/// A config file's problems, each as FILE:LINE:COL with its hint, then how many there were.
public func printConfigProblems(_ problems: ConfigError, path: String) {
    printConfigIssues(problems)
    printError("\(path): \(problems.issues.count) problem\(problems.issues.count == 1 ? "" : "s") found")
}

/// The bytes of `printError(problems.description)`, written some 64 KB at a time. A city's file with one wrong level
/// on 60,000 spots has 240 MB of problems (each hint lists the 500 levels); as one string, joined and copied, that
/// took 800 MB.
public func printConfigIssues(_ problems: ConfigError) {
    if let first = problems.issues.first {
        let more = problems.issues.count > 1 ? " (and \(problems.issues.count - 1) more)" : ""
        LastError.record(first.description.prefix(while: { $0 != "\n" }) + more)
    }
    var stream = StandardError()
    var chunk = ""
    for (index, issue) in problems.issues.enumerated() {
        let text = issue.description
        chunk += text
        if index < problems.issues.count - 1 || !text.hasSuffix("\n") { chunk += "\n" }
        if chunk.utf8.count >= 1 << 16 {
            stream.write(chunk)
            chunk = ""
        }
    }
    if problems.issues.isEmpty { chunk = "\n" }
    stream.write(chunk)
}
