import Glibc

/// The user the service runs as, seen from a check run by root: root's access() passes every file, so whether the
/// service could read one is decided from the file's owner, group and mode against this user's uid and groups, as
/// the kernel decides it (no ACLs).
public struct ServiceUser: Sendable {
    public var name: String
    public var uid: uid_t
    public var groups: [gid_t]

    public init(name: String, uid: uid_t, groups: [gid_t]) {
        self.name = name
        self.uid = uid
        self.groups = groups
    }

    /// The user from the password and group databases (getpwnam, getgrouplist); nil when there is no such user.
    public static func lookup(_ name: String) -> ServiceUser? {
        guard let entry = getpwnam(name) else { return nil }
        let uid = entry.pointee.pw_uid, gid = entry.pointee.pw_gid
        var count: Int32 = 32
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(name, gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
        }
        return ServiceUser(name: name, uid: uid, groups: Array(groups.prefix(Int(count))))
    }

    /// Why this user could not read the file at `path` (a directory on the way it may not enter, or the file
    /// itself), with the command that fixes it; nil when it could. A file that does not exist is not its business.
    public func readProblem(_ path: String, what: String, secret: Bool) -> ServiceSetupError? {
        guard uid != 0 else { return nil }
        let absolute = path.hasPrefix("/") ? path : ServiceUser.workingDirectory() + "/" + path
        var directory = ""
        for part in absolute.split(separator: "/").dropLast() {
            directory += "/" + part
            var st = stat()
            guard stat(directory, &st) == 0 else { return nil }
            if !permits(st, S_IXUSR) {
                return ServiceSetupError(
                    message: "\(what) \(path): user \(name) may not enter the directory \(directory) "
                        + "(\(ServiceUser.describe(st)))",
                    hint: "chgrp \(name) \(directory) && chmod g+x \(directory), or move the file")
            }
        }
        var st = stat()
        guard stat(absolute, &st) == 0 else { return nil }
        guard !permits(st, S_IRUSR) else { return nil }
        return ServiceSetupError(
            message: "\(what) \(path) is not readable by the service's user \(name) (\(ServiceUser.describe(st)))",
            hint: secret ? "chown \(name): \(path) && chmod 0600 \(path)"
                : "chgrp \(name) \(path) && chmod 0640 \(path) (or chmod 0644: it is no secret)")
    }

    /// The kernel's rule: the owner's bits for the owner, else the group's for a member, else the others'.
    /// `bit` is the owner's bit (S_IRUSR or S_IXUSR); the group's and others' are 3 and 6 places lower.
    func permits(_ st: stat, _ bit: mode_t) -> Bool {
        if st.st_uid == uid { return st.st_mode & bit != 0 }
        if groups.contains(st.st_gid) { return st.st_mode & (bit >> 3) != 0 }
        return st.st_mode & (bit >> 6) != 0
    }

    /// "mode 640, owner root, group parkwise".
    public static func describe(_ st: stat) -> String {
        "mode " + String(st.st_mode & 0o777, radix: 8) + ", owner " + ServiceUser.userName(st.st_uid)
            + ", group " + ServiceUser.groupName(st.st_gid)
    }

    public static func userName(_ uid: uid_t) -> String {
        getpwuid(uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid \(uid)"
    }

    static func groupName(_ gid: gid_t) -> String {
        getgrgid(gid).flatMap { $0.pointee.gr_name.map { String(cString: $0) } } ?? "gid \(gid)"
    }

    static func workingDirectory() -> String {
        guard let cwd = getcwd(nil, 0) else { return "." }
        defer { free(cwd) }
        return String(cString: cwd)
    }
}
