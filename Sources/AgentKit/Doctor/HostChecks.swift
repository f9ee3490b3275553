import SystemIO
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ServiceSetup
import MQTT
import Uplink

/// The doctor's checks of this machine: the files the link needs, the clock, the outbox directory.
enum HostChecks {
    /// The credentials and TLS files, with exactly the checks `run` makes (LinkFiles), and the certificates' expiry.
    static func linkFiles(_ config: AgentConfig) -> [ProbeStep] {
        var steps: [ProbeStep] = []
        if getuid() == 0 {
            steps.append(ProbeStep(.warning, "running as root: root may read any file, so these checks prove little",
                                   fix: "run doctor as the service's user: sudo -u parkwise parkwise-agent doctor"))
        }
        if config.mqtt.files.isEmpty {
            steps.append(ProbeStep(.ok, "no credentials or TLS files configured (anonymous login)"))
        }
        for file in config.mqtt.files {
            do {
                _ = try LinkFiles.check(file)
                steps.append(ProbeStep(.ok, "\(file.role.rawValue) \(file.path)",
                                       detail: file.isSecret ? "readable, by the agent's user only" : "readable"))
                if file.role == .ca || file.role == .cert {
                    let info = DurableFile.read(path: file.path).flatMap(CertificateInfo.pem)
                    steps.append(info.map { BrokerProbe.expiryStep($0, what: file.role.rawValue, owner: file.role == .ca ? .siteCA : .board(site: config.site)) }
                                 ?? ProbeStep(.failed, "\(file.role.rawValue) \(file.path) holds no PEM certificate",
                                              fix: "give the PEM file (-----BEGIN CERTIFICATE-----) of the \(file.role == .ca ? "CA" : "device's certificate")"))
                }
            } catch {
                steps.append(unreadableHere(file, error, stateDirectory: config.outbox.path)
                             ?? ProbeStep(.failed, "\(file.role.rawValue) \(file.path)", detail: error.message, fix: error.hint))
            }
        }
        return steps
    }

    /// A file another user owns that this one may not read (a member of the service's group, the secrets the service's
    /// own, mode 0600 as `run` requires): not checked, said with whose it is and how to check it; never a ✗, and never a
    /// fix that would make a secret readable (issue 33). Nil when the file is at fault: for everyone, or for the agent's
    /// own user (the owner of the state directory), which must read it.
    static func unreadableHere(_ file: LinkFile, _ problem: ServiceSetupError, stateDirectory: String) -> ProbeStep? {
        guard problem.errno?.isPermission == true else { return nil }
        var st = stat()
        if stat(stateDirectory, &st) == 0 && st.st_uid == geteuid() { return nil }
        let title = "not checked: \(file.role.rawValue) \(file.path)"
        guard stat(file.path, &st) == 0 else {
            return ProbeStep(.warning, title, detail: "a directory above it is not searchable by \(userName())",
                             fix: "run doctor as the agent's user to check it (sudo -u parkwise parkwise-agent doctor)")
        }
        guard st.st_uid != geteuid() else { return nil }
        let owner = getpwuid(st.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(st.st_uid)"
        let mode = String(st.st_mode & 0o777, radix: 8)
        let secret = file.isSecret && st.st_mode & 0o077 == 0
        return ProbeStep(.warning, title,
                         detail: "owned by \(owner), mode \(mode)" + (secret ? ": only its owner may read it, as a secret must" : ""),
                         fix: "run doctor as its owner to check it: sudo -u \(owner) parkwise-agent doctor")
    }

    /// The names the broker knows the board by (the credentials' username, the client certificate's CN) against its
    /// device id: the broker's ACL lets a device write only under its own name. Only files this user can read.
    static func identity(_ config: AgentConfig) -> [ProbeStep] {
        let credentials = config.mqtt.files.lazy.filter { $0.role == .credentials }.compactMap { try? LinkFiles.check($0) }.first
        let issues = LinkFiles.identityIssues(config.mqtt.files, device: config.device, credentials: credentials, configPath: "")
        guard !issues.isEmpty else {
            return [ProbeStep(.ok, "the broker knows this board as \(config.device)",
                              detail: "the credentials' username and the certificate's CN, where they can be read here")]
        }
        return issues.map { ProbeStep(.failed, $0.message, fix: $0.hint) }
    }

    static func clock() -> [ProbeStep] {
        let now = WireTime.format(unixNanoseconds: AgentClock.read(CLOCK_REALTIME))
        if AgentClock.wallClockSynchronized() {
            return [ProbeStep(.ok, "wall clock synchronised", detail: "\(now) (adjtimex)")]
        }
        return [ProbeStep(.warning, "wall clock not synchronised", detail: "\(now); events are marked clock: unsynced "
                          + "(and corrected once it is set)",
                          fix: "enable NTP (timedatectl set-ntp true; systemd-timesyncd or chrony) and let it reach an NTP server "
                            + "(timedatectl timesync-status); a board that boots without network needs an RTC "
                            + "(e.g. a DS3231 with dtoverlay=i2c-rtc,ds3231)")]
    }

    /// The directory writable with a working fsync, its free space, and what waits in it (from the running
    /// service's status when there is one, else read from the file without changing it).
    static func outbox(_ config: AgentConfig, status: AgentStatus?) -> [ProbeStep] {
        let dir = config.outbox.path
        var steps: [ProbeStep] = []
        var st = stat()
        if stat(dir, &st) != 0 && errno == EACCES {
            // A directory on the way is closed to this user: nothing here can be read, only what the service tells.
            steps.append(status == nil
                ? ProbeStep(.warning, "not checked: outbox directory \(dir)", detail: "a directory above it is not searchable by \(userName())",
                            fix: "run doctor as the service's user: sudo -u \(serviceUserName) parkwise-agent doctor")
                : ProbeStep(.ok, "outbox directory \(dir) used by the running service",
                            detail: "its status reports no disk problem; not tried here: a directory above it is not searchable by \(userName())"))
            if let status { steps += fromService(status) }
            return steps
        }
        if stat(dir, &st) != 0 {
            var parent = dir
            while let slash = parent.lastIndex(of: "/"), parent != "/" {
                parent = slash == parent.startIndex ? "/" : String(parent[..<slash])
                if access(parent, F_OK) == 0 { break }
            }
            if access(parent, W_OK) == 0 {
                return [ProbeStep(.warning, "outbox directory \(dir) does not exist yet",
                                  detail: "the agent creates it at start (\(parent) is writable)")]
            }
            if let readOnly = ReadOnlyMount.of(dir), readOnly.fileSystem {
                // No install -d can write there: the storage is read-only in itself.
                return [ProbeStep(.failed, "outbox directory \(dir) does not exist and cannot be created",
                                  detail: "\(parent) is on a read-only file system", fix: readOnly.hint(for: dir))]
            }
            return [ProbeStep(.failed, "outbox directory \(dir) does not exist and cannot be created",
                              detail: "\(parent) is not writable by \(userName())",
                              fix: "sudo install -d -o parkwise -g parkwise -m 750 \(dir) (the systemd unit's StateDirectory= makes "
                                + "/var/lib/parkwise-agent)")]
        }
        let access = stateAccess(dir)
        if access.othersOnly {
            // Another user's directory (the service's): its write and fsync are for the service to prove, or for
            // doctor run as that user; what the service says of its disk is below.
            steps.append(status.map { $0.outbox.problem == nil } == true
                ? ProbeStep(.ok, "outbox directory \(dir) written by the running service",
                            detail: "its status reports no disk problem; write + fsync not tried: it belongs to \(access.owner) "
                                + "and \(userName()) may not write there")
                : ProbeStep(.warning, "not checked: write + fsync in outbox directory \(dir)",
                            detail: "it belongs to \(access.owner)\(access.group.map { " (group \($0))" } ?? ""), mode "
                                + String(st.st_mode & 0o7777, radix: 8) + "; \(userName()) may not write there",
                            fix: access.fix))
        } else {
            steps.append(writeProbe(dir))
        }
        var fs = statvfs()
        if statvfs(dir, &fs) == 0 {
            let free = Int64(fs.f_bavail) * Int64(fs.f_frsize)
            let text = "\(free / 1_048_576) MiB free"
            if free < 1_048_576 {
                steps.append(ProbeStep(.failed, "free space on the outbox's file system", detail: text,
                                       fix: "free space (journalctl --vacuum-size=50M, remove old logs): a full disk keeps events in memory only"))
            } else if free < 64 * 1_048_576 {
                steps.append(ProbeStep(.warning, "free space on the outbox's file system", detail: text,
                                       fix: "free some space: below a few MiB the outbox cannot store events on disk"))
            } else {
                steps.append(ProbeStep(.ok, "free space on the outbox's file system", detail: text))
            }
        }
        if let status {
            steps += fromService(status)
            return steps
        }
        switch OutboxPeek.look(directory: dir) {
        case .found(let peek):
            var oldest: String?
            if let entry = peek.oldest {
                if entry.kernelBoot == EventStamper.readKernelBoot() {
                    let age = Double(AgentClock.read(CLOCK_MONOTONIC) - entry.atMonotonic) / 1e9
                    oldest = "oldest #\(entry.event.seq) waiting \(duration(age))"
                } else {
                    oldest = "oldest #\(entry.event.seq) from an earlier boot, at \(entry.event.at)"
                }
            }
            steps.append(pending(depth: peek.depth, capacity: config.outbox.capacity, oldest: oldest, source: "read from outbox.log"))
            if peek.damaged {
                steps.append(ProbeStep(.warning, "outbox.log has damaged records or a torn end",
                                       detail: "the agent repairs it at start and declares what it cannot recover (outbox.dropped)"))
            }
        case .absent:
            steps.append(ProbeStep(.ok, "nothing pending", detail: "no outbox.log yet"))
        case .unreadable(let message, let errno):
            steps.append(ProbeStep(.warning, "not checked: events pending in the outbox",
                                   detail: "\(message) (as \(userName()))",
                                   fix: errno?.isPermission == true ? access.fix
                                       : "see the service's log (journalctl -u parkwise-agent): the agent says what it finds there at start"))
        }
        return steps
    }

    /// What the running service says of its outbox and disk.
    private static func fromService(_ status: AgentStatus) -> [ProbeStep] {
        let o = status.outbox
        var steps = [pending(depth: o.depth, capacity: o.capacity,
                             oldest: o.oldestAgeSeconds.map { "oldest #\(o.oldestSeq.map(String.init) ?? "?") waiting \(duration($0))" },
                             source: "from the running service")]
        if let problem = o.problem {
            steps.append(ProbeStep(.failed, "the service's disk", detail: problem,
                                   fix: "fix the disk (space, permissions, a read-only remount or I/O errors: dmesg); the agent "
                                       + "writes again by itself (an outbox it could not open, after a restart)"))
        }
        return steps
    }

    /// The service's user: `parkwise` as the systemd unit says, or PARKWISE_AGENT_USER.
    static var serviceUserName: String { Environment.value(ServiceUserCheck.variable) ?? "parkwise" }

    /// Who may use the agent's state directory, for the checks doctor cannot make as this user: its owner and group,
    /// whether it is closed to this user (another's, not writable here, and this user not the service's), and how
    /// to get what it did not check.
    static func stateAccess(_ dir: String) -> (owner: String, group: String?, othersOnly: Bool, fix: String) {
        var st = stat()
        let me = getuid()
        guard stat(dir, &st) == 0 else {
            return (serviceUserName, nil, me != 0,
                    "run doctor as the service's user (sudo -u \(serviceUserName) parkwise-agent doctor)")
        }
        let owner = getpwuid(st.st_uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid \(st.st_uid)"
        let group = getgrgid(st.st_gid).flatMap { $0.pointee.gr_name.map { String(cString: $0) } }
        let service = ServiceUser.lookup(serviceUserName)
        let notService = service.map { $0.uid != me } ?? (st.st_uid != me)
        let othersOnly = me != 0 && notService && Glibc.access(dir, W_OK | X_OK) != 0
        let viaGroup = group.map { "members of group \($0) read the running service's status (sudo usermod -aG \($0) $USER, then log "
            + "in again); " } ?? ""
        return ("user \(owner)", group, othersOnly, viaGroup + "sudo -u \(owner) parkwise-agent doctor checks everything")
    }

    private static func pending(depth: Int, capacity: Int, oldest: String?, source: String) -> ProbeStep {
        let detail = "\(depth) of \(capacity)" + (oldest.map { ", \($0)" } ?? "") + " (\(source))"
        if depth * 10 >= capacity * 8 {
            return ProbeStep(.warning, "events pending in the outbox", detail: detail,
                             fix: "almost full: when full, the oldest routine events are dropped (and declared); check the broker link")
        }
        return ProbeStep(.ok, "events pending in the outbox", detail: detail)
    }

    /// Writes, fsyncs and removes a temp file in the directory.
    private static func writeProbe(_ dir: String) -> ProbeStep {
        let path = "\(dir)/.doctor-\(getpid())"
        let start = AgentClock.read(CLOCK_MONOTONIC)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            return ProbeStep(.failed, "outbox directory \(dir) writable", detail: "\(Errno.current) as \(userName())",
                             fix: "sudo chown -R parkwise:parkwise \(dir) (the service's user must own it); a read-only file system: "
                                + "check mount and dmesg")
        }
        defer { unlink(path) }
        var problem = DurableFile.writeAll(fd, [UInt8](repeating: 0x2A, count: 4096)).map { "write: \($0)" }
        if problem == nil && fsync(fd) != 0 { problem = "fsync: \(Errno.current)" }
        close(fd)
        if let problem {
            return ProbeStep(.failed, "outbox directory \(dir): write and fsync a test file", detail: problem,
                             fix: "the storage is failing or full: check dmesg and df; events cannot be kept across a power cut")
        }
        let ms = Double(AgentClock.read(CLOCK_MONOTONIC) - start) / 1e6
        return ProbeStep(.ok, "outbox directory \(dir) writable, fsync works", detail: "4 KiB written and synced in \(Int(ms.rounded())) ms")
    }

    static func userName() -> String {
        let uid = getuid()
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "user \(String(cString: name))"
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3600) h \(s % 3600 / 60) min" }
        return "\(s / 86_400) days"
    }
}
