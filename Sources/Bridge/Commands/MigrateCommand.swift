import ParkWiseCLI
import Postgres

enum MigrateCommand {
    static let spec = CommandSpec(
        name: "migrate", abstract: "Prepare the backend's database for sensor data (idempotent).",
        discussion: """
        Adds 'sensor' to spots.source and creates the bridge's own tables (sensor_devices,
        sensor_events, sensor_spots, sensor_levels, sensor_gaps, sensor_faults, sensor_unknown_spots),
        numbered in sensor_schema_migrations. Each step runs once; a run's steps share one
        transaction (an error keeps none of them). Running it again changes nothing. The backend's tables and data are not otherwise touched.
        """,
        options: [Connections.databaseOption])

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
            return ExitCode.success
        } catch where error.sqlState == "55P03" {
            printError("""
                error: migration gave up after waiting \(Migrations.lockWait) for a table lock: another session's \
                transaction holds one of the tables it changes; nothing was changed
                    hint: look for long transactions (SELECT pid, state, xact_start, query FROM pg_stat_activity \
                WHERE xact_start < now() - interval '5 seconds'), then run migrate again
                """)
            return ExitCode.failure
        } catch {
            printError("error: migration failed, nothing was changed: \(error)")
            return ExitCode.failure
        }
    }
}
