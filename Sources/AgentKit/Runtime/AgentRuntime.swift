import Glibc
import ParkWiseCLI
import Delivery
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import Synchronization
import ServiceSetup
import Uplink

/// The composition of one running agent: line source -> garage -> stamper -> uplink session.
/// Everything runs on one event loop, on the thread that calls `run()` (the process's main thread, outside Swift
/// concurrency: it waits for fsync on every batch it stores), fed through an `Inbox`: the garage needs no locks
/// and events keep the order in which lines changed. Timers are deadlines the loop sleeps until, not threads or
/// tasks: with nothing happening and nothing due, the loop does not wake at all.
///
/// Sendable by contract: everything but `flags`, `inbox` and `lineQueue` (which are thread-safe) is touched by
/// the loop's thread only; other threads call `requestStop()` and post into the inbox.
final class AgentRuntime: @unchecked Sendable {
    struct Options {
        var configHash: String?
        /// The status `mode` (nil: live sensors).
        var mode: String?
        /// How long a graceful stop waits for the broker to acknowledge what is in flight.
        var stopGrace: Duration = .seconds(3)
        /// systemd readiness and watchdog (does nothing outside a `Type=notify` unit).
        var service = ServiceNotifier(environment: [:])
        /// Line changes waiting for the event loop, at most (beyond that they are shed, see `LineQueue`).
        var lineQueueBound = 4096
        /// The outbox directory refused its first write with EROFS (why, and the fix): the storage fault says it.
        var readOnly: Credentials.Problem?
    }

    private let config: AgentConfig
    private let options: Options
    private let clock: AgentClock
    private let source: LineSource
    private var garage: Garage
    private var stamper: EventStamper
    private let topics: Topics
    /// Each spot's and level's retained state topic, by index (built once, not per publish).
    private let spotTopics: [String]
    private let levelTopics: [String]
    private let session: UplinkSession
    /// The delivery promise: what is pending, handed, declared and announced (see `DeliveryLedger`).
    private var delivery: DeliveryLedger
    /// The announcement under way (kept in the state file until the broker acknowledges it).
    private var announcement: OutboxEntry?
    /// An announcement's seq whose floor the outbox's disk refused: written again before the announcement goes out.
    private var floorWanted: UInt64?
    private let link: MQTTLink
    private let inbox = Inbox()
    private var events: [GarageEvent] = []
    /// The garage's next deadline (its time) and when that is in real monotonic nanoseconds.
    private var timer: (due: MonotonicInstant, real: Int64)?
    private var clockSynced = false
    /// When the clock's sync state was last read (it is read at most once a second, not once per event).
    private var clockReadAt: MonotonicInstant?
    /// The loop's own deadlines (watchdog, clock, shed, status, outbox write, reservation): real monotonic nanoseconds.
    private var deadlines = LoopDeadlines()
    /// The wait before the clock is read again while NTP has not set it.
    private var clockWait: Duration = .seconds(1)
    private let lineQueue: LineQueue
    private var tracker: StatusTracker
    private var statusSchedule: RetainedStatusSchedule
    private let statusInbox = StatusInbox()
    /// Commands taken from the broker and not answered yet.
    private var commands = CommandDesk()
    /// CLOCK_MONOTONIC as read for the input at hand: the clock is read at most once per input, and only when
    /// something needs it (see `realNow()`).
    private var inputReal: Int64?
    /// When the hosted lines were last looked at after a deadline had passed (CLOCK_MONOTONIC nanoseconds).
    private var lastEdgeLook: Int64 = .min
    /// The descriptors the loop watches besides its inbox: the hosted lines and broker socket (kept between waits).
    private var watching: [pollfd] = []

    /// Real monotonic nanoseconds now: read once per input, then the same instant for everything the input does.
    private func realNow() -> Int64 {
        if let inputReal { return inputReal }
        let now = monotonicNanoseconds()
        inputReal = now
        return now
    }

    /// The garage's time now (the instant `realNow()` read).
    private var instantNow: MonotonicInstant { clock.instant(real: realNow()) }

