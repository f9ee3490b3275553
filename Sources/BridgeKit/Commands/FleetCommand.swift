import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import Postgres

/// Every board of a site at a glance for the control room, from what the bridge keeps in `sensor_devices`: online or
/// offline and since when, and what its last status said (version, boot, outbox, faulted inputs, clock).
enum FleetCommand {
    static let spec = CommandSpec(
        name: "fleet", abstract: "Show every board at a glance: online/offline since when, version, outbox, faults.",
        discussion: """
        Reads the bridge's own table sensor_devices (read only): one line a board, with online or
        OFFLINE and since when, its version and boot, its outbox's depth and oldest event's age, its
        faulted inputs and clock state, as its last status said them (an offline board's are the last
        known). A board that says it is online but from which the bridge has applied nothing for
        --stale is STALE (an idle board publishes its status only when something in it changes, so
        choose --stale longer than the site's quiet hours, or watch OFFLINE, the broker's last will).
        Exit 0 shown (whatever the boards' states), 1 database unreachable, 78 a database the bridge
        has not migrated. A board revoked on the broker host is REVOKED; one whose spot reports the
        bridge refused (the site's register gives those spots to another board) says how many.
        When no bridge is connected to the broker (each writes its link's state in sensor_bridges),
        a first line says so (BROKER LOST, NO BRIDGE RUNNING) and since when: the boards are then as
        of that moment, not offline.
        """,
        options: [
            Connections.databaseOption,
            .init(name: "site", value: "site", help: "Only this site (default: every site)."),
            .init(name: "stale", value: "duration", help: "Online but nothing applied for this long is STALE (default 10m)."),
        ])

    static func run(_ args: ParsedArguments) -> Int32 {
        let staleText = args.option("stale") ?? "10m"
        guard let stale = try? DurationText.read(staleText), stale > .zero else {
            printError(UsageError(command: spec, message: "--stale '\(staleText)' is not a duration like 90s or 10m").text)
            return ExitCode.usage
        }
        let (db, url): (PostgresConnection, String)
        switch Connections.database(args, command: spec) {
        case .failed(let code): return code
        case .ok(let connection, let text): (db, url) = (connection, text)
        }
        if let code = Connections.checkSchema(db, url: url, needVersion: Migrations.latest) { return code }
        let rows: PostgresRows
        do {
            rows = try db.query("""
                SELECT site, device, online, boot,
                  extract(epoch FROM CASE WHEN online THEN online_since ELSE offline_since END)::bigint AS since,
                  extract(epoch FROM heard_at)::bigint AS heard, status::text AS status,
                  extract(epoch FROM now())::bigint AS now, revoked_at IS NOT NULL AS revoked, r.reports,
                  r.example
                FROM sensor_devices d
                LEFT JOIN LATERAL (
                  SELECT sum(reports) AS reports,
                    min(spot_id || coalesce(' (owner ' || split_part(owner, '/', 2) || ')', ' (no owner registered)')) AS example
                  FROM sensor_refused_spots rs WHERE rs.site = d.site AND rs.device = d.device) r ON true
                WHERE $1::text IS NULL OR d.site = $1 ORDER BY d.site, d.device
                """, [args.option("site")])
        } catch {
            printError("error: cannot read sensor_devices: \(error)" + Connections.privilegeHint(error, db))
            return ExitCode.failure
        }
        for line in brokerLines(db) { say(line) }
        let now = rows.rows.first.flatMap { $0[7] }.flatMap { Int64($0) } ?? 0
        let boards = rows.rows.compactMap { row -> FleetBoard? in
            guard let site = row[0], let device = row[1] else { return nil }
            let status = row[6].flatMap { WireJSON.decode(StatusPayload.self, from: Array($0.utf8)) }
            var board = FleetBoard(site: site, device: device, online: row[2] == "t", since: row[4].flatMap { Int64($0) },
                                   heardAt: row[5].flatMap { Int64($0) }, status: status, boot: row[3].flatMap { UInt64($0) })
            board.revoked = row[8] == "t"
            if let reports = row[9].flatMap({ Int64($0) }), let example = row[10] { board.refused = (reports, example) }
            return board
        }
        guard !boards.isEmpty else {
            say("no boards\(args.option("site").map { " of site \($0)" } ?? "") in sensor_devices yet "
                + "(a board appears once the bridge has applied its first status)")
            return ExitCode.success
        }
        let seconds = stale.components.seconds
        for line in FleetTable.lines(boards, now: now, staleAfter: seconds) { say(line) }
        return ExitCode.success
    }

    /// When no bridge is connected to its broker (each bridge writes its link's state to `sensor_bridges`): a line
    /// saying so first, or a broker outage reads as every board gone quiet. A bridge killed (SIGKILL, power) cannot
    /// say it; its last word stays.
    static func brokerLines(_ db: PostgresConnection) -> [String] {
        guard let rows = try? db.query("""
            SELECT client_id, brokers, broker_state, extract(epoch FROM now() - since)::bigint
            FROM sensor_bridges ORDER BY since DESC
            """), !rows.rows.isEmpty, !rows.rows.contains(where: { $0[2] == "connected" }) else { return [] }
        return rows.rows.flatMap { row in
            let (bridge, brokers, ago) = (row[0] ?? "?", row[1] ?? "?", FleetTable.age(row[3].flatMap { Int64($0) } ?? 0))
            return FleetTable.wrap(row[2] == "stopped"
                ? "NO BRIDGE RUNNING: \(bridge) stopped \(ago) ago: nothing applied since, the boards below are as of then"
                : "BROKER LOST: bridge \(bridge) lost \(brokers) \(ago) ago: the boards below are as of then: an OFFLINE may be the stopping broker's will, a STALE its outage",
                indent: "", then: "  ")
        }
    }
}
