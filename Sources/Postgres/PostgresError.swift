/// A database failure a technician can act on: what went wrong, and libpq's or the server's code.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The URL cannot be parsed, or names an option libpq does not know.
        case badURL
        /// The server cannot be reached, refused the login, or the connection broke.
        case connection
        /// The server rejected a statement (its SQLSTATE is in `sqlState`).
        case query
    }

    public var code: Code
    public var message: String
    /// The server's SQLSTATE (e.g. `40001`, `42P01`), when it sent one.
    public var sqlState: String?
    /// libpq's connection or result status number.
    public var libraryCode: Int32?

    public init(_ code: Code, _ message: String, sqlState: String? = nil, libraryCode: Int32? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.libraryCode = libraryCode
    }

    /// Whether a new connection may succeed where this one failed (server restarting, link lost).
    public var isConnectionLoss: Bool {
        code == .connection || sqlState.map { $0.hasPrefix("08") || $0 == "57P01" || $0 == "57P02" || $0 == "57P03" } == true
    }

    /// A deadlock, serialization or lock failure: the same transaction may simply be run again.
    public var isTransient: Bool { ["40001", "40P01", "55P03"].contains(sqlState ?? "") }

    /// The server refused the statement's data (SQLSTATE class 22 data exception, 23 integrity
    /// constraint violation, 21 cardinality, 54 a program limit such as an index row too large): the
    /// same values fail again whatever state the database is in. Every other failure (read-only, disk
    /// full, timeout, privilege, …) is the database's own fault.
    public var isDataError: Bool {
        code == .query && sqlState.map { ["22", "23", "21", "54"].contains($0.prefix(2)) } == true
    }

    /// The session cannot write (a standby, e.g. the old primary after a failover): a new connection
    /// may reach the writable server.
    public var isReadOnly: Bool { sqlState == "25006" }

    public var description: String {
        var text = message
        if let sqlState { text += " (SQLSTATE \(sqlState))" } else if let libraryCode { text += " (code \(libraryCode))" }
        return text
    }
}
