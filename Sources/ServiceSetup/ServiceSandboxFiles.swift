import SystemIO
import Glibc

extension ServiceSandbox {
    /// Where systemd looks for system units, the first holding the unit winning (/etc before the package's).
    static let unitDirectories = ["/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
                                  "/usr/lib/systemd/system", "/lib/systemd/system"]

    /// The installed unit and its `parkwise-agent.service.d/*.conf` drop-ins as systemd would apply them at the next
    /// start, read under `root` (/ on a board; another directory for a board's image, or a test): the sandbox, and the
    /// files it was read from. Nil when no unit is installed (a laptop, a CI machine) or it is masked.
    public static func installed(root: String = "/") -> (sandbox: ServiceSandbox, files: [String])? {
        let base = root == "/" ? "" : root
        guard let unitFile = unitDirectories.map({ base + $0 + "/" + unit }).first(where: { access($0, F_OK) == 0 }),
              let unitText = DurableFile.read(path: unitFile), !unitText.isEmpty else { return nil }
        // A drop-in's name in a directory earlier in the list hides the same name in a later one; all apply in name order.
        var dropIns: [String: String] = [:]
        for directory in unitDirectories.reversed() {
            let dir = base + directory + "/" + unit + ".d"
            for name in fileNames(in: dir) where name.hasSuffix(".conf") { dropIns[name] = dir + "/" + name }
        }
        let files = [unitFile] + dropIns.keys.sorted().map { dropIns[$0]! }
        let texts = files.map { String(decoding: DurableFile.read(path: $0) ?? [], as: UTF8.self) }
        return (ServiceSandbox(files: texts), files)
    }

    private static func fileNames(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
