import ParkWiseCLI
import Postgres

enum MigrateCommand {
    static let spec = CommandSpec(
        name: "migrate", abstract: "Prepare the backend's database for sensor data (idempotent).",
        discussion: """
        Adds 'sensor' to spots.source and creates the bridge's own tables (sensor_devices,
        sensor_events, sensor_spots, sensor_levels, sensor_gaps, sensor_faults, sensor_unknown_spots),
        numbered in sensor_schema_migrations. Each step runs once, in one transaction; running it
        again changes nothing. The backend's tables and data are not otherwise touched.
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
                say("\(url): already at bridge schema version \(Migrations.latest), nothing to do")
            } else {
                for step in applied { say("\(url): applied \(step.version): \(step.name)") }
                say("\(url): now at bridge schema version \(Migrations.latest)")
            }
            return ExitCode.success
        } catch {
            printError("error: migration failed, nothing of the failed step was kept: \(error)")
            return ExitCode.failure
        }
    }
}
