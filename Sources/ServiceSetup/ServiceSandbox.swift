/// What the systemd unit's sandbox lets the service write, read from the unit's text and its drop-ins (pure: the
/// files are read by `ServiceSandbox.installed`). The shipped unit has `ProtectSystem=strict`: the whole file system
/// is read-only for the agent except its `StateDirectory=` (/var/lib/parkwise-agent), `RuntimeDirectory=`, a private
/// /tmp and whatever `ReadWritePaths=` adds. `doctor` and `check-config` run outside that sandbox, so a directory they
/// find writable may still be read-only for the service: this tells them.
///
/// As systemd does it: settings of the `[Service]` section, later files (drop-ins in name order) over earlier ones,
/// list settings adding up until an empty assignment clears them, `%S %t %C %L %T %V %%` expanded; each path gets the
/// access of the deepest setting that names it or a parent of it (systemd orders its mounts that way).
public struct ServiceSandbox: Sendable, Equatable {
    /// The unit's file name, and where its `StateDirectory=` puts the agent's state.
    public static let unit = "parkwise-agent.service"
    public static let stateDirectory = "/var/lib/parkwise-agent"

    public enum Access: Sendable, Equatable {
        case writable
        /// Writable, but the service's own /tmp (`PrivateTmp=`): emptied at every stop.
        case privateTmp
        case readOnly
        case inaccessible
    }

    /// The setting that decides a path's access, as the unit spells it (`ReadWritePaths=/data/parkwise`).
    public struct Rule: Sendable, Equatable {
        public var path: String
        public var access: Access
        public var setting: String
    }

    public var protectSystem = "no"
    public var protectHome = "no"
    public var privateTmp = false
    public var readWritePaths: [String] = []
    public var readOnlyPaths: [String] = []
    public var inaccessiblePaths: [String] = []
    /// `StateDirectory=` and its kin: names under /var/lib, /var/cache, /var/log and /run, writable under any sandbox.
    public var stateDirectories: [String] = []
    public var cacheDirectories: [String] = []
    public var logsDirectories: [String] = []
    public var runtimeDirectories: [String] = []

    /// The unit's text first, then its drop-ins in the order systemd applies them.
    public init(files: [String]) {
        for text in files {
            for (key, value) in Self.serviceSettings(text) { apply(key, value) }
        }
    }

    private mutating func apply(_ key: String, _ value: String) {
        let words = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { Self.expand(String($0)) }
        func list(_ list: inout [String], _ clean: (String) -> String) {
            if words.isEmpty { list = [] } else { list += words.map(clean) }
        }
        // "-" (ignore a missing path) and "+" (inside RootDirectory=) change nothing here; "name:link" is a name.
        let path = { (word: String) in String(word.drop(while: { $0 == "-" || $0 == "+" })) }
        let name = { (word: String) in String(word.prefix(while: { $0 != ":" })) }
        switch key {
        case "ProtectSystem": protectSystem = Self.boolean(value).map { $0 ? "yes" : "no" } ?? value
        case "ProtectHome": protectHome = Self.boolean(value).map { $0 ? "yes" : "no" } ?? value
        case "PrivateTmp": privateTmp = Self.boolean(value) ?? false
        case "ReadWritePaths": list(&readWritePaths, path)
        case "ReadOnlyPaths": list(&readOnlyPaths, path)
        case "InaccessiblePaths": list(&inaccessiblePaths, path)
        case "StateDirectory": list(&stateDirectories, name)
        case "CacheDirectory": list(&cacheDirectories, name)
        case "LogsDirectory": list(&logsDirectories, name)
        case "RuntimeDirectory": list(&runtimeDirectories, name)
        default: break
        }
    }

