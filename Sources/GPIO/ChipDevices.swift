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
