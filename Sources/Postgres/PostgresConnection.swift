import CPostgres
#if canImport(Glibc)
import Glibc
#endif

/// The single owner of a libpq connection (`PGconn`). Every call blocks: use it from one dedicated
/// thread, never from Swift's cooperative pool. Statements are parameterized only (`$1`, `$2`…,
/// values sent apart from the SQL text), so no value is ever spliced into SQL.
public final class PostgresConnection {
    private let handle: OpaquePointer

    private init(handle: OpaquePointer) { self.handle = handle }

    deinit { PQfinish(handle) }

    /// Connects to a libpq URL (`postgresql://user@host:port/db?sslmode=require`).
    public static func connect(url: String, timeoutSeconds: Int = 5) throws(PostgresError) -> PostgresConnection {
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
            throw PostgresError(.badURL, "'\(url)' is not a database URL like postgresql://USER@HOST:PORT/DB")
        }
        var parseError: UnsafeMutablePointer<CChar>?
        if let options = PQconninfoParse(url, &parseError) {
            PQconninfoFree(options)
        } else {
            let detail = parseError.map { String(cString: $0) } ?? "cannot parse it"
            if let parseError { PQfreemem(parseError) }
            throw PostgresError(.badURL, "'\(redacted(url))' is not a valid database URL: \(firstLine(detail))")
        }
        // Defaults first: what the URL says overrides them. Server notices ("already exists,
        // skipping") are not for the bridge's log.
        let keys = ["connect_timeout", "application_name", "options", "dbname"]
        let values = [String(timeoutSeconds), "parkwise-bridge", "-c client_min_messages=warning", url]
        let handle = withCStrings(keys) { k in withCStrings(values) { v in PQconnectdbParams(k, v, 1) } }
        guard let handle else { throw PostgresError(.connection, "out of memory creating a database connection") }
        let connection = PostgresConnection(handle: handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.connection, "cannot connect to \(redacted(url)): \(firstLine(connection.lastError))",
                                libraryCode: Int32(bitPattern: PQstatus(handle).rawValue))
        }
        return connection
    }

    /// Whether the connection is still usable (libpq's view after the last call).
    public var isOK: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Runs one statement with text parameters (nil = NULL) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        let raw = withOptionalCStrings(parameters) { values in
            PQexecParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        guard let raw else {
            throw PostgresError(.connection, "the database connection failed: \(firstLine(lastError))",
                                libraryCode: Int32(bitPattern: PQstatus(handle).rawValue))
        }
        let result = PostgresResult(raw)
        guard result.succeeded else {
            if PQstatus(handle) != CONNECTION_OK {
                throw PostgresError(.connection, "the database connection was lost: \(firstLine(lastError))",
                                    libraryCode: Int32(bitPattern: PQstatus(handle).rawValue))
            }
            throw result.error()
        }
        return result.rows()
    }

    /// Runs `body` inside BEGIN … COMMIT; rolls back when it throws.
    public func transaction<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(PostgresError) -> T {
        try query("BEGIN")
        do {
            let value = try body(self)
            try query("COMMIT")
            return value
        } catch {
            if isOK { _ = try? query("ROLLBACK") }
            throw error
        }
    }

    private var lastError: String { PQerrorMessage(handle).map { String(cString: $0) } ?? "" }
}

/// The URL without its password, for messages and logs.
public func redacted(_ url: String) -> String {
    // scheme://user:password@host… -> scheme://user:***@host…
    guard let at = url.firstIndex(of: "@") else { return url }
    let head = url[..<at]
    guard let slashes = head.firstIndex(of: "/"), let colon = head[slashes...].firstIndex(of: ":") else { return url }
    return String(url[...colon]) + "***" + String(url[at...])
}

private func firstLine(_ text: String) -> String {
    let lines = text.split(separator: "\n").map { $0.trimmingCharacters() }
    return lines.first(where: { !$0.isEmpty }) ?? "no detail from libpq"
}

extension Substring {
    fileprivate func trimmingCharacters() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}

/// NUL-terminated copies of `strings`, valid during `body`.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    withOptionalCStrings(strings.map { Optional($0) }) { pointers in body(pointers + [nil]) }
}

private func withOptionalCStrings<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let owned: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0) } ?? nil }
    defer { for pointer in owned { free(pointer) } }
    return body(owned.map { UnsafePointer($0) })
}
