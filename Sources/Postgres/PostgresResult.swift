import CPostgres

/// The rows of one statement, read into Swift values; text format, NULL as nil.
public struct PostgresRows: Sendable {
    public let columns: [String]
    public let rows: [[String?]]
    /// Rows the statement changed (UPDATE/INSERT/DELETE), 0 otherwise.
    public let affected: Int

    public init(columns: [String], rows: [[String?]], affected: Int = 0) {
        self.columns = columns
        self.rows = rows
        self.affected = affected
    }

    public var first: [String?]? { rows.first }

    /// The value of `column` in row `row`, nil for NULL or a missing column.
    public func value(_ row: Int, _ column: String) -> String? {
        guard row < rows.count, let index = columns.firstIndex(of: column) else { return nil }
        return rows[row][index]
    }
}

/// The single owner of a `PGresult`: read once into `PostgresRows`, freed on deinit.
final class PostgresResult {
    private let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }

    deinit { PQclear(handle) }

    var status: ExecStatusType { PQresultStatus(handle) }

    var succeeded: Bool { status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY }

    func error() -> PostgresError {
        let message = PQresultErrorMessage(handle).map { String(cString: $0) } ?? "unknown error"
        let state = PQresultErrorField(handle, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let trimmed = message.split(separator: "\n").first.map(String.init) ?? message
        return PostgresError(.query, trimmed, sqlState: state, libraryCode: Int32(bitPattern: status.rawValue))
    }

    func rows() -> PostgresRows {
        let columnCount = Int(PQnfields(handle)), rowCount = Int(PQntuples(handle))
        let columns = (0..<columnCount).map { String(cString: PQfname(handle, Int32($0))) }
        var rows: [[String?]] = []
        rows.reserveCapacity(rowCount)
        for r in 0..<rowCount {
            rows.append((0..<columnCount).map { c in
                PQgetisnull(handle, Int32(r), Int32(c)) == 1 ? nil : String(cString: PQgetvalue(handle, Int32(r), Int32(c)))
            })
        }
        let affected = Int(String(cString: PQcmdTuples(handle))) ?? 0
        return PostgresRows(columns: columns, rows: rows, affected: affected)
    }
}
