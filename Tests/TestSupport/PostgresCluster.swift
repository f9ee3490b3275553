import Foundation

/// A private PostgreSQL 15 cluster on a free loopback port, for tests that run as root: initdb and
/// postgres run as the `postgres` user (runuser) in a world-searchable temp directory. Stopped by
/// the postmaster's PID (SIGINT: fast shutdown), never by name.
public final class PostgresCluster: @unchecked Sendable {
    public static let binaries = "/usr/lib/postgresql/15/bin"
    public let port: Int
    public let directory: URL
    private var server: Child?

    public init(port: Int = freePort()) throws {
        self.port = port
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("parkwise-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        guard let user = getpwnam("postgres") else { throw HarnessError("no postgres user: apt-get install postgresql") }
        chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid)
        let initdb = try Child("/usr/sbin/runuser", ["-u", "postgres", "--", PostgresCluster.binaries + "/initdb",
                                                     "-D", dataPath, "-A", "trust", "-U", "postgres", "-N"])
        guard initdb.wait(60) == 0 else { throw HarnessError("initdb failed: \(initdb.stderr)") }
        try start()
    }

    private var dataPath: String { directory.path + "/data" }

    /// The libpq URL of database `name` (root connects as `postgres` with trust auth).
    public func url(_ name: String = "postgres") -> String { "postgresql://postgres@127.0.0.1:\(port)/\(name)" }

    /// Starts the server (again, same data and port) and waits until it accepts connections.
    public func start() throws {
        server = try Child("/usr/sbin/runuser", ["-u", "postgres", "--", PostgresCluster.binaries + "/postgres",
                                                 "-D", dataPath, "-p", "\(port)", "-k", directory.path,
                                                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        let ready = eventually(30) {
            let probe = try? Child(PostgresCluster.binaries + "/pg_isready", ["-h", "127.0.0.1", "-p", "\(port)", "-q"])
            return probe?.wait(5) == 0
        }
        guard ready else { throw HarnessError("postgres did not start on port \(port): \(server?.stderr ?? "")") }
    }

    /// Fast shutdown through the postmaster's PID (first line of postmaster.pid).
    public func stop() {
        if let text = try? String(contentsOfFile: dataPath + "/postmaster.pid", encoding: .utf8),
           let line = text.split(separator: "\n").first, let pid = Int32(line), pid > 0 {
            kill(pid, SIGINT)
        }
        _ = server?.wait(30)
        server = nil
    }

    /// Runs SQL with psql and returns its unaligned, tuples-only output (`|` between columns).
    @discardableResult
    public func sql(_ text: String, database: String = "postgres") throws -> String {
        let child = try Child("/usr/bin/psql", ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url(database), "-c", text])
        guard child.wait(30) == 0 else { throw HarnessError("psql failed: \(child.stderr) for \(text)") }
        return child.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs an SQL file.
    public func sqlFile(_ path: String, database: String) throws {
        let child = try Child("/usr/bin/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url(database), "-f", path])
        guard child.wait(60) == 0 else { throw HarnessError("psql -f \(path) failed: \(child.stderr)") }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}
