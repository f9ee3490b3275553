import SystemIO
import Glibc
import ParkWiseLog

/// One agent per state directory: two agents appending to one outbox would corrupt it. The lock
/// (flock on `agent.lock`) goes with the process, however it ends.
final class StateDirectoryLock {
    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    enum Outcome {
        case locked(StateDirectoryLock)
        /// The directory cannot be used at all (what failed): the agent runs with its outbox in memory.
        case unusable(FileError)
        /// Another agent holds it (its pid, when it wrote one).
        case held(by: String)
    }

    static func acquire(directory: String) -> Outcome {
        if let failure = DurableFile.makeDirectory(directory) { return .unusable(failure) }
        let path = directory + "/agent.lock"
        // The lock file is truncated and written: never through a symbolic link (as root it would truncate the link's
        // target) nor waiting on a FIFO. Anything but a regular file there is moved aside, as the state files are.
        switch DurableFile.setAsideIfNotRegular(path) {
        case .success(let done?): Log.warn("state directory repaired at start", ["problem": done])
        case .success(nil): break
        case .failure(let failure): return .unusable(failure)
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o640)
        guard fd >= 0 else { return .unusable(.current("open \(path)")) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = DurableFile.read(path: path).map { String(decoding: $0, as: UTF8.self) }.flatMap { $0.isEmpty ? nil : $0 }
            close(fd)
            return .held(by: holder ?? "another process")
        }
        _ = ftruncate(fd, 0)
        _ = DurableFile.writeAll(fd, Array("pid \(getpid())".utf8))
        return .locked(StateDirectoryLock(fd: fd))
    }
}

extension StateDirectoryLock {
    /// Who holds the state directory's lock now (a running agent's "pid N"), without creating or taking anything;
    /// nil when nobody does (or there is no lock file yet).
    static func holder(directory: String) -> String? {
        let path = directory + "/agent.lock"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        let text = DurableFile.read(path: path).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return text.isEmpty ? "another process" : text
    }
}
