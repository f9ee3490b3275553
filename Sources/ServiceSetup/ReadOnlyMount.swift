import Glibc
import SystemIO

/// Whether a path's file system is read-only in itself, and where it is mounted: what tells a file system mounted (or
/// remounted after I/O errors) read-only from a read-only view of a writable one (systemd's ProtectSystem=, a bind
/// mount). /proc/self/mountinfo has both: the mount's own options and, after " - ", the superblock's. A directory not
/// made yet is judged by the nearest one that exists (where `install -d` would have to write).
public struct ReadOnlyMount: Sendable, Equatable {
    /// The mount point holding the path.
    public var mountPoint: String
    /// The file system itself is read-only (its superblock): nobody can write it until it is remounted read-write.
    public var fileSystem: Bool

    /// The read-only mount holding `path` (or its nearest existing parent); nil when it is writable or unknown.
    public static func of(_ path: String, mountinfo: String? = nil) -> ReadOnlyMount? {
        guard let existing = nearestExisting(path) else { return nil }
        let text = mountinfo ?? DurableFile.read(path: "/proc/self/mountinfo").map { String(decoding: $0, as: UTF8.self) } ?? ""
        var best: (point: String, mountRO: Bool, superRO: Bool)?
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ").map(String.init)
            guard let dash = parts.firstIndex(of: "-") else { continue }
            let fields = Array(parts[..<dash]), tail = Array(parts[(dash + 1)...])
            guard fields.count >= 6, tail.count >= 3 else { continue }
            let point = unescape(fields[4])
            guard point == "/" || existing == point || existing.hasPrefix(point + "/") else { continue }
            // The last listed of equal points is the one on top.
            guard best.map({ point.count >= $0.point.count }) ?? true else { continue }
            best = (point, fields[5].split(separator: ",").contains("ro"), tail[2].split(separator: ",").contains("ro"))
        }
        guard let best, best.mountRO || best.superRO else { return nil }
        return ReadOnlyMount(mountPoint: best.point, fileSystem: best.superRO)
    }

    /// The path, or its nearest parent that exists, resolved as the kernel does (symbolic links followed).
    static func nearestExisting(_ path: String) -> String? {
        var current = path.hasPrefix("/") ? path : "/" + path
        while true {
            if let resolved = realpath(current, nil) {
                defer { free(resolved) }
                return String(cString: resolved)
            }
            guard current != "/", let slash = current.lastIndex(of: "/") else { return nil }
            current = slash == current.startIndex ? "/" : String(current[..<slash])
        }
    }

    /// mountinfo writes space, tab, newline and backslash as \ooo.
    private static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var bytes: [UInt8] = [], utf8 = Array(field.utf8), i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "\\"), i + 3 < utf8.count, let n = UInt8(String(decoding: utf8[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                bytes.append(n)
                i += 4
            } else {
                bytes.append(utf8[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What to do about it, for the directory the agent needs.
    public func hint(for directory: String) -> String {
        "the file system at \(mountPoint) is mounted read-only (findmnt -T \(mountPoint); dmesg tells whether I/O errors "
            + "made the kernel remount it): fix or replace the storage, or remount it read-write (sudo mount -o remount,rw "
            + "\(mountPoint)) if it should be; only then can \(directory) be made"
    }
}