    init(config: AgentConfig, source: LineSource, clock: AgentClock, credentials: Credentials?,
         options: Options) throws(DeviceState.Refused) {
        self.config = config
        self.options = options
        readOnlyAtStart = options.readOnly
        self.clock = clock
        self.source = source
        garage = Garage(config: config)
        tracker = StatusTracker(initial: source.initialLevels(count: config.inputs.count), at: clock.now())
        statusSchedule = RetainedStatusSchedule(every: config.mqtt.statusEvery)
        stamper = EventStamper(state: try DeviceState(directory: config.outbox.path), clock: clock,
                               kernelBoot: EventStamper.readKernelBoot())
        topics = Topics(site: config.site, device: config.device)
        spotTopics = config.spots.map { [topics] in topics.spot($0.id) }
        levelTopics = config.levels.map { [topics] in topics.level($0.id) }
        lineQueue = LineQueue(bound: options.lineQueueBound) { [inbox] in inbox.post(.lines) }
        let offline = WireJSON.encode(StatusPayload(state: "offline", boot: stamper.state.boot))
        var settings = LinkSettings(
            brokers: config.mqtt.brokers.map { .init(host: $0.host, port: $0.port, tls: $0.tls) },
            clientID: "parkwise-\(config.site)-\(config.device)",
            keepaliveSeconds: Int(config.mqtt.keepalive.components.seconds),
            will: (topics.status, offline), username: credentials?.username, password: credentials?.password,
            subscriptions: [topics.commands])
        settings.tls = config.mqtt.tls.map { ($0.ca, $0.cert, $0.key) }
        settings.protocolVersion = Int32(config.mqtt.protocolVersion)
        // Hosted: once connected, the broker's socket is read and written by this loop's thread (`nextInput`).
        link = MQTTLink(settings: settings, hosted: true,
                        emitAll: { [inbox] events in inbox.post(contentsOf: events.lazy.map { .uplink($0) }) })
        let birth = StatusPayload(state: "online", version: AgentVersion.current, configHash: options.configHash,
                                  boot: stamper.state.boot, since: stamper.wallTime(clock.now()), mode: options.mode)
        let outbox: any Outbox
        var disk = DeliveryLedger.StartContents()
        disk.settled = stamper.state.previousRun?.settled ?? 0
        disk.stateLost = stamper.state.stateLost
        disk.stateDeclared = stamper.state.declared
        disk.announcement = stamper.state.announcement.map {
            let first = $0.event.firstSeq ?? $0.event.seq, last = $0.event.lastSeq ?? $0.event.seq
            return ($0.event.seq, first...last, exact: UInt64($0.event.dropped ?? 0) == last - first + 1)
        }
        do {
            let (durable, problems) = try DurableOutbox.open(directory: config.outbox.path, capacity: config.outbox.capacity,
                                                             eventsKept: ConfigDefaults.outboxCapacityLimit)
            outbox = durable
            for problem in problems { Log.warn("outbox repaired at start", ["problem": problem]) }
            startProblems = problems.filter { $0.contains("damaged") }
            var held = DeliveryLedger.StartContents.Outbox()
            held.pending = durable.pending.map(\.event.seq)
            held.acknowledged = durable.acknowledgedAtOpen
            held.dropRecords = durable.lostAtOpen
            held.highest = durable.highestSeq
            disk.outbox = held
        } catch where error.code == .newerFormat {
            // (Checked before anything was written; this is a newer record further in than the first.)
            throw DeviceState.Refused(code: .newerFormat, message: error.message)
        } catch {
            Log.error("outbox unusable, events kept in memory only", ["dir": config.outbox.path, "error": error.message])
            outbox = MemoryOutbox(capacity: config.outbox.capacity)
            startProblems = [error.message]
            outboxUnusable = "outbox unusable: \(error.message)"
        }
        try stamper.state.atLeast(seq: disk.outbox?.highest ?? 0, from: config.outbox.path + "/outbox.log")
        disk.top = stamper.state.seq
        // Whatever the outbox lost, and whatever seqs the last run may have used that nothing accounts for (a crash, a
        // lost file), is declared: a gap in seq is never silent, and a declared seq is never one that may arrive.
        delivery = DeliveryLedger(start: disk)
        for range in delivery.newlyDeclared {
            Log.warn("seqs of the last run unaccounted for, declared dropped", ["first_seq": range.lowerBound, "last_seq": range.upperBound])
        }
        session = UplinkSession(link: link, topics: topics, outbox: outbox, birth: birth)
        session.eventHanded = { [unowned self] in delivery.handed($0) }
        session.eventAcknowledged = { [unowned self] in delivery.acknowledged($0) }
        // What the start found lost is on disk before anything else happens: the outbox may already have moved a
        // damaged file aside, and a power cut now must not take the only record of those seqs with it.
        announcement = stamper.state.announcement
        perform(delivery.startActions)
        stamper.state.save()
        // Connecting (name lookup, TCP, TLS, CONNACK) overlaps the rest of the start: `boot` is on disk by now, and
        // the link's events wait in the inbox until the loop runs.
        link.start()
    }

