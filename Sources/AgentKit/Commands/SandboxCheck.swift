import Glibc
import ParkWiseCLI
import ParkWiseCore
import ServiceSetup
import MQTT

/// Whether the installed service may keep its outbox where the config says. `doctor` and `check-config` run outside
/// the unit's sandbox (ProtectSystem=strict): a directory they can write may be read-only for the service, which then
/// finds it so only when it runs. Nothing to check on a machine without the unit (a laptop, CI).
enum SandboxCheck {
    /// Where the unit files are looked up (default /): a board's image mounted elsewhere, or a test's directory.
    static let variable = "PARKWISE_SYSTEMD_ROOT"

    /// `check-config` run as root (the install's check): the problem, at the line that sets outbox.path.
    static func issues(config: AgentConfig, configPath: String) -> [ConfigIssue] {
        guard getuid() == 0, let (sandbox, _) = installed(), let problem = problem(sandbox, config.outbox.path) else { return [] }
        return [ConfigIssue(file: configPath, mark: config.outbox.pathMark ?? Mark(line: 1, column: 1),
                            message: problem.message, hint: problem.hint)]
    }

    /// `doctor`: a failed check with the drop-in that fixes it; an ok one saying which setting lets the service write
    /// an outbox outside its state directory, or that no unit is installed to ask.
    static func steps(_ config: AgentConfig) -> [ProbeStep] {
        let directory = config.outbox.path
        let inStateDirectory = ServiceSandbox.inStateDirectory(directory)
        guard let (sandbox, files) = installed() else {
            return inStateDirectory ? [] : [ProbeStep(.ok, "the service's sandbox not checked",
                                                      detail: "no \(ServiceSandbox.unit) installed on this machine")]
        }
        let source = "read from " + files.joined(separator: ", ")
        if let problem = problem(sandbox, directory) {
            return [ProbeStep(.failed, problem.message, detail: source, fix: problem.hint)]
        }
        if inStateDirectory { return [] }
        let setting = sandbox.rule(for: directory)?.setting ?? "no sandbox setting covers it"
        return [ProbeStep(.ok, "the service may write outbox directory \(directory)", detail: "\(setting); \(source)")]
    }

    private static func installed() -> (sandbox: ServiceSandbox, files: [String])? {
        ServiceSandbox.installed(root: Environment.value(variable) ?? "/")
    }

    /// The directory as written and, when it exists, as the kernel resolves it (a symlink into the state directory is
    /// writable): a problem only when neither is writable for the service. A ReadWritePaths= directory that does not
    /// exist is one too: systemd refuses to start the unit (status=226/NAMESPACE).
    private static func problem(_ sandbox: ServiceSandbox, _ directory: String) -> ServiceSetupError? {
        guard let problem = sandbox.problem(outbox: directory) else {
            guard let rule = sandbox.rule(for: directory), rule.setting.hasPrefix("ReadWritePaths="),
                  access(rule.path, F_OK) != 0 else { return nil }
            if let mount = ReadOnlyMount.of(rule.path) {
                // Run outside the sandbox: a read-only mount here is the storage's, and `install -d` would fail on it.
                return ServiceSetupError(
                    message: "\(ServiceSandbox.unit) has \(rule.setting), which does not exist and cannot be made: "
                        + "\(mount.mountPoint) is mounted read-only; systemd does not start the service (status=226/NAMESPACE) "
                        + "until it exists",
                    hint: mount.hint(for: rule.path) + " (sudo install -d -o parkwise -g parkwise -m 750 \(rule.path))")
            }
            return ServiceSetupError(
                message: "\(ServiceSandbox.unit) has \(rule.setting), which does not exist: systemd does not start the service "
                    + "(status=226/NAMESPACE) until it does",
                hint: "sudo install -d -o parkwise -g parkwise -m 750 \(rule.path)")
        }
        guard let resolved = realpath(directory, nil) else {
            // Not made yet, on storage mounted read-only: neither `install -d` nor a drop-in helps until it is remounted.
            guard let mount = ReadOnlyMount.of(directory) else { return problem }
            return ServiceSetupError(message: problem.message + "; and \(mount.mountPoint) is mounted read-only",
                                       hint: mount.hint(for: directory) + "; then " + problem.hint)
        }
        defer { free(resolved) }
        return sandbox.problem(outbox: String(cString: resolved)) == nil ? nil : problem
    }
}
