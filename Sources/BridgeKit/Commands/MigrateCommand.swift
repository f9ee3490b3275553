import ParkWiseCLI
import ParkWiseLog
import Postgres

enum MigrateCommand {
    static let spec = CommandSpec(
        name: "migrate", abstract: "Prepare the backend's database for sensor data (idempotent).",
        discussion: """
        Adds 'sensor' to spots.source and creates the bridge's own tables (sensor_devices,
        sensor_events, sensor_spots, sensor_levels, sensor_gaps, sensor_faults, sensor_unknown_spots,
        sensor_arrivals, sensor_device_outages, sensor_no_shows), numbered in sensor_schema_migrations. Each step runs once; a run's steps share one
        transaction (an error keeps none of them). Running it again changes nothing. The backend's
        tables and data are not otherwise touched. Run it as the owner of the backend's tables.
        --grant ROLE then grants the bridge's own role exactly what `run` needs (tables, and the
        sequences behind their ids); give it again after each upgrade.
        """,
        options: [
            Connections.databaseOption,
            .init(name: "grant", value: "role", help: "Then grant this role (the bridge's own, e.g. parkwise_bridge) what `run` needs."),
        ])

    static func run(_ args: ParsedArguments) -> Int32 {
        let (db, url): (PostgresConnection, String)
        switch Connections.database(args, command: spec) {
        case .failed(let code): return code
        case .ok(let connection, let text): (db, url) = (connection, text)
        }
        if let code = Connections.checkSchema(db, url: url, needVersion: nil) { return code }
        do {
            let applied = try Migrations.migrate(db)
            if applied.isEmpty {
                // A newer bridge may have migrated further: the database's own version, not this bridge's.
                let current = (try? Migrations.currentVersion(db)) ?? Migrations.latest
                let newer = current > Migrations.latest ? " (newer than this bridge's \(Migrations.latest))" : ""
                say("\(url): already at bridge schema version \(current)\(newer), nothing to do")
            } else {
                for step in applied { say("\(url): applied \(step.version): \(step.name)") }
                say("\(url): now at bridge schema version \(Migrations.latest)")
            }
        } catch {
            return failed(error, db: db)
        }
        guard let role = args.option("grant") else { return ExitCode.success }
        do {
            for statement in try Grants.grant(db, to: role) { say("\(url): \(statement)") }
            return ExitCode.success
        } catch {
            let hint = error.sqlState == "42704" ? "create the role first: CREATE ROLE \(role) LOGIN PASSWORD '…'"
                : "run it as the owner of the backend's tables"
            printError("error: cannot grant \(role) the bridge's privileges (the migration is kept): \(error)\n    hint: \(hint)")
            return ExitCode.failure
        }
    }

    /// `run --migrate`: brings a database behind this bridge's schema up to it (nil: done, or nothing to do).
    static func upgrade(_ db: PostgresConnection, url: String) -> Int32? {
        let current: Int
        do { current = try Migrations.currentVersion(db) } catch {
            printError("error: cannot read the database schema: \(error)" + Connections.privilegeHint(error, db))
            return ExitCode.failure
        }
        guard current < Migrations.latest else { return nil }
        do {
            let applied = try Migrations.migrate(db)
            Log.info("bridge schema migrated", ["database": url, "from": current, "to": Migrations.latest,
                                                "steps": applied.map { String($0.version) }.joined(separator: ",")])
            return nil
        } catch {
            return failed(error, db: db)
        }
    }

    /// A migration that failed (nothing was changed), said with its fix; the exit code: 78 when this role may not
    /// migrate (a deployment to fix), else 1 (a lock or the database's fault: trying again later helps).
    private static func failed(_ error: PostgresError, db: PostgresConnection) -> Int32 {
        switch error.sqlState {
        case "55P03":
            printError("""
                error: migration gave up after waiting \(Migrations.lockWait) for a table lock: another session's \
                transaction holds one of the tables it changes; nothing was changed
                    hint: look for long transactions (SELECT pid, state, xact_start, query FROM pg_stat_activity \
                WHERE xact_start < now() - interval '5 seconds'), then run migrate again
                """)
            return ExitCode.failure
        case "42501":
            let role = db.option("user") ?? "ROLE"
            printError("""
                error: role \(role) may not migrate the database to bridge schema version \(Migrations.latest), \
                nothing was changed: \(error)
                    hint: as the owner of the backend's tables run: parkwise-bridge migrate --grant \(role) \
                (deploy/backend/README.md, "Upgrade the bridge")
                """)
            return ExitCode.config
        default:
            printError("error: migration failed, nothing was changed: \(error)")
            return ExitCode.failure
        }
    }
}
