import Glibc

/// The GPIO character devices of this machine (/dev/gpiochipN).
enum ChipDevices {
    /// Every gpiochip device once, by number. A compatibility alias of another device (such as the
    /// /dev/gpiochip4 -> gpiochip0 symlink of some Pi 5 images) is left out: same device number.
    static func paths() -> [String] {
        guard let directory = opendir("/dev") else { return [] }
        defer { closedir(directory) }
        var candidates: [(number: Int, path: String, device: UInt64, isAlias: Bool)] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard name.hasPrefix("gpiochip"), let number = Int(name.dropFirst(8)), number >= 0 else { continue }
            let path = "/dev/" + name
            var status = stat()
            guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFCHR else { continue }
            var linkStatus = stat()
            let isAlias = lstat(path, &linkStatus) == 0 && linkStatus.st_mode & S_IFMT == S_IFLNK
            candidates.append((number, path, UInt64(status.st_rdev), isAlias))
        }
        // Real device nodes first, so an alias never hides the node it points to.
        candidates.sort { ($0.isAlias ? 1 : 0, $0.number) < ($1.isAlias ? 1 : 0, $1.number) }
        var seen = Set<UInt64>()
        return candidates.filter { seen.insert($0.device).inserted }.sorted { $0.number < $1.number }.map(\.path)
    }
}

extension ChipDevices {
    /// The name of the device a GPIO chip belongs to in sysfs, the chip's parent: "1-0020" for an MCP23017 at 0x20
    /// on I2C bus 1, "fe200000.gpio" for a Pi 4's own GPIO block, "gpio-sim.0" for a gpio-sim chip.
    /// Found through /sys/dev/char/MAJOR:MINOR (so an alias path works too), else /sys/bus/gpio/devices/gpiochipN.
    /// nil when sysfs is not mounted or tells nothing.
    static func parentDevice(path: String, chipName: String) -> String? {
        var candidates: [String] = []
        var status = stat()
        if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFCHR {
            let device = UInt64(status.st_rdev)
            let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
            let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
            candidates.append("/sys/dev/char/\(major):\(minor)")
        }
        if !chipName.isEmpty { candidates.append("/sys/bus/gpio/devices/\(chipName)") }
        for link in candidates {
            guard let resolved = realpath(link, nil) else { continue }
            let target = String(cString: resolved)
            free(resolved)
            // .../devices/platform/soc/fe804000.i2c/i2c-1/1-0020/gpiochip2 -> "1-0020"
            let parts = target.split(separator: "/")
            guard parts.count >= 2, parts.last?.hasPrefix("gpiochip") == true else { continue }
            let parent = String(parts[parts.count - 2])
            if parent != "devices" && parent != "virtual" { return parent }
        }
        return nil
    }
}
