import Glibc
import ServiceSetup
import SystemIO

/// Whether this run may keep the state directory. A `run` as root in a directory another user owns (the package's
/// /var/lib/parkwise-agent belongs to `parkwise`) would leave files that user cannot write: the service would then
/// keep nothing on disk and hold every event. A file the agent writes in place that this user may not write (such a
/// run's leftovers) is said with the command that gives it back. Both are refused before anything is created.
enum StateDirectoryAccess {
    /// What the agent writes in place in its state directory (the rest it creates, renames or leaves alone: what a
    /// repair set aside, an administrator's notes, `lost+found` when the directory is a mount point).
    static let files = ["agent.lock", "outbox.log", "device-state.json", "device-state.json.bak", "seq.ledger"]

    static func problem(directory: String) -> ServiceSetupError? {
        if geteuid() == 0 {
            // The directory, or the one it is to be made in: the service's tree, not whatever lies further up.
            let parent = directory.lastIndex(of: "/").map { String(directory[..<$0]) } ?? "."
            for path in [directory, parent.isEmpty ? "/" : parent] {
                var st = stat()
                guard stat(path, &st) == 0 else { continue }
                guard st.st_uid != 0 else { return nil }
                let user = ServiceUser.userName(st.st_uid)
                return ServiceSetupError(
                    message: "\(path) belongs to user \(user): run as root, the agent would leave files in it that \(user) "
                        + "cannot write, and the service would then keep nothing on disk",
                    hint: "run it as that user (sudo -u \(user) parkwise-agent run ...), or give a run as root its own --outbox DIR")
            }
            return nil
        }
        for path in [directory] + files.map({ directory + "/" + $0 }) where access(path, W_OK) != 0 {
            let number = Errno.current
            guard number.isPermission else { continue }   // a read-only disk is the outbox's to say
            var st = stat()
            _ = stat(path, &st)
            let me = ServiceUser.userName(geteuid())
            return ServiceSetupError(
                message: "cannot write \(path) (\(ServiceUser.describe(st))): the agent, running as \(me), would keep "
                    + "nothing on disk",
                hint: "give the state directory back to \(me): sudo chown -R \(me): \(directory)", errno: number)
        }
        return nil
    }
}
