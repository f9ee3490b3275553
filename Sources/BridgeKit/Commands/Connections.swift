import FoundationEssentials
import ParkWiseCLI
import ParkWiseCore
import Postgres
import ServiceSetup

/// Start-up checks shared by the commands: one clear line and the right exit code for each problem.
enum Connections {
    static let databaseOption = CommandSpec.Option(
        name: "database", value: "url", help: """
        PostgreSQL URL, e.g. postgresql://parkwise@db:5432/parkwise (default: $DATABASE_URL). A primary and its \
        standbys: every host, postgresql://parkwise@db1:5432,db2:5432/parkwise (the one that accepts writes is used).
        """)

    enum Opened {
        case ok(PostgresConnection, url: String)
        case failed(Int32)
    }

    /// The database URL from --database or DATABASE_URL, connected.
    static func database(_ args: ParsedArguments, command: CommandSpec) -> Opened {
        guard let url = args.option("database") ?? Environment.value("DATABASE_URL"), !url.isEmpty else {
            printError(UsageError(command: command, message: "Missing expected argument '--database <url>' (or DATABASE_URL)").text)
            return .failed(ExitCode.usage)
        }
        do {
            return .ok(try PostgresConnection.connect(url: url), url: redacted(url))
        } catch {
            switch error.code {
            case .badURL:
                printError(UsageError(command: command, message: error.message).text)
                return .failed(ExitCode.usage)
            case .connection, .query:
                printError("error: \(error)\n    hint: check that PostgreSQL runs and accepts this user from here")
                return .failed(ExitCode.failure)
            }
        }
    }

    /// Exit code 78 (with a line saying why) when the database is not ParkWise's or not migrated to `version`.
    static func checkSchema(_ db: PostgresConnection, url: String, needVersion: Int?) -> Int32? {
        do {
            let missing = try Migrations.missingBackendTables(db)
            if !missing.isEmpty {
                printError("error: \(url) has no ParkWise tables (missing: \(missing.joined(separator: ", ")))\n"
                           + "    hint: point --database at the backend's database, after the backend has created its schema")
                return ExitCode.config
            }
            if let needVersion {
                let current = try Migrations.currentVersion(db)
                if current < needVersion {
                    printError("error: \(url) is at bridge schema version \(current), this bridge needs \(needVersion)\n"
                               + "    hint: run parkwise-bridge migrate --database URL first (or start it with run --migrate)")
                    return ExitCode.config
                }
            }
            return nil
        } catch {
            printError("error: cannot read the database schema: \(error)" + privilegeHint(error, db))
            return ExitCode.failure
        }
    }

    /// The fix of a privilege the server refused (SQLSTATE 42501), as a hint line; empty for other errors.
    static func privilegeHint(_ error: PostgresError, _ db: PostgresConnection) -> String {
        error.sqlState == "42501" ? "\n    hint: " + Grants.fix(role: db.option("user")) : ""
    }

    /// `mqtt://HOST:PORT` or `mqtts://…`, or a usage error.
    /// One broker, or the nodes of a clustered one separated by commas (each checked; none may be empty).
    static func brokers(_ text: String, command: CommandSpec) -> [BrokerAddress]? {
        var brokers: [BrokerAddress] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = part.trimmed
            guard let broker = BrokerAddress.parse(item) else {
                printError(UsageError(command: command, message: "'\(item)' is not a broker address like mqtt://HOST:PORT"
                                      + (text.contains(",") ? " (in --broker '\(text)')" : "")).text)
                return nil
            }
            brokers.append(broker)
        }
        return brokers
    }
}
