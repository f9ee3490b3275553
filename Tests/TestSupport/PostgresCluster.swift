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
        directory = try PostgresCluster.ownedDirectory()
        try PostgresCluster.asPostgres("initdb", ["-D", dataPath, "-A", "trust", "-U", "postgres", "-N"])
        try start()
    }

    /// A streaming hot standby of `primary` (`pg_basebackup -R`: its data, and primary_conninfo to follow it), started.
    /// initdb's pg_hba.conf lets 127.0.0.1 replicate with trust, and PostgreSQL 15's defaults (wal_level=replica,
    /// max_wal_senders=10, hot_standby=on) are what streaming needs.
    public init(standbyOf primary: PostgresCluster, port: Int = freePort()) throws {
        self.port = port
        directory = try PostgresCluster.ownedDirectory()
        try PostgresCluster.asPostgres("pg_basebackup", ["-h", "127.0.0.1", "-p", "\(primary.port)", "-U", "postgres",
                                                         "-D", dataPath, "-R", "-X", "stream", "-c", "fast"])
        try start()
    }

    /// A new temp directory the `postgres` user owns, world-searchable (root's tests reach its socket and files).
    private static func ownedDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parkwise-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        guard let user = getpwnam("postgres") else { throw HarnessError("no postgres user: apt-get install postgresql") }
        chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid)
        return directory
    }

    /// Runs one of the server's programs as `postgres` (they refuse root) to completion.
    private static func asPostgres(_ program: String, _ arguments: [String]) throws {
        let child = try Child("/usr/sbin/runuser", ["-u", "postgres", "--", binaries + "/" + program] + arguments)
        guard child.wait(60) == 0 else { throw HarnessError("\(program) failed: \(child.stderr)") }
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
    public func stop() { stop(SIGINT) }

    /// Immediate shutdown (SIGQUIT): the server dies as in a crash, its sessions cut, nothing flushed or said to its
    /// standbys beyond what they had.
    public func crash() { stop(SIGQUIT) }

    private func stop(_ signal: Int32) {
        guard server != nil else { return }   // stopped or crashed already: its old PID may be another process's now
        if let text = try? String(contentsOfFile: dataPath + "/postmaster.pid", encoding: .utf8),
           let line = text.split(separator: "\n").first, let pid = Int32(line), pid > 0 {
            kill(pid, signal)
        }
        _ = server?.wait(30)
        server = nil
    }

    /// A hot standby of this cluster, streaming. `synchronous`: then a COMMIT here returns once the standby has its
    /// WAL on disk (`synchronous_standby_names`, set with ALTER SYSTEM after the base backup, so that the standby, once
    /// promoted, does not wait for a standby of its own).
    public func streamingStandby(synchronous: Bool) throws -> PostgresCluster {
        let standby = try PostgresCluster(standbyOf: self)
        let state = "SELECT string_agg(state || '/' || sync_state, ',') FROM pg_stat_replication"
        guard eventually(30, { (try? sql(state)) == "streaming/async" }) else { throw HarnessError("standby not streaming: \((try? sql(state)) ?? "")") }
        guard synchronous else { return standby }
        try sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
        try sql("SELECT pg_reload_conf()")
        guard eventually(30, { (try? sql(state)) == "streaming/sync" }) else { throw HarnessError("standby not synchronous: \((try? sql(state)) ?? "")") }
        return standby
    }

    /// Promotes this standby to a primary, waiting until it accepts writes.
    public func promote() throws {
        guard try sql("SELECT pg_promote(true, 30)") == "t" else { throw HarnessError("standby on port \(port) not promoted") }
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
