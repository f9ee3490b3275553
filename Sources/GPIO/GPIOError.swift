import SystemIO
import Glibc

/// Why the board's GPIO lines could not be used, written for the person standing at the cabinet.
public struct GPIOError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case chipNotFound, lineNotFound, lineBusy, lineShared, permissionDenied, requestFailed, boardUnknown
        /// Fixed only by changing the config or the machine: no GPIO chip at all, the named board's own chip missing
        /// (another board), several chips with the label the config uses.
        case noGPIO, wrongBoard, chipAmbiguous
    }

    /// A problem that can pass without anyone changing the config: a chip not probed yet at boot (an I2C expander, by
    /// its label or device), a line another program holds for now, the gpio group's access not applied yet by udev.
    /// The agent exits 1 for these, so systemd starts it again; 78 for the rest (the config or the board must be fixed).
    public var mayPassByItself: Bool { code == .chipNotFound || code == .lineBusy || code == .permissionDenied }

    public var code: Code
    /// What happened and what to do about it.
    public var message: String
    /// The underlying errno when there is one.
    public var errno: Errno?

    public init(code: Code, message: String, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    public var description: String {
        guard let errno else { return message }
        return "\(message) (errno \(errno.rawValue): \(errno.text))"
    }
}

extension GPIOError {
    /// A /dev/gpiochipN that could not be opened: the permission case gets the group/udev advice.
    static func cannotOpen(_ path: String, errno number: Errno) -> GPIOError {
        if number.isPermission {
            let name = currentUserName()
            let user = name.map { "'\($0)'" } ?? "the agent runs as"
            let fix = "sudo usermod -aG gpio \(name ?? "<user>")"
            return GPIOError(
                code: .permissionDenied,
                message: "cannot open \(path): permission denied. The user \(user) must be in group 'gpio' "
                    + "(\(fix), then restart the agent), or a udev rule must give a group access to /dev/gpiochip*, "
                    + "e.g. SUBSYSTEM==\"gpio\", KERNEL==\"gpiochip*\", GROUP=\"gpio\", MODE=\"0660\" "
                    + "in /etc/udev/rules.d/60-gpio.rules",
                errno: number)
        }
        return GPIOError(code: .requestFailed,
                         message: "cannot open GPIO chip \(path); check `ls -l /dev/gpiochip*` and the kernel log (dmesg)",
                         errno: number)
    }
}

/// The effective user's login name, for the group advice.
private func currentUserName() -> String? {
    var buffer = [CChar](repeating: 0, count: 1024)
    return buffer.withUnsafeMutableBufferPointer { storage -> String? in
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        // pw_name points into `storage`, so it is read before the closure returns.
        let status = getpwuid_r(geteuid(), &entry, storage.baseAddress!, storage.count, &result)
        guard status == 0, result != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }
}
