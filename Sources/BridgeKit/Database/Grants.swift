import Postgres

/// What the bridge's own database role needs, and nothing more (deploy/backend/README.md "The bridge's database
/// role" lists the same GRANTs). Granted by `parkwise-bridge migrate --grant ROLE`, run as the tables' owner.
enum Grants {
    /// Table privileges, the statements' order.
    static let tables: [(privileges: [String], tables: [String])] = [
        (["SELECT", "UPDATE"], ["spots", "reservations"]),
        (["SELECT"], ["levels", "sensor_schema_migrations"]),
        // The snapshot's INSERT … RETURNING reads the rows it wrote.
        (["SELECT", "INSERT"], ["occupancy_snapshots"]),
        (["INSERT"], ["telemetry_events"]),
        (["SELECT", "INSERT", "UPDATE", "DELETE"], ["sensor_devices", "sensor_events", "sensor_spots", "sensor_levels",
                                                  "sensor_gaps", "sensor_faults", "sensor_unknown_spots", "sensor_arrivals",
                                                  "sensor_device_outages", "sensor_no_shows", "sensor_spot_owners",
                                                  "sensor_refused_spots", "sensor_bridges"]),
    ]

    /// Every sequence behind a column (bigserial, identity) of a table the bridge inserts into, qualified, in the
    /// order of `tables` and their columns: an insert draws its id from it, which needs USAGE.
    /// (Materialized: `s IS NOT NULL` pushed down into the scan of pg_attribute would call pg_get_serial_sequence on
    /// every column of the database, pg_toast's too, which a role that is not a superuser may not read: "permission
    /// denied for schema pg_toast", once the list of tables made PostgreSQL plan a hash join.)
    static let sequencesQuery = """
        WITH c AS MATERIALIZED (
          SELECT t.ord, a.attnum, pg_get_serial_sequence(a.attrelid::regclass::text, a.attname) AS s
          FROM unnest($1::text[]) WITH ORDINALITY AS t(name, ord)
          JOIN pg_attribute a ON a.attrelid = to_regclass(t.name) AND a.attnum > 0 AND NOT a.attisdropped)
        SELECT s FROM c WHERE s IS NOT NULL ORDER BY ord, attnum
        """

    /// What a log line or an error says to do when the server refuses `role` a privilege (SQLSTATE 42501).
    static func fix(role: String?) -> String {
        let role = role ?? "ROLE"
        return "role \(role) lacks a privilege the bridge needs: as the owner of the backend's tables run "
            + "parkwise-bridge migrate --grant \(role) (deploy/backend/README.md)"
    }

    /// Grants `role` what the bridge needs, in one transaction; returns the statements run.
    static func grant(_ db: PostgresConnection, to role: String) throws(PostgresError) -> [String] {
        try db.transaction { db throws(PostgresError) in
            let name = try db.query("SELECT quote_ident($1)", [role]).first?[0] ?? role
            var statements = tables.map { "GRANT \($0.privileges.joined(separator: ", ")) ON \($0.tables.joined(separator: ", ")) TO \(name)" }
            let inserted = tables.filter { $0.privileges.contains("INSERT") }.flatMap(\.tables)
            let sequences = try db.query(sequencesQuery, [textArray(inserted)]).rows.compactMap { $0[0] }
            if !sequences.isEmpty {
                statements.append("GRANT USAGE ON SEQUENCE \(sequences.joined(separator: ", ")) TO \(name)")
            }
            for statement in statements { try db.query(statement) }
            return statements
        }
    }
}
