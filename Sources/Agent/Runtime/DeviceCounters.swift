import FoundationEssentials
import Glibc
import ParkWiseLog

/// The boot counter and the last event sequence number, kept on disk beside the outbox so that
/// `seq` keeps increasing across restarts. Written with temp file + fsync + rename.
struct DeviceCounters {
    private(set) var boot: UInt64 = 0
    private(set) var seq: UInt64 = 0
    let path: String?

    private struct Stored: Codable { var boot: UInt64; var seq: UInt64 }

    /// Loads the counters and counts this start. Without a usable directory it keeps them in memory.
    init(directory: String) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            path = directory + "/counters.json"
        } catch {
            Log.error("state directory unusable, sequence numbers restart at 1", ["dir": directory, "error": "\(error)"])
            path = nil
        }
        if let path, let data = FileManager.default.contents(atPath: path) {
            if let stored = try? JSONDecoder().decode(Stored.self, from: data) {
                boot = stored.boot
                seq = stored.seq
            } else {
                Log.error("counters file unreadable, keeping it aside", ["path": path])
                _ = rename(path, path + ".corrupt")
            }
        }
        boot += 1
        save()
    }

    mutating func nextSeq() -> UInt64 {
        seq += 1
        save()
        return seq
    }

    private func save() {
        guard let path else { return }
        let bytes = Array((try? JSONEncoder().encode(Stored(boot: boot, seq: seq))) ?? Data())
        if let error = DurableFile.replace(path: path, with: bytes) {
            Log.error("cannot save counters", ["path": path, "error": error])
        }
    }
}

/// Replaces a file's contents so that after a power cut it holds either the old or the new bytes.
enum DurableFile {
    /// Returns a description of the failure, or nil.
    static func replace(path: String, with bytes: [UInt8]) -> String? {
        let temp = path + ".tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return "open \(temp): \(errnoText())" }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced else { return "write \(temp): \(errnoText())" }
        guard rename(temp, path) == 0 else { return "rename \(temp): \(errnoText())" }
        // The rename itself is durable only once the directory is synced.
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 { fsync(dir); close(dir) }
        return nil
    }

    static func errnoText() -> String { String(cString: strerror(errno)) + " (errno \(errno))" }
}
