import Delivery
import Glibc
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import ServiceSetup

/// The pipeline: garage events -> stamper -> delivery ledger and outbox -> link, and the states they changed.
extension AgentRuntime {
    // MARK: - Events and states out

    /// Stamps the garage's new events, saves the device state (sequence, lane counts) before any
    /// of them leaves, hands them to the uplink, and publishes the states they changed.
    func flush() {
        checkClock()
        // One wall-clock read for every time this batch stamps or publishes (a nested flush keeps it).
        let outermost = stamper.wallOffset == nil
        if outermost { stamper.wallOffset = clock.wallOffsetNow() }
        defer { if outermost { stamper.wallOffset = nil } }
        stamper.state.settled = inCore { $0.settled }
        // In seq order (device events were stamped when they happened, before this batch's garage events).
        let room = Int(clamping: stamper.state.seqsLeft)
        if events.count > room {
            // No seq left (see `DeviceState.lastSeq`): what the garage does is no event any more, said and counted;
            // its retained states stay true. No seq is reused, none goes past what the next start reads.
            seqsExhausted.occurred(events.count - room, ["last_seq": DeviceState.lastSeq, "hint": Self.seqsExhaustedHint])
            events.removeLast(events.count - room)
        }
        var entries = events.map { stamper.stamp($0, synced: clockSynced) }
        if !deviceEvents.isEmpty {
            entries += deviceEvents
            entries.sort { $0.event.seq < $1.event.seq }
        }
        events.removeAll(keepingCapacity: true)
        deviceEvents.removeAll()
        tracker.note(entries)
        stamper.state.setLaneCounts(inGarage { $0.laneCounts })
        saveState()
        drain()
        for i in entries.indices { Log.debug("event", ["type": entries[i].event.type, "seq": entries[i].event.seq]) }
        if !entries.isEmpty {
            // Stored first (one sync), then handed by the core: an event is handed only once the core knows it stored.
            let (lost, recorded) = session.store(entries, sparing: inCore { $0.sparing(adding: entries.count) })
            deliver(.stored(seqs: entries.map(\.event.seq), dropped: lost, recorded: recorded))
        }
        if session.outboxProblem != announcedProblem {
            if let problem = session.outboxProblem {
                deviceEvent("outbox.fault") { $0.reason = problem }
            } else {
                deviceEvent("outbox.recovered") { _ in }
            }
            announcedProblem = session.outboxProblem
        }
        if !deviceEvents.isEmpty { return flush() }
        publishChangedStates()
        scheduleTimer()
    }


    static let seqsExhaustedHint = "once the backend has every event, stop the agent and move the state directory "
        + "aside (counts restart at 1)"

    func deviceEvent(_ type: String, _ fill: (inout EventPayload) -> Void) {
        guard stamper.state.seqsLeft > 0 else { return seqsExhausted.occurred(1, ["type": type, "hint": Self.seqsExhaustedHint]) }
        deviceEvents.append(stamper.stampDevice(type: type, at: instantNow, synced: clockSynced, fill))
    }

    /// When NTP sets the clock, events still waiting get their true times. The kernel is asked at most once a
    /// second (`force`: now), not once per event.
    func checkClock(force: Bool = false) {
        let now = clock.instant(real: coarseMonotonicNanoseconds())
        if !force, let last = clockReadAt, now - last < .seconds(1) * clock.speed { return }
        clockReadAt = now
        let synced = stamper.clockSynchronized
        defer { clockSynced = synced }
        guard synced && !clockSynced else { return }
        let stamper = self.stamper
        session.correctClock(kernelBoot: stamper.kernelBoot) { ns in
            stamper.wallTime(MonotonicInstant(nanoseconds: ns))
        }
    }

    /// Line changes shed by an overloaded loop never reached the garage (each input still ends at its true level):
    /// said in the log and to the backend, so a burst never changes the garage silently.
    /// A sustained overload is declared once per `shedInterval` at most (events about shedding must not add to
    /// the load): the first batch that sheds at once, later ones summed until the interval has passed.
    func shed(_ batch: LineQueue.Batch) {
        unannouncedShed.count += batch.shed
        unannouncedShed.inputs.formUnion(batch.shedInputs)
        let now = realNow()
        if let last = shedDeclaredAt, now - last < AgentRuntime.shedInterval {
            deadlines.shed = deadlines.shed ?? last + AgentRuntime.shedInterval
        } else {
            declareShed()
        }
    }

    static let shedInterval: Int64 = 5_000_000_000

    func declareShed() {
        deadlines.shed = nil
        let (count, inputs) = unannouncedShed
        guard count > 0 else { return }
        unannouncedShed = (0, [])
        shedDeclaredAt = realNow()
        let names = inputs.sorted().map { config.inputs[$0].ref.description }
        Log.warn("line changes shed, the event loop fell behind", ["shed": count, "inputs": names.joined(separator: ",")])
        deviceEvent("input.shed") {
            $0.dropped = count
            $0.reason = "the agent fell behind: \(count) line changes of \(names.joined(separator: ", ")) were "
                + "shed, each input kept at its last level"
        }
    }

    /// The events a reservation on disk now covers (held while the disk refused one), then the states that changed, at
    /// the pace `StatePace` keeps (one publish per topic and second at most; a state that waits goes as it is then).
    func publishChangedStates() {
        deliver(.sendable(upTo: stamper.state.durable))
        // A spot's state names the newest event it includes (its seq): while events wait for a reservation on disk,
        // the states wait with them, or a crash now would leave the broker a state ahead of every seq sent again.
        statesHeld = stamper.state.awaitingReservation
        guard !statesHeld else {
            deadlines.states = nil   // (they go once the reservation is there, see `run()`)
            return
        }
        let changed = garage.takeChanged()
        guard !changed.spots.isEmpty || !changed.levels.isEmpty || statePace.due != nil else { return }
        let now = realNow()
        for s in changed.spots where statePace.changed(s, now: now) { publishState(s) }
        for l in changed.levels where statePace.changed(spotTopics.count + l, now: now) { publishState(spotTopics.count + l) }
        for topic in statePace.takeDue(now: now) { publishState(topic) }
        deadlines.states = statePace.wake
    }

    /// Every state that waits for its interval, now (a new connection, the stop), unless events wait for a reservation.
    func publishWaitingStates() {
        guard !statesHeld else { return }
        for topic in statePace.takeAll(now: realNow()) { publishState(topic) }
        deadlines.states = nil
    }

    /// A spot's (index below the spots' count) or a level's state as it is now, to its retained topic.
    private func publishState(_ topic: Int) {
        if topic < spotTopics.count {
            let spot = inGarage { $0.spot(topic) }
            session.setRetained(topic: spotTopics[topic], payload: WireJSON.encode(inStamper { $0.spotState(spot) }))
        } else {
            let level = inGarage { $0.level(topic - spotTopics.count) }
            session.setRetained(topic: levelTopics[topic - spotTopics.count], payload: WireJSON.encode(inStamper { $0.levelState(level) }))
        }
    }

    /// Arms the garage's next deadline. A timer armed for an earlier instant is kept (its tick finds nothing due and
    /// arms the next): deadlines that move later with every edge cost no timer re-arm per edge.
    func scheduleTimer() {
        let due = inGarage { $0.nextDeadline }
        guard let due else { return }
        if let armed = timer?.due, armed <= due { return }
        timer = (due, clock.real(at: due))
    }
}
