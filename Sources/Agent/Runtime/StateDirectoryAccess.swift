import Glibc
import Uplink

/// Whether this run may keep the state directory. A `run` as root in a directory another user owns (the package's
/// /var/lib/parkwise-agent belongs to `parkwise`) would leave files that user cannot write: the service would then
/// keep nothing on disk and hold every event. A directory or file in it this user may not write (such a run's
/// leftovers) is said with the command that gives it back. Both are refused before anything is created.
enum StateDirectoryAccess {
    static func problem(directory: String) -> Credentials.Problem? {
        if geteuid() == 0 {
            guard let (path, owner) = nearestOwner(of: directory), owner != 0 else { return nil }
            let user = ServiceUser.userName(owner)
            return Credentials.Problem(
                message: "\(path) belongs to user \(user): run as root, the agent would leave files in it that \(user) "
                    + "cannot write, and the service would then keep nothing on disk",
                hint: "run it as that user (sudo -u \(user) parkwise-agent run ...), or give a run as root its own --outbox DIR")
        }
        for path in [directory] + entries(of: directory) where access(path, W_OK) != 0 {
            let number = errno
            guard number == EACCES || number == EPERM else { continue }   // a read-only disk is the outbox's to say
            var st = stat()
            _ = stat(path, &st)
            let me = ServiceUser.userName(geteuid())
            return Credentials.Problem(
                message: "cannot write \(path) (owner \(ServiceUser.userName(st.st_uid)), mode "
                    + String(st.st_mode & 0o777, radix: 8) + "): the agent, running as \(me), would keep nothing on disk",
                hint: "give the state directory back to \(me): sudo chown -R \(me): \(directory)", errno: number)
        }
        return nil
    }

    /// The directory, or its nearest ancestor that exists, and its owner.
    private static func nearestOwner(of directory: String) -> (String, uid_t)? {
        var path = directory
        while !path.isEmpty {
            var st = stat()
            if stat(path, &st) == 0 { return (path, st.st_uid) }
            guard let slash = path.lastIndex(of: "/") else { return nil }
            path = slash == path.startIndex ? "/" : String(path[..<slash])
            if path == "/" { return nil }
        }
        return nil
    }

    /// The paths of what the directory holds (none when it does not exist or cannot be read).
    private static func entries(of directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var paths: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { paths.append(directory + "/" + name) }
        }
        return paths
    }
}
