import CPostgres
#if canImport(Glibc)
import Glibc
#endif

/// The single owner of a libpq connection (`PGconn`). Every call blocks: use it from one dedicated
/// thread, never from Swift's cooperative pool. Statements are parameterized only (`$1`, `$2`…,
/// values sent apart from the SQL text), so no value is ever spliced into SQL.
public final class PostgresConnection: Database {
    private let handle: OpaquePointer
    /// Statements sent and answered so far: each one a round trip to the server.
    public private(set) var roundTrips = 0

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
        // Defaults first: what the URL says overrides them (`dbname` is expanded where it stands).
        // `options` comes after the URL, the URL's own appended to ours: the server takes the last
        // `-c` of a setting, so an explicit one wins. Server notices ("already exists, skipping")
        // are not for the bridge's log.
        let options = [sessionDefaults, urlOption(url, "options")].compactMap { $0 }.joined(separator: " ")
        let settings = [("connect_timeout", String(timeoutSeconds)), ("application_name", "parkwise-bridge")]
            + networkDefaults + failoverDefaults(url) + [("dbname", url), ("options", options)]
        let keys = settings.map(\.0), values = settings.map(\.1)
        let handle = withCStrings(keys) { k in withCStrings(values) { v in PQconnectdbParams(k, v, 1) } }
        guard let handle else { throw PostgresError(.connection, "out of memory creating a database connection") }
        let connection = PostgresConnection(handle: handle)
        guard PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(.connection, "cannot connect to \(redacted(url)): \(eachHost(connection.lastError))",
                                libraryCode: Int32(bitPattern: PQstatus(handle).rawValue))
        }
        return connection
    }

    /// The value libpq uses for connection option `keyword` (e.g. `keepalives_idle`), nil when unset.
    public func option(_ keyword: String) -> String? {
        guard let list = PQconninfo(handle) else { return nil }
        defer { PQconninfoFree(list) }
        return entry(list, keyword)?.val.map { String(cString: $0) }
    }

    /// The server this connection reached (`host:port`): with a multi-host URL, the one libpq picked.
    public var server: String {
        let host = PQhost(handle).map { String(cString: $0) } ?? "-", port = PQport(handle).map { String(cString: $0) } ?? "-"
        return "\(host):\(port)"
    }

    /// Whether the connection is still usable (libpq's view after the last call).
    public var isOK: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Runs one statement with text parameters (nil = NULL) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?]) throws(PostgresError) -> PostgresRows {
        roundTrips += 1
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

/// A silently dropped link (no FIN, no RST) is noticed within about 25 s, not TCP's 2 hours: probes
/// after 10 s idle, every 5 s, 3 unanswered ones end it; data unacknowledged for 30 s ends it too
/// (tcp_user_timeout, libpq 12 and later). The URL may set each of them.
private let networkDefaults: [(String, String)] = {
    let all = [("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
               ("tcp_user_timeout", "30000")]
    return all.filter { libpqKnows($0.0) }
}()

/// With several hosts (`postgresql://u@primary:5432,standby:5432/db`, a primary and its standbys) libpq takes the first
/// that answers, by default even a read-only standby: every batch would then fail (25006) and every reconnection pick
/// that standby again. So unless the URL says otherwise, only a server that accepts writes is taken; libpq tries the
/// next host until one does (the promoted standby after a failover).
private func failoverDefaults(_ url: String) -> [(String, String)] {
    guard urlOption(url, "host")?.contains(",") == true || urlOption(url, "hostaddr")?.contains(",") == true else { return [] }
    return [("target_session_attrs", "read-write")]
}

/// The session's defaults: an orphaned transaction (its client gone silent) ends after 60 s and
/// releases its row locks.
private let sessionDefaults = "-c client_min_messages=warning -c idle_in_transaction_session_timeout=60s"

/// Whether this libpq accepts `keyword` in a connection string.
private func libpqKnows(_ keyword: String) -> Bool {
    guard let defaults = PQconndefaults() else { return false }
    defer { PQconninfoFree(defaults) }
    return entry(defaults, keyword) != nil
}

/// The value `url` gives `keyword`, if it gives one.
private func urlOption(_ url: String, _ keyword: String) -> String? {
    guard let parsed = PQconninfoParse(url, nil) else { return nil }
    defer { PQconninfoFree(parsed) }
    return entry(parsed, keyword)?.val.map { String(cString: $0) }
}

/// `keyword`'s entry in a libpq option list (ended by a NULL keyword).
private func entry(_ list: UnsafeMutablePointer<PQconninfoOption>, _ keyword: String) -> PQconninfoOption? {
    var option = list
    while let name = option.pointee.keyword {
        if String(cString: name) == keyword { return option.pointee }
        option += 1
    }
    return nil
}

/// The URL without its password (in the user part, or a `password=` parameter), for messages and logs.
public func redacted(_ url: String) -> String {
    let (address, parameters) = url.firstIndex(of: "?").map { (url[..<$0], url[$0...]) } ?? (url[...], "")
    return redactedUser(address) + redactedParameters(parameters)
}

/// scheme://user:password@host… -> scheme://user:***@host… (`@` in the password is written %40, so the first `@` ends it).
private func redactedUser(_ address: Substring) -> String {
    guard let at = address.firstIndex(of: "@") else { return String(address) }
    let head = address[..<at]
    guard let slashes = head.firstIndex(of: "/"), let colon = head[slashes...].firstIndex(of: ":") else { return String(address) }
    return String(address[...colon]) + "***" + String(address[at...])
}

/// ?sslmode=require&password=secret -> ?sslmode=require&password=***
private func redactedParameters(_ parameters: Substring) -> String {
    guard !parameters.isEmpty else { return "" }
    let pairs = parameters.dropFirst().split(separator: "&", omittingEmptySubsequences: false).map { pair in
        pair.lowercased().hasPrefix("password=") ? "password=***" : String(pair)
    }
    return "?" + pairs.joined(separator: "&")
}

/// Why a connection failed: with several hosts libpq says it for each one (`connection to server at … failed: …`,
/// a line of its own, followed by hint lines); each host's reason is kept, on one line.
private func eachHost(_ text: String) -> String {
    let hosts = text.split(separator: "\n").map { $0.trimmingCharacters() }.filter { $0.hasPrefix("connection to server") }
    return hosts.count > 1 ? hosts.joined(separator: "; ") : firstLine(text)
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
