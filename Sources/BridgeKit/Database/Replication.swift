import ParkWiseLog
import Postgres

/// Whether a commit the bridge sees succeed survives a failover: the bridge forgets a batch once its COMMIT returns,
/// so with a multi-host URL (a primary and standbys) a commit only the primary has is lost with it. The session's own
/// settings say it (they may be set per role or database): a standby must be named in `synchronous_standby_names`, and
/// `synchronous_commit` must wait for it (`on`, `remote_write`, `remote_apply`; not `local` or `off`).
enum Replication {
    static let settingsQuery = "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names')"

    /// A warning when the URL names several servers and this session's commits do not wait for a standby.
    static func warnIfAsynchronous(_ db: any Database) {
        guard db.option("host")?.contains(",") == true || db.option("hostaddr")?.contains(",") == true,
              let row = (try? db.query(settingsQuery))?.first, let commit = row[0], let standbys = row[1]
        else { return }
        guard standbys.isEmpty || commit == "local" || commit == "off" else { return }
        Log.warn("database commits do not wait for a standby: a failover may lose batches already committed", [
            "server": db.server, "synchronous_commit": commit, "synchronous_standby_names": standbys.isEmpty ? "-" : standbys,
            "fix": "on the primary: ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (standby names)' (deploy/backend/README.md, Database failover)",
        ])
    }
}
