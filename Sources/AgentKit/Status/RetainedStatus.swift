import ParkWiseContract

/// When the retained `status` is republished: only when its facts changed (never for the uptime
/// alone), at most once per `every`, and only while connected (every connection publishes it
/// anyway). A change of health a backend must know at once — a storage fault appearing or ending, the clock's
/// state, a device id conflict appearing or ending, the outbox emptied after a published backlog (the fleet views
/// showed a delivered backlog for a minute after each reconnect) — goes out at once, whatever the interval. An outbox
/// that fills waits its turn: each event fills it for a moment. No timer runs unless a change waits for its turn.
struct RetainedStatusSchedule {
    let every: Duration
    /// The facts last published (`everPublished`), kept unwrapped: this is compared after every input, and an
    /// optional's comparison copied both sides (every string retained and released).
    private var published = StatusPayload.Health(outboxDepth: 0, clock: "", faultedInputs: 0, reconnects: 0)
    private var everPublished = false
    private var publishedAt: Int64 = .min
    /// A wake-up is armed for a change that came too soon after the last publish.
    private(set) var armed = false

    init(every: Duration) {
        self.every = every
    }

    enum Decision: Equatable { case nothing, publishNow, wake(after: Duration) }

    /// What to do about the facts now; `now` in real monotonic nanoseconds (the interval is real time, even in a
    /// fast simulation), read only when the facts changed.
    mutating func decide(_ health: StatusPayload.Health, connected: Bool, now readNow: () -> Int64) -> Decision {
        guard connected, !everPublished || health != published else { return .nothing }
        if everPublished, health.storageFault != published.storageFault || health.clock != published.clock
            || (health.idConflict == nil) != (published.idConflict == nil)
            || (health.publishRefused == nil) != (published.publishRefused == nil)
            || (health.outboxDepth == 0 && published.outboxDepth > 0) {
            return .publishNow   // an armed wake-up then finds nothing changed
        }
        guard !armed else { return .nothing }
        let now = readNow()
        let interval = every.components.seconds * 1_000_000_000 + every.components.attoseconds / 1_000_000_000
        let due = publishedAt == .min ? now : publishedAt + interval
        guard now < due else { return .publishNow }
        armed = true
        return .wake(after: .nanoseconds(due - now))
    }

    /// The armed wake-up has come.
    mutating func woke() {
        armed = false
    }

    mutating func didPublish(_ health: StatusPayload.Health, at now: Int64) {
        published = health
        everPublished = true
        publishedAt = now
    }
}
