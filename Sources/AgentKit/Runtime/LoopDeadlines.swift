/// The event loop's own deadlines, CLOCK_MONOTONIC nanoseconds (nil: not armed; 0: at the next idle moment). The loop
/// sleeps until the earliest of them and the garage's timer; with nothing armed, nothing wakes it.
struct LoopDeadlines {
    /// Feed the systemd watchdog (half its WatchdogSec; never without one).
    var watchdog: Int64?
    /// Read the clock again while NTP has not set it (1 s doubling to 64 s; never once set).
    var clock: Int64?
    /// Declare the line changes shed since the last `input.shed` (at most one every 5 s).
    var shed: Int64?
    /// The retained status may be published (at most once per `mqtt.status_every`).
    var status: Int64?
    /// Write the outbox's removals no event took along, or try a refused write again.
    var outboxWrite: Int64?
    /// Reserve the next block of seqs, or try a refused reservation or state-file save again.
    var reservation: Int64?
    /// Send the events the broker refused again (2 s doubling to 64 s while it goes on refusing).
    var refusedPublish: Int64?
    /// MQTT 3.1.1: publish the status again, none of it having come back (see `EchoCheck`).
    var echo: Int64?
    /// Publish the retained spot and level states that waited for their interval (see `StatePace`).
    var states: Int64?

    /// The earliest armed deadline, the garage's timer (`timer`) included (no array built: this runs on every input).
    func earliest(with timer: Int64?) -> Int64? {
        earliestOf(earliestOf(earliestOf(timer, watchdog), earliestOf(clock, shed)),
                   earliestOf(earliestOf(status, outboxWrite), earliestOf(earliestOf(reservation, refusedPublish), earliestOf(echo, states))))
    }

    /// One of the housekeeping deadlines (every one but the status's) has passed.
    func housekeepingPassed(_ now: Int64) -> Bool {
        earliestOf(earliestOf(watchdog, clock), earliestOf(earliestOf(shed, outboxWrite),
                                                           earliestOf(earliestOf(reservation, refusedPublish), earliestOf(echo, states))))
            .map { $0 <= now } ?? false
    }
}

/// The earlier of two deadlines (nil: not armed).
func earliestOf(_ x: Int64?, _ y: Int64?) -> Int64? {
    guard let x else { return y }
    guard let y else { return x }
    return min(x, y)
}