    /// Every rule the unit sets, shallow to deep.
    public var rules: [Rule] {
        var rules: [Rule] = []
        func add(_ paths: [String], _ access: Access, _ setting: String) {
            rules += paths.map { Rule(path: Self.normalized($0), access: access, setting: setting) }
        }
        switch protectSystem {
        case "strict":
            add(["/"], .readOnly, "ProtectSystem=strict")
            add(["/dev", "/proc", "/sys"], .writable, "ProtectSystem=strict")
        case "full": add(["/usr", "/boot", "/efi", "/etc"], .readOnly, "ProtectSystem=full")
        case "yes": add(["/usr", "/boot", "/efi"], .readOnly, "ProtectSystem=yes")
        default: break
        }
        switch protectHome {
        case "yes": add(["/home", "/root", "/run/user"], .inaccessible, "ProtectHome=yes")
        case "read-only", "tmpfs": add(["/home", "/root", "/run/user"], .readOnly, "ProtectHome=\(protectHome)")
        default: break
        }
        if privateTmp { add(["/tmp", "/var/tmp"], .privateTmp, "PrivateTmp=yes") }
        for (names, base, setting) in [(stateDirectories, "/var/lib", "StateDirectory"),
                                       (cacheDirectories, "/var/cache", "CacheDirectory"),
                                       (logsDirectories, "/var/log", "LogsDirectory"),
                                       (runtimeDirectories, "/run", "RuntimeDirectory")] {
            for name in names { add([base + "/" + name], .writable, "\(setting)=\(name)") }
        }
        for path in readWritePaths { add([path], .writable, "ReadWritePaths=\(path)") }
        for path in readOnlyPaths { add([path], .readOnly, "ReadOnlyPaths=\(path)") }
        for path in inaccessiblePaths { add([path], .inaccessible, "InaccessiblePaths=\(path)") }
        return rules
    }

    /// The rule that decides `path` (the deepest one naming it or a parent; the stricter one of two naming the same
    /// path); nil when none does: the service may write there as any process of its user may.
    public func rule(for path: String) -> Rule? {
        let path = Self.normalized(path)
        let strictness: [Access] = [.writable, .privateTmp, .readOnly, .inaccessible]
        return rules.filter { Self.contains($0.path, path) }.max { a, b in
            a.path.count != b.path.count ? a.path.count < b.path.count
                : strictness.firstIndex(of: a.access)! < strictness.firstIndex(of: b.access)!
        }
    }

    /// Why the service could not keep its outbox in `directory` (read-only or hidden in its sandbox, or its private
    /// /tmp), with the fix; nil when it can.
    public func problem(outbox directory: String) -> ServiceSetupError? {
        guard let rule = rule(for: directory) else { return nil }
        let unit = "\(Self.unit) has \(rule.setting)"
        switch rule.access {
        case .writable:
            return nil
        case .privateTmp:
            return ServiceSetupError(
                message: "outbox directory \(directory) is in the service's private /tmp (\(unit)): emptied at every stop, "
                    + "so the outbox and the sequence counters would not survive a restart",
                hint: Self.keepDefault + ": /tmp is no place for what must outlive a restart")
        case .readOnly, .inaccessible:
            let what = rule.access == .readOnly ? "read-only" : "hidden"
            let only = writableAllowances.isEmpty ? "" : ": it keeps files only in " + writableAllowances.joined(separator: ", ")
            return ServiceSetupError(message: "outbox directory \(directory) is \(what) for the service (\(unit)\(only))",
                                       hint: Self.allowHint(directory))
        }
    }

    /// The persistent directories the unit lets the service write (its state directory, its ReadWritePaths=).
    private var writableAllowances: [String] {
        stateDirectories.map { "/var/lib/" + $0 } + readWritePaths
    }

    private static let keepDefault = "keep the outbox under \(stateDirectory) (outbox.path: \(stateDirectory)/outbox, the default)"

    /// The two ways out: the default outbox, or a drop-in that lets the service write `directory`. The directory must
    /// exist before the service starts (systemd refuses to start a unit whose ReadWritePaths= is missing).
    public static func allowHint(_ directory: String) -> String {
        keepDefault + ", or let the service write \(directory): sudo install -d -o parkwise -g parkwise -m 750 \(directory); "
            + "sudo systemctl edit parkwise-agent, add the two lines `[Service]` and `ReadWritePaths=\(directory)`; "
            + "sudo systemctl restart parkwise-agent (/usr/share/doc/parkwise-agent/SYSTEMD.md)"
    }

