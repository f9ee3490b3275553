@testable import BridgeKit
import Postgres

/// A database session for the database thread's in-process tests (`DatabaseLoopTests`): it records every statement,
/// answers with the rows or the failure it is told to for statements starting with a given text (and whose parameters
/// match), and with no rows otherwise. It does not emulate SQL: the PostgreSQL suites test what the statements do.
///
/// Out of the box it answers just enough for `Applier` to go on as with a database that knows the batch's devices
/// and has not seen its events: the devices locked are found, every event inserted is new.
/// One object is the server and its session: `connect()` makes a new session (usable again after a lost one).
final class FakeDatabase: Database {
    struct Statement: Equatable {
        let sql: String
        let parameters: [String?]
    }

    private struct Answer {
        let sql: String
        let when: ([String?]) -> Bool
        /// How many more statements it answers (nil: every one).
        var times: Int?
        let result: Result<([String?]) -> [[String?]], PostgresError>
    }

    /// Every statement sent, in order (a failed one too: it was a round trip).
    private(set) var statements: [Statement] = []
    /// Indexes in `statements` of those that failed.
    private var failures: Set<Int> = []
    private(set) var isOK = true
    /// Sessions made by `connect()` (the first one, made before, not counted).
    private(set) var connects = 0
    /// While set, `connect()` fails: no server takes the connection.
    var refusesConnections = false
    /// Later answers first.
    private var answers: [Answer] = []

    init() {
        answer(SQL.lockDevices) { parameters in
            zip(Self.elements(parameters[0]), Self.elements(parameters[1])).map { [$0, $1, "1", "0", "f"] }
        }
        answer(SQL.insertEvents) { parameters in Self.elements(parameters[0]).map { [$0] } }
    }

    /// Statements starting with `sql` are answered with `rows` (given the statement's parameters).
    func answer(_ sql: String, rows: @escaping ([String?]) -> [[String?]]) {
        answers.append(Answer(sql: sql, when: { _ in true }, times: nil, result: .success(rows)))
    }

    /// The next `times` statements (nil: every one) starting with `sql` and whose parameters pass `when` fail with
    /// `error`; a connection loss leaves the session unusable.
    func fail(_ sql: String, with error: PostgresError, times: Int? = 1, when: @escaping ([String?]) -> Bool = { _ in true }) {
        answers.append(Answer(sql: sql, when: when, times: times, result: .failure(error)))
    }

    /// No more failures for statements starting with `sql`.
    func stopFailing(_ sql: String) {
        answers.removeAll { answer in
            guard case .failure = answer.result else { return false }
            return answer.sql == sql
        }
    }

    /// A new session, as `PostgresConnection.connect` makes one.
    func connect() throws(PostgresError) -> FakeDatabase {
        guard !refusesConnections else { throw Self.noServer }
        connects += 1
        isOK = true
        return self
    }

    @discardableResult
    func query(_ sql: String, _ parameters: [String?]) throws(PostgresError) -> PostgresRows {
        statements.append(Statement(sql: sql, parameters: parameters))
        guard isOK else {
            failures.insert(statements.count - 1)
            throw Self.connectionLost
        }
        guard let index = answers.lastIndex(where: { $0.times != 0 && sql.hasPrefix($0.sql) && $0.when(parameters) })
        else { return PostgresRows(columns: [], rows: []) }
        answers[index].times = answers[index].times.map { $0 - 1 }
        switch answers[index].result {
        case .success(let rows):
            return PostgresRows(columns: [], rows: rows(parameters))
        case .failure(let error):
            failures.insert(statements.count - 1)
            if error.isConnectionLoss { isOK = false }
            throw error
        }
    }

    func option(_ keyword: String) -> String? { nil }
    var server: String { "fake:5432" }
    var roundTrips: Int { statements.count }

    // MARK: - What was done

    /// The statements of each transaction whose COMMIT succeeded (its BEGIN to its COMMIT), in order.
    var committed: [[Statement]] {
        var done: [[Statement]] = []
        var open: [Statement]?
        for (index, statement) in statements.enumerated() {
            if statement.sql == "BEGIN" { open = [] }
            open?.append(statement)
            guard statement.sql == "COMMIT" || statement.sql == "ROLLBACK" else { continue }
            if let transaction = open, statement.sql == "COMMIT", !failures.contains(index) { done.append(transaction) }
            open = nil
        }
        return done
    }

    /// The ids of the events each committed batch inserted.
    var committedEvents: [[String]] {
        committed.map { batch in batch.filter { $0.sql == SQL.insertEvents }.flatMap { Self.elements($0.parameters[0]) } }
    }

    /// The ids of the events each statement inserting them carried, committed or not (the batches as they were tried).
    var triedEvents: [[String]] {
        statements.filter { $0.sql == SQL.insertEvents }.map { Self.elements($0.parameters[0]) }
    }

    // MARK: - Failures and values

    static let connectionLost = PostgresError(.connection, "the database connection was lost: server closed the connection unexpectedly")
    static let noServer = PostgresError(.connection, "cannot connect to postgresql://fake:5432/parkwise: Connection refused")

    /// The server's refusal with `sqlState` (e.g. 23514 a check violation, 57014 a statement cancelled).
    static func refused(_ sqlState: String) -> PostgresError {
        PostgresError(.query, "ERROR:  refused by the fake", sqlState: sqlState, libraryCode: 7)
    }

    /// The values of a text array parameter (`textArray`'s `{"a","b"}`; the tests' values have no quote or comma).
    static func elements(_ array: String?) -> [String] {
        guard let array, array.count > 2 else { return [] }
        return array.dropFirst().dropLast().split(separator: ",").map { String($0.filter { $0 != "\"" }) }
    }
}
