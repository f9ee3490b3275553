import Postgres

/// A statement that speaks for the whole batch, or for the periodic sweep, not for one message's data. A data error
/// it raises (SQLSTATE class 22, 23…) comes from a rule of the database — a CHECK, trigger or deferred constraint
/// someone added to a table the bridge writes — not from a message: no message is skipped for it. In a batch it
/// is a fault (held, retried with backoff); in the sweep, that step is tried again at the next sweep (`Sweep`).
enum WholeStatement: String, Sendable, CustomStringConvertible {
    // The batch's.
    case cursorWrite = "cursor_write"
    case commit
    // The periodic sweep's.
    case onlineDevices = "online_devices"
    case brokerLink = "broker_link"
    case refreshSpots = "refresh_spots"
    case markStale = "mark_stale"
    case checkGaps = "check_gaps"
    case sweepReservations = "sweep_reservations"
    case keepHolds = "keep_holds"
    case expireHolds = "expire_holds"
    case releaseNoShows = "release_no_shows"
    case reassertAll = "reassert_all"
    case snapshot

    var description: String { rawValue }

    /// What it writes.
    var table: String {
        switch self {
        case .cursorWrite, .markStale, .onlineDevices: "sensor_devices"
        case .brokerLink: "sensor_bridges"
        case .commit: "(deferred constraints and triggers)"
        case .refreshSpots, .reassertAll: "spots"
        case .checkGaps: "sensor_gaps"
        case .sweepReservations, .keepHolds, .expireHolds, .releaseNoShows: "reservations"
        case .snapshot: "occupancy_snapshots"
        }
    }

    /// What to do about a data error it raised.
    var hint: String {
        switch self {
        case .commit:
            "a deferred constraint or trigger refuses the batch at commit: find it (pg_trigger, pg_constraint with condeferred) and remove or fix it"
        default:
            "a CHECK, trigger or rule on \(table) refuses the bridge's own write: find it (\\d \(table)) and remove or fix it"
        }
    }

    /// What to do about `error`, raised by this statement.
    func hint(for error: PostgresError) -> String {
        if error.isDataError { return hint }
        if error.sqlState == "57014" { return ApplyError.timeoutHint }
        return "the database refuses \(rawValue) on \(table) for its own reason (a privilege, a missing table, a full disk): see the error"
    }
}

/// A batch or sweep failure: the database's error, and the whole-batch statement that raised it (nil: a statement
/// carrying messages' own values, so a data error there is a message's, found and skipped alone).
struct ApplyError: Error, CustomStringConvertible {
    var error: PostgresError
    var statement: WholeStatement?

    init(_ error: PostgresError, statement: WholeStatement? = nil) {
        self.error = error
        self.statement = statement
    }

    /// A message's data was refused: the only failure that ever skips a message.
    var isMessageData: Bool { statement == nil && error.isDataError }

    /// The statement was cancelled (SQLSTATE 57014): the site's `statement_timeout`, or an operator's cancel.
    var isCancelled: Bool { error.sqlState == "57014" }

    var description: String { error.description }

    static let timeoutHint = "raise statement_timeout for the bridge's role (ALTER ROLE … SET statement_timeout = '30s') or find what makes its writes slow (a trigger, locks, an overloaded server)"
}