    /// What a write refused with EROFS at start means for the outbox `directory`. Run by systemd (`underService`) and
    /// outside the state directory, it is most likely the unit's sandbox; otherwise the file system is mounted read-only.
    /// A file system read-only in itself (its superblock, as after I/O errors) is said as such whoever runs the agent:
    /// neither a drop-in nor `install -d` helps there.
    public static func readOnly(directory: String, underService: Bool, mount: ReadOnlyMount? = nil) -> ServiceSetupError {
        if let mount = mount ?? ReadOnlyMount.of(directory), mount.fileSystem {
            return ServiceSetupError(
                message: "outbox directory \(directory) is on a read-only file system (EROFS): \(mount.mountPoint) is mounted "
                    + "read-only",
                hint: mount.hint(for: directory) + ", then restart the agent")
        }
        if underService && !inStateDirectory(directory) {
            return ServiceSetupError(
                message: "outbox directory \(directory) is read-only (EROFS): most likely the service's sandbox "
                    + "(ProtectSystem=strict in \(unit)) lets the agent write only \(stateDirectory) and its ReadWritePaths=",
                hint: allowHint(directory))
        }
        return ServiceSetupError(
            message: "outbox directory \(directory) is on a read-only file system (EROFS)",
            hint: "the file system is mounted read-only, or was remounted read-only after I/O errors: check findmnt -T "
                + "\(directory) and dmesg, fix or replace the storage, then restart the agent")
    }

    /// The `[Service]` section's key=value lines of a unit file, in order (comments, other sections and blank lines
    /// left out, a line ending in a backslash continued on the next).
    static func serviceSettings(_ text: String) -> [(String, String)] {
        var settings: [(String, String)] = []
        var section = ""
        var pending = ""
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            var line = raw.trimmed
            if pending.isEmpty && (line.hasPrefix("#") || line.hasPrefix(";")) { continue }
            if line.hasSuffix("\\") {
                line.removeLast()
                pending += line + " "
                continue
            }
            line = pending + line
            pending = ""
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard section == "Service", let equals = line.firstIndex(of: "=") else { continue }
            settings.append((line[..<equals].trimmed, line[line.index(after: equals)...].trimmed))
        }
        return settings
    }

    /// systemd's booleans; nil for anything else (ProtectSystem=strict).
    static func boolean(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "1", "yes", "y", "true", "t", "on": return true
        case "0", "no", "n", "false", "f", "off", "": return false
        default: return nil
        }
    }

    /// The specifiers a system unit's paths use.
    static func expand(_ word: String) -> String {
        guard word.contains("%") else { return word }
        let table: [Character: String] = ["S": "/var/lib", "t": "/run", "C": "/var/cache", "L": "/var/log", "T": "/tmp",
                                          "V": "/var/tmp", "%": "%"]
        var out = ""
        var iterator = word.makeIterator()
        while let c = iterator.next() {
            guard c == "%", let s = iterator.next() else { out.append(c); continue }
            out += table[s] ?? "%\(s)"
        }
        return out
    }

    /// `path` with `.`, `..`, repeated and trailing slashes taken out; relative to / (the service's working directory).
    public static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") where part != "." {
            if part == ".." { _ = parts.popLast() } else { parts.append(part) }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// Whether `path` is the state directory or inside it.
    public static func inStateDirectory(_ path: String) -> Bool { contains(stateDirectory, normalized(path)) }

    /// Whether `path` is `directory` or inside it (whole names: /var/lib/a does not contain /var/lib/ab).
    static func contains(_ directory: String, _ path: String) -> Bool {
        directory == "/" || path == directory || path.hasPrefix(directory + "/")
    }
}