    /// Outbox trouble found while opening it, announced as fault events once running.
    private var startProblems: [String]
    /// The outbox could not be opened at start (events in memory only, all run): for the status.
    private var outboxUnusable: String?
    /// Why the state directory was read-only at start, and the fix (see `RunCommand.readOnlyDirectory`): said with the
    /// storage fault until the disk takes a write.
    private var readOnlyAtStart: Credentials.Problem?
    /// The outbox problem last announced.
    private var announcedProblem: String?

    /// A stop request: a flag the event loop reads before each input, so it never waits behind a backlog of
    /// queued inputs (each batch of line changes costs a disk sync).
    private let stopRequested = Atomic<Bool>(false)

    /// SIGTERM/SIGINT (from any thread): stop gracefully, ahead of whatever inputs are still queued.
    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        inbox.post(.stop)
    }

    /// Runs the event loop on the calling thread until stopped; returns the process exit code.
    func run() -> Int32 {
        let start = clock.now()
        garage.start(initial: source.initialLevels(count: garage.inputCount), at: start)
        if case .simulator = source {
            // The simulated garage starts empty: its lane counts are known from the first minute.
            for level in config.levels { _ = garage.calibrate(level: level.id, count: 0) }
        } else {
            for (level, count) in stamper.state.laneCounts { _ = garage.calibrate(level: level, count: count) }
        }
        for busy in source.busyAtStart {
            // A fault the backend sees at once; the line is asked for again, and the input recovers once it is free.
            Log.error("GPIO line busy, the agent runs without it", ["problem": busy.message])
            garage.inputLost(busy.input, at: start, into: &events)
        }
        clockSynced = stamper.clockSynchronized
        for problem in startProblems { deviceEvent("outbox.fault") { $0.reason = problem } }
        flush()
        publishChangedStates()
        let stopSource = source.start(clock: clock, into: lineQueue, inbox: inbox, hosted: true)
        Log.info("agent running", ["site": config.site, "device": config.device, "lanes": config.lanes.count,
                                   "spots": config.spots.count, "boot": stamper.state.boot])
        scheduleTimer()
        options.service.ready()
        // The watchdog only as often as systemd asks (half its WatchdogSec); no wake-ups at all without one.
        if let every = options.service.watchdogInterval { deadlines.watchdog = monotonicNanoseconds() + every.nanosecondCount }
        if !clockSynced { deadlines.clock = monotonicNanoseconds() + clockWait.nanosecondCount }
        while true {
            statusInbox.answer { statusSnapshot.build() }
            if stopRequested.load(ordering: .acquiring) {
                stopSource()
                return stop(exitCode: ExitCode.success)
            }
            inputReal = nil
            let next = nextInput(until: deadlines.earliest(with: timer?.real))
            inputReal = nil
            guard let input = next ?? due() else { continue }
            switch input {
            case .lines:
                let batch = lineQueue.take()
                tracker.note(batch.changes)
                for change in batch.changes { garage.handle(change, into: &events) }
                if batch.shed > 0 { shed(batch) }
                flush()
            case .tick:
                timer = nil
                garage.advance(to: instantNow, into: &events)
                flush()
            case .housekeeping:
                if let due = deadlines.shed, due <= realNow() {
                    declareShed()
                    flush()
                }
                if let due = deadlines.outboxWrite, due <= realNow() {
                    // Once per deadline, whatever comes of it: a disk that keeps failing is tried again later, less
                    // and less often, never in a loop.
                    deadlines.outboxWrite = nil
                    session.writeOutboxChanges()
                    outboxWriteWait = session.outboxHasUnwrittenChanges
                        ? min(outboxWriteWait * 2, AgentRuntime.outboxRetryLongest) : AgentRuntime.outboxWriteWait
                }
                if let due = deadlines.reservation, due <= realNow() {
                    deadlines.reservation = nil
                    if stamper.state.reservationDue { stamper.state.reserveAhead() } else { saveState() }
                }
                if let due = deadlines.watchdog, let every = options.service.watchdogInterval, due <= realNow() {
                    options.service.alive()   // the watchdog is fed by the event loop itself
                    deadlines.watchdog = realNow() + every.nanosecondCount
                }
                if let due = deadlines.clock, due <= realNow() {
                    // While NTP has not set the clock: look again after 1 s, doubling up to 64 s, so waiting events
                    // get their true times soon after it does; once set, nothing wakes the loop for it.
                    checkClock(force: true)
                    clockWait = min(clockWait * 2, .seconds(64))
                    deadlines.clock = clockSynced ? nil : realNow() + clockWait.nanosecondCount
                }
            case .uplink(let event):
                noteForStatus(event)
                session.handle(event)
                switch event {
                case .message(let topic, let payload, let retained): command(topic: topic, payload: payload, retained: retained)
                case .connected:
                    perform(delivery.linkUp())
                    answerWaitingCommands()
                case .disconnected:
                    delivery.linkDown()   // waiting commands wait for the next connection, to be answered there
                case .acknowledged:
                    answerWaitingCommands()
                    if let seq = session.acknowledgedAnnouncement, announcement?.event.seq == seq {
                        announcement = nil
                        perform(delivery.announcementAcknowledged(seq))
                    }
                    // While the outbox cannot write, the sequence ledger (which can) keeps how far the broker has
                    // everything: the events it acknowledged exist nowhere else on disk.
                    if session.outboxProblem != nil { stamper.state.recordSettled(delivery.settled) }
                }
            case .inputLost(let input, let message):
                Log.error("GPIO input lost", ["input": input.map { config.inputs[$0].ref.description } ?? "all",
                                              "problem": message])
                garage.inputLost(input, at: instantNow, into: &events)
                flush()
                if garage.everyInputLost {
                    // Running on with nothing watched helps nobody: fail, so systemd restarts the agent.
                    Log.error("every GPIO input is lost, stopping so that the service restarts", [:])
                    stopSource()
                    return stop(exitCode: ExitCode.failure)
                }
            case .sourceFinished:
                Log.info("trace finished, agent keeps running until stopped")
            case .stop:
                stopSource()
                return stop(exitCode: ExitCode.success)
            case .statusRequested:
                break   // answered above
            case .statusDue:
                deadlines.status = nil
                statusSchedule.woke()
            }
            if case .statusDue = input { refreshStatus(woken: true) } else { refreshStatus(woken: false) }
            scheduleOutboxWrite()
            // What waited for a reservation on disk goes out once one is there (a save can make it, not only a retry).
            if stamper.state.durable > session.sendableUpTo || (statesHeld && !stamper.state.awaitingReservation) {
                publishChangedStates()
            }
            // The next block of seqs, reserved once the inbox is empty (a deadline that has passed counts only then),
            // also while a retry of a failed state-file save waits (the reservation saves the file too). A reservation
            // the disk refused, and a failed save of the state file (its drops, lane counts), are tried again after a
            // wait doubling up to 64 s, never in a loop; once nothing is refused a pending retry gives way.
            // The outbox writes again: what it gave up while it could not is on disk, and may be announced.
            if session.outboxProblem == nil {
                perform(delivery.outboxRecorded())
                if let seq = floorWanted { perform([.writeFloor(seq)]) }
            }
            // The directory read-only at start took a write: whatever fails later is said for what it is.
            if readOnlyAtStart != nil && stamper.state.isSaved && stamper.state.saveProblem == nil
                && stamper.state.directoryProblem == nil && !stamper.state.awaitingReservation {
                readOnlyAtStart = nil
            }
            if stamper.state.reservationRefused || stamper.state.saveProblem != nil {
                if deadlines.reservation == nil {
                    Log.debug("state directory refused a write, tried again later", ["wait_s": reservationRetryWait.components.seconds])
                    deadlines.reservation = coarseMonotonicNanoseconds() + reservationRetryWait.nanosecondCount
                    reservationRetryWait = min(reservationRetryWait * 2, AgentRuntime.outboxRetryLongest)
                }
            } else {
                reservationRetryWait = AgentRuntime.outboxWriteWait
                if let due = deadlines.reservation, due != 0 { deadlines.reservation = nil }
            }
            if stamper.state.reservationDue && !stamper.state.reservationRefused { deadlines.reservation = 0 }
        }
    }

    /// Acknowledged events' removals wait for the next event's write; when none comes within `outboxWriteWait`,
    /// they are written alone. After a failed write the disk is tried again the same way, the wait doubling up to
    /// `outboxRetryLongest`. A compaction that is due is done at once, but after every input already waiting (a
    /// deadline that has passed only counts once the inbox is empty): never in an event's way. A deadline only while
    /// something waits: nothing wakes an idle loop.
    private func scheduleOutboxWrite() {
        if !session.outboxHasUnwrittenChanges {
            deadlines.outboxWrite = nil
            outboxWriteWait = AgentRuntime.outboxWriteWait
        } else if session.outboxCompactionDue && outboxWriteWait == AgentRuntime.outboxWriteWait {
            deadlines.outboxWrite = 0
        } else if deadlines.outboxWrite == nil {
            deadlines.outboxWrite = coarseMonotonicNanoseconds() + outboxWriteWait.nanosecondCount
        }
    }

    static let outboxWriteWait = Duration.seconds(2)
    static let outboxRetryLongest = Duration.seconds(64)

    /// The next input; nil once `deadline` has passed. While the link's live connection is hosted here, its socket
    /// is watched too and its rounds run on this thread: the PUBACKs and commands they bring come in as inputs,
    /// with no hop between threads (and no lock shared with another thread inside libmosquitto).
    private func nextInput(until deadline: Int64?) -> AgentInput? {
        while true {
            let edges = source.hostedPoll()
            let uplink = link.hostedPoll()
            watching.removeAll(keepingCapacity: true)
            if let edges { watching.append(contentsOf: edges.slots) }
            if let uplink { watching.append(pollfd(fd: uplink.fd, events: uplink.events, revents: 0)) }
            // The lines' and the link's own deadlines (milliseconds) too: no array built for them on every input.
            let until = earliestOf(deadline, earliestOf(edges?.due.map { $0 * 1_000_000 }, uplink?.due.map { $0 * 1_000_000 }))
            switch inbox.wait(until: until, watching: watching) {
            case .input(let input):
                return input
            case .watched(let ready):
                // Edges first: they become the next input (the line queue's nudge), before what the broker sent.
                if let edges, ready.prefix(edges.slots.count).contains(where: { $0.revents != 0 }) {
                    source.serviceHosted(revents: ready.prefix(edges.slots.count).map(\.revents))
                }
                if uplink != nil, let last = ready.last, last.revents != 0 { link.serviceHosted(revents: last.revents) }
            case .deadline:
                // A recheck of the lines or the keepalive, if that was what was due.
                if let edges, edges.due != nil { source.serviceHosted(revents: Array(repeating: 0, count: edges.slots.count)) }
                if uplink?.due != nil { link.serviceHosted(revents: 0) }
                if let deadline, deadline <= monotonicNanoseconds() {
                    // An edge the kernel stamped before the deadline, waiting while the loop was busy (a slow sync),
                    // reaches the garage before the deadline's timer, or a filter would expire on a change that had
                    // already ended. One look after the deadline sees every such edge: once per passed deadline.
                    if let edges, lastEdgeLook < deadline {
                        lastEdgeLook = monotonicNanoseconds()
                        var ready = edges.slots
                        if poll(&ready, nfds_t(ready.count), 0) > 0 && ready.contains(where: { $0.revents != 0 }) {
                            source.serviceHosted(revents: ready.map(\.revents))
                            continue
                        }
                    }
                    return nil
                }
            }
        }
    }

    /// The input a passed deadline stands for (the loop woke for it): the garage's timer, or the watchdog and
    /// the clock. Nil when none has passed yet.
    private func due() -> AgentInput? {
        let now = realNow()
        if let timer, timer.real <= now { return .tick }
        if let status = deadlines.status, status <= now { return .statusDue }
        return deadlines.housekeepingPassed(now) ? .housekeeping : nil
    }

    /// Graceful stop: say offline, give the broker a moment to acknowledge, disconnect cleanly.
    private func stop(exitCode: Int32) -> Int32 {
        Log.info("stopping", ["outbox": session.outboxCount])
        inputReal = nil
        options.service.stopping()
        garage.advance(to: clock.now(), into: &events)
        declareShed()
        flush()
        // flush() arms the garage's next timer; nothing is due any more once stopping.
        timer = nil
        deadlines.status = nil
        if stamper.state.awaitingReservation {   // a last try: the disk may take the reservation now
            stamper.state.reserveAhead()
            publishChangedStates()
        }
        session.sayOffline()
        let giveUp = monotonicNanoseconds() + options.stopGrace.nanosecondCount
        var unread = 0   // line changes still queued: never stamped nor stored, the board's levels say the rest at the next start
        var unanswered = 0   // commands: not answered once stopping
        if session.isConnected {
            waiting: while true {
                guard let input = nextInput(until: giveUp) else {
                    Log.warn("broker did not acknowledge everything before stopping", ["outbox": session.outboxCount])
                    break waiting
                }
                if case .lines = input { unread += lineQueue.take().changes.count }
                if case .uplink(.message) = input { unanswered += 1 }
                statusInbox.answer { statusSnapshot.build() }
                switch input {
                case .uplink(let event):
                    session.handle(event)
                    if !session.isConnected || (session.offlineAcknowledged && session.settled) { break waiting }
                case .lines, .tick, .sourceFinished, .stop, .housekeeping, .inputLost, .statusDue, .statusRequested:
                    continue
                }
            }
        }
        // What the queue still holds (without a broker the loop above never ran; the source is stopped by now).
        let left = lineQueue.take()
        unread += left.changes.count + left.shed
        if unread > 0 { Log.info("line changes queued behind the stop, left unread", ["changes": unread]) }
        // Commands still waiting, unread or turned away: counted, never answered once stopping.
        unanswered += commands.stop(turnedAway: inbox.takeDroppedMessages().dropped)
        while let input = inbox.next(until: 0) { if case .uplink(.message) = input { unanswered += 1 } }
        if unanswered > 0 { Log.info("commands left unanswered at the stop", ["commands": unanswered]) }
        session.writeOutboxChanges()
        let held = session.held
        if let first = held.firstSeq {
            Log.error("events left unsent at the stop, no seq reservation on disk covers them",
                      ["events": held.count, "first_seq": first])
        }
        link.stop()
        stamper.state.settled = delivery.settled
        stamper.state.stoppedCleanly()
        Log.info("stopped", ["outbox": session.outboxCount, "exit": exitCode])
        return exitCode
    }

    // MARK: - Events and states out

    /// Stamps the garage's new events, saves the device state (sequence, lane counts) before any
    /// of them leaves, hands them to the uplink, and publishes the states they changed.
    private func flush() {
        checkClock()
        // One wall-clock read for every time this batch stamps or publishes (a nested flush keeps it).
        let outermost = stamper.wallOffset == nil
        if outermost { stamper.wallOffset = clock.wallOffsetNow() }
        defer { if outermost { stamper.wallOffset = nil } }
        stamper.state.settled = delivery.settled
        // In seq order (device events were stamped when they happened, before this batch's garage events).
        let room = Int(clamping: stamper.state.seqsLeft)
        if events.count > room {
            // No seq left (see `DeviceState.lastSeq`): what the garage does is no event any more, said and counted;
            // its retained states stay true. No seq is reused, none goes past what the next start reads.
            seqsExhausted.occurred(events.count - room, ["last_seq": DeviceState.lastSeq, "hint": Self.seqsExhaustedHint])
            events.removeLast(events.count - room)
        }
        let entries = (events.map { stamper.stamp($0, synced: clockSynced) } + deviceEvents).sorted { $0.event.seq < $1.event.seq }
        events.removeAll(keepingCapacity: true)
        deviceEvents.removeAll()
        tracker.note(entries)
        stamper.state.setLaneCounts(inGarage { $0.laneCounts })
        saveState()
        session.allowSending(upTo: stamper.state.durable)
        for entry in entries { Log.debug("event", ["type": entry.event.type, "seq": entry.event.seq]) }
        let lost = session.accept(entries, sparing: delivery.sparing).map(\.event.seq)
        perform(delivery.accepted(entries.map(\.event.seq), dropped: lost, recorded: session.outboxProblem == nil))
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

    /// Events about the device itself, sent with the next flush.
    private var deviceEvents: [OutboxEntry] = []

    /// Events not stamped once the seqs are used up: one log line per streak (it never ends: only moving the state
    /// directory aside starts the count again).
    private var seqsExhausted = LogStreak(.error, "sequence numbers used up, events not stamped (retained states still published)",
                                          ended: "")
    private static let seqsExhaustedHint = "once the backend has every event, stop the agent and move the state directory "
        + "aside (counts restart at 1)"

    private func deviceEvent(_ type: String, _ fill: (inout EventPayload) -> Void) {
        guard stamper.state.seqsLeft > 0 else { return seqsExhausted.occurred(1, ["type": type, "hint": Self.seqsExhaustedHint]) }
        deviceEvents.append(stamper.stampDevice(type: type, at: instantNow, synced: clockSynced, fill))
    }

    // MARK: - Delivery (the ledger decides, these carry it out)

    /// Carries out what the delivery ledger asks, feeding back what came of it.
    private func perform(_ actions: [DeliveryLedger.Action]) {
        for action in actions {
            switch action {
            case .saveState:
                saveState()
            case .announce(let seqs):
                // Declares the events a full outbox gave up (or a start found unaccounted for), so the backend sees a
                // gap it can explain: one announcement at a time, kept on disk until the broker acknowledges it.
                guard stamper.state.seqsLeft > 0 else { continue }
                let count = Int(clamping: seqs.upperBound - seqs.lowerBound + 1)
                Log.warn("announcing dropped events", ["count": count, "first_seq": seqs.lowerBound, "last_seq": seqs.upperBound])
                tracker.dropsDeclared += count
                let entry = stamper.stampDevice(type: "outbox.dropped", at: instantNow, synced: clockSynced) {
                    $0.dropped = count
                    $0.firstSeq = seqs.lowerBound
                    $0.lastSeq = seqs.upperBound
                }
                announcement = entry
                perform(delivery.announcing(seqs, seq: entry.event.seq))
            case .writeFloor(let seq):
                if session.recordOutboxFloor(seq) {
                    floorWanted = nil
                    perform(delivery.floorWritten(seq))
                } else {
                    floorWanted = seq   // tried again once the outbox writes again
                }
            case .handAnnouncement(let seq):
                guard let announcement, announcement.event.seq == seq else { continue }
                session.allowSending(upTo: stamper.state.durable)
                session.announce(announcement)
            case .releaseDropRecords(let seqs):
                session.outboxDropsAnnounced(seqs)
            case .discardPending(let seqs):
                Log.warn("events already declared dropped by an announcement, not sent", ["events": seqs.count,
                                                                                          "first_seq": seqs.min() ?? 0])
                session.discardLoaded(seqs)
            }
        }
    }

    /// Saves the state file with the ledger's declarations as they are now; once it holds them, the ledger is told.
    private func saveState() {
        stamper.state.setDeclarations(delivery.unannounced, announcement: announcement)
        stamper.state.save()
        if stamper.state.isSaved { perform(delivery.stateSaved()) }
    }

    /// When NTP sets the clock, events still waiting get their true times. The kernel is asked at most once a
    /// second (`force`: now), not once per event.
    private func checkClock(force: Bool = false) {
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
    private func shed(_ batch: LineQueue.Batch) {
        unannouncedShed.count += batch.shed
        unannouncedShed.inputs.formUnion(batch.shedInputs)
        let now = realNow()
        if let last = shedDeclaredAt, now - last < AgentRuntime.shedInterval {
            deadlines.shed = deadlines.shed ?? last + AgentRuntime.shedInterval
        } else {
            declareShed()
        }
    }

    private static let shedInterval: Int64 = 5_000_000_000
    private var unannouncedShed: (count: Int, inputs: Set<Int>) = (0, [])
    private var shedDeclaredAt: Int64?
    /// State changes not published because their events wait for a reservation on disk.
    private var statesHeld = false
    /// How long after a refused reservation it is tried again.
    private var reservationRetryWait = AgentRuntime.outboxWriteWait
    private var outboxWriteWait = AgentRuntime.outboxWriteWait

    private func declareShed() {
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

    /// The events a reservation on disk now covers (held while the disk refused one), then the states that changed.
    private func publishChangedStates() {
        session.allowSending(upTo: stamper.state.durable)
        // A spot's state names the newest event it includes (its seq): while events wait for a reservation on disk,
        // the states wait with them, or a crash now would leave the broker a state ahead of every seq sent again.
        statesHeld = stamper.state.awaitingReservation
        guard !statesHeld else { return }
        let changed = garage.takeChanged()
        for s in changed.spots {
            let spot = inGarage { $0.spot(s) }
            session.setRetained(topic: spotTopics[s], payload: WireJSON.encode(inStamper { $0.spotState(spot) }))
        }
        for l in changed.levels {
            let level = inGarage { $0.level(l) }
            session.setRetained(topic: levelTopics[l], payload: WireJSON.encode(inStamper { $0.levelState(level) }))
        }
    }

    /// Arms the garage's next deadline. A timer armed for an earlier instant is kept (its tick finds nothing due and
    /// arms the next): deadlines that move later with every edge cost no timer re-arm per edge.
    private func scheduleTimer() {
        let due = inGarage { $0.nextDeadline }
        guard let due else { return }
        if let armed = timer?.due, armed <= due { return }
        timer = (due, clock.real(at: due))
    }

    // MARK: - Commands

    /// A command from the broker: answered now, or waiting for room for its reply (`CommandDesk`).
    private func command(topic: String, payload: [UInt8], retained: Bool) {
        guard topic.hasPrefix(topics.prefix + "/cmd/") else { return }
        let (turnedAway, waiting) = inbox.takeDroppedMessages()
        if let now = commands.received((topic, payload, retained), canReply: session.isConnected && session.canReply,
                                       inbox: (turnedAway, waiting)) {
            answer(now)
        }
    }

    /// Commands that waited for room for their replies, in the order they came.
    private func answerWaitingCommands() {
        guard session.isConnected else { return }
        commands.answerWaiting(canReply: { session.canReply }, inbox: { inbox.takeDroppedMessages() }) { answer($0) }
    }

    private func answer(_ command: CommandDesk.Command) {
        let name = String(command.topic.dropFirst(topics.prefix.count + 5))
        let reply = CommandHandler.handle(name: name, payload: command.payload, retained: command.retained, garage: &garage,
                                          status: name == "diag" && !command.retained ? statusSnapshot.build() : nil)
        Log.info("command", ["name": String(name.prefix(40)), "ok": reply.ok])
        session.publishReply(topic: topics.reply, payload: reply.payload)
        if reply.ok && name == "rebirth" { session.rebirth() }
        stamper.state.setLaneCounts(inGarage { $0.laneCounts })
        stamper.state.save()
        publishChangedStates()
    }

    // MARK: - Status (built in Sources/Agent/Status)

    /// For the status socket's thread: the event loop answers before its next input.
    func requestStatus(_ request: StatusRequest) {
        statusInbox.add(request)
        inbox.post(.statusRequested)
    }

    private var statusSnapshot: StatusSnapshot {
        StatusSnapshot(config: config, garage: garage, session: session, stamper: stamper, tracker: tracker,
                       configHash: options.configHash, mode: options.mode, clockSynced: clockSynced,
                       outboxUnusable: outboxUnusable, readOnly: readOnlyAtStart)
    }

    /// Link events for the status; a new connection's birth carries the facts as they are now.
    private func noteForStatus(_ event: UplinkEvent) {
        tracker.note(event, at: instantNow)
        if case .connected = event { publishStatus(statusSnapshot) }
    }

    /// Republishes the retained status when its facts changed, at most once per `mqtt.status_every` (a deadline
    /// the loop sleeps until, not a timer).
    /// The coarse clock is enough to arm the deadline, but once it has come (`woken`) the precise one decides: the
    /// coarse one may not have reached it yet, and would arm it again, already past (a busy loop until its next tick).
    private func refreshStatus(woken: Bool) {
        switch statusSchedule.decide(statusHealth, connected: session.isConnected,
                                     now: woken ? { self.realNow() } : coarseMonotonicNanoseconds) {
        case .nothing:
            break
        case .publishNow:
            publishStatus(statusSnapshot)
        case .wake(let delay):
            deadlines.status = coarseMonotonicNanoseconds() + delay.nanosecondCount
        }
    }

    /// Reads the garage in place: a plain read of a struct a class holds copies it first (retaining each of its
    /// arrays), and these reads come after every input.
    private func inGarage<T>(_ read: (inout Garage) -> T) -> T { read(&garage) }
    /// The stamper and its device state, read in place (the same reason).
    private func inStamper<T>(_ read: (inout EventStamper) -> T) -> T { read(&stamper) }

    /// The retained status's changing facts, read in place: this runs after every input, so no snapshot is built.
    private var statusHealth: StatusPayload.Health {
        StatusPayload.Health(outboxDepth: session.outboxCount,
                             clock: StatusSnapshot.clockState(scaled: clock.isScaled, synced: clockSynced),
                             faultedInputs: inGarage { $0.faultedInputCount }, reconnects: tracker.reconnects,
                             storageFault: inStamper {
                                 StatusSnapshot.storageFault(session, $0.state, outboxUnusable: outboxUnusable, readOnly: readOnlyAtStart)
                             })
    }

    private func publishStatus(_ snapshot: StatusSnapshot) {
        let health = statusHealth
        session.updateStatus(session.birth.with(health, uptimeSeconds: Int(tracker.uptimeSeconds),
                                                outboxOldestAgeSeconds: snapshot.oldestAgeSeconds.map { Int($0) },
                                                at: stamper.wallTime(instantNow)))
        statusSchedule.didPublish(health, at: coarseMonotonicNanoseconds())
    }
}
