/// What the bridge's database thread needs of a session: parameterized statements (`$1`, `$2`…, nil = NULL) and the
/// session's state. `PostgresConnection` is the real one; the bridge's `DatabaseLoopTests` run the database thread
/// (`DatabaseLoop`, `BatchPolicy`, `Applier`) in-process against `FakeDatabase`, which records the statements and
/// answers scripted rows and failures without SQL semantics.
public protocol Database: AnyObject {
    /// Runs one statement and returns its rows: one round trip.
    @discardableResult
    func query(_ sql: String, _ parameters: [String?]) throws(PostgresError) -> PostgresRows
    /// Whether the session is still usable (after the last call).
    var isOK: Bool { get }
    /// The value of connection option `keyword` (e.g. `user`, `keepalives_idle`), nil when unset.
    func option(_ keyword: String) -> String?
    /// The server the session reached (`host:port`).
    var server: String { get }
    /// Statements sent and answered so far.
    var roundTrips: Int { get }
}

extension Database {
    @discardableResult
    public func query(_ sql: String) throws(PostgresError) -> PostgresRows { try query(sql, []) }
}
