import Glibc
import ParkWiseCLI
import Delivery
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import Synchronization
import ServiceSetup
import MQTT
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
        var readOnly: ServiceSetupError?
    }

    let config: AgentConfig
    let options: Options
    let clock: AgentClock
    let source: LineSource
    var garage: Garage
    var stamper: EventStamper
    let topics: Topics
    /// Each spot's and level's retained state topic, by index (built once, not per publish).
    let spotTopics: [String]
    let levelTopics: [String]
    let session: UplinkSession
    /// The delivery promise and the event window: what is pending, handed, in flight, declared and announced, and
    /// what to do about it (see `DeliveryCore`; its effects are carried out by `drain()`).
    var core: DeliveryCore
    /// The announcement under way (kept in the state file until the broker acknowledges it).
    /// (The state file takes it where it changes, not compared on every save: an absent one copied 400 bytes too.)
    var announcement: OutboxEntry? { didSet { stamper.state.setAnnouncement(announcement) } }
    /// An MQTT 3.1.1 connection whose broker has not returned this device's status yet (see `EchoCheck`).
    var echo: EchoCheck?
    let link: MQTTLink
    let inbox = Inbox()
    var events: [GarageEvent] = []
    /// The garage's next deadline (its time) and when that is in real monotonic nanoseconds.
    var timer: (due: MonotonicInstant, real: Int64)?
    var clockSynced = false
    /// When the clock's sync state was last read (it is read at most once a second, not once per event).
    var clockReadAt: MonotonicInstant?
    /// The loop's own deadlines (watchdog, clock, shed, status, outbox write, reservation): real monotonic nanoseconds.
    var deadlines = LoopDeadlines()
    /// At most one retained state per spot or level and second (spots' indices first, then the levels').
    var statePace: StatePace
    /// The wait before the clock is read again while NTP has not set it.
    var clockWait: Duration = .seconds(1)
    let lineQueue: LineQueue
    var tracker: StatusTracker
    var statusSchedule: RetainedStatusSchedule
    let statusInbox = StatusInbox()
    /// Commands taken from the broker and not answered yet.
    var commands = CommandDesk()
    /// CLOCK_MONOTONIC as read for the input at hand: the clock is read at most once per input, and only when
    /// something needs it (see `realNow()`).
    var inputReal: Int64?
    /// When the hosted lines were last looked at after a deadline had passed (CLOCK_MONOTONIC nanoseconds).
    var lastEdgeLook: Int64 = .min
    /// The descriptors the loop watches besides its inbox: the hosted lines and broker socket (kept between waits).
    var watching: [pollfd] = []

    /// Real monotonic nanoseconds now: read once per input, then the same instant for everything the input does.
    func realNow() -> Int64 {
        if let inputReal { return inputReal }
        let now = monotonicNanoseconds()
        inputReal = now
        return now
    }

    /// The garage's time now (the instant `realNow()` read).
    var instantNow: MonotonicInstant { clock.instant(real: realNow()) }

    init(config: AgentConfig, source: LineSource, clock: AgentClock, credentials: Credentials?,
         options: Options) throws(DeviceStateError) {
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
        statePace = StatePace(topics: config.spots.count + config.levels.count, every: StatePace.interval, slack: StatePace.slack)
        lineQueue = LineQueue(bound: options.lineQueueBound) { [inbox] in inbox.post(.lines) }
        let boot = stamper.state.boot
        let offline = LinkSettings.Will(topic: topics.status) { connection in
            WireJSON.encode(StatusPayload(state: "offline", boot: boot, connection: connection))
        }
        var settings = LinkSettings(
            brokers: config.mqtt.brokers.map { .init(host: $0.host, port: $0.port, tls: $0.tls) },
            clientID: "parkwise-\(config.site)-\(config.device)",
            keepaliveSeconds: Int(config.mqtt.keepalive.components.seconds),
            will: offline, username: credentials?.username, password: credentials?.password,
            subscriptions: [topics.commands])
        settings.tls = config.mqtt.tls.map { ($0.ca, $0.cert, $0.key) }
        settings.protocolVersion = Int32(config.mqtt.protocolVersion)
        settings.fallsBackTo311 = config.mqtt.fallsBackTo311
        settings.maximumIncoming = CommandHandler.payloadLimit
        settings.echoTopic = topics.status
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
            throw DeviceStateError(code: .newerFormat, message: error.message)
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
        core = DeliveryCore(start: disk, window: UplinkSession.window, capacity: outbox.capacity)
        for range in core.ledger.newlyDeclared {
            Log.warn("seqs of the last run unaccounted for, declared dropped", ["first_seq": range.lowerBound, "last_seq": range.upperBound])
        }
        session = UplinkSession(link: link, topics: topics, outbox: outbox, birth: birth)
        // What the start found lost is on disk before anything else happens: the outbox may already have moved a
        // damaged file aside, and a power cut now must not take the only record of those seqs with it.
        announcement = stamper.state.announcement
        drain()
        stamper.state.save()
        // Connecting (name lookup, TCP, TLS, CONNACK) overlaps the rest of the start: `boot` is on disk by now, and
        // the link's events wait in the inbox until the loop runs.
        link.start()
    }

    /// Outbox trouble found while opening it, announced as fault events once running.
    var startProblems: [String]
    /// The outbox could not be opened at start (events in memory only, all run): for the status.
    var outboxUnusable: String?
    /// Why the state directory was read-only at start, and the fix (see `RunCommand.readOnlyDirectory`): said with the
    /// storage fault until the disk takes a write.
    var readOnlyAtStart: ServiceSetupError?
    /// The outbox problem last announced.
    var announcedProblem: String?

    /// A stop request: a flag the event loop reads before each input, so it never waits behind a backlog of
    /// queued inputs (each batch of line changes costs a disk sync).
    let stopRequested = Atomic<Bool>(false)

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
            // The simulated garage starts empty: the lane counts of levels its lanes count are known from the first
            // minute (a level no lane enters or leaves has none: its spots alone say how full it is).
            for level in config.levels where config.lanes.contains(where: { $0.from == level.id || $0.to == level.id }) {
                _ = garage.calibrate(level: level.id, count: 0)
            }
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
                if let due = deadlines.refusedPublish, due <= realNow() { deliver(.time) }
                if let due = deadlines.echo, due <= realNow() { noEcho() }
                if let due = deadlines.states, due <= realNow() { publishChangedStates() }
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
                // The session says what the event means for delivery (a connection, the broker's answer to an event):
                // the core decides what follows (a refused event is kept and sent again after a wait doubling up to
                // 64 s, never in a loop).
                if let input = session.handle(event) {
                    if case .connected(_, let number, false) = event {
                        // MQTT 3.1.1: the core hears of the connection once the broker returns this device's status.
                        echo = EchoCheck(connection: number, boot: stamper.state.boot, now: realNow())
                    } else {
                        if case .disconnected = input { echo = nil }
                        deliver(input)
                    }
                }
                switch event {
                case .message(let topic, let payload, _, _) where topic == topics.status: echoed(payload)
                case .message(let topic, let payload, let retained, _): command(topic: topic, payload: payload, retained: retained)
                case .oversized(let topic, let bytes, let retained): command(topic: topic, payload: [], retained: retained, oversized: bytes)
                case .contested, .refused: break   // in the status (`noteForStatus`); the core keeps refused events
                case .disconnected: break   // waiting commands wait for the next connection, to be answered there
                case .connected:
                    publishWaitingStates()   // (the birth sent the latest states published; these are newer)
                    answerWaitingCommands()
                case .acknowledged:
                    answerWaitingCommands()
                    // While the outbox cannot write, the sequence ledger (which can) keeps how far the broker has
                    // everything: the events it acknowledged exist nowhere else on disk.
                    if session.outboxProblem != nil { stamper.state.recordSettled(core.settled) }
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
            // States that waited for their interval go with this wake-up once it has passed (see `StatePace`).
            if let due = statePace.due, due <= coarseMonotonicNanoseconds() { publishChangedStates() }
            if case .statusDue = input { refreshStatus(woken: true) } else { refreshStatus(woken: false) }
            scheduleOutboxWrite()
            // What waited for a reservation on disk goes out once one is there (a save can make it, not only a retry).
            if stamper.state.durable > inCore({ $0.sendableUpTo }) || (statesHeld && !stamper.state.awaitingReservation) {
                publishChangedStates()
            }
            // The next block of seqs, reserved once the inbox is empty (a deadline that has passed counts only then),
            // also while a retry of a failed state-file save waits (the reservation saves the file too). A reservation
            // the disk refused, and a failed save of the state file (its drops, lane counts), are tried again after a
            // wait doubling up to 64 s, never in a loop; once nothing is refused a pending retry gives way.
            // The outbox writes again: what it gave up while it could not is on disk, and may be announced.
            if session.outboxProblem == nil && inCore({ $0.waitsForOutbox }) { deliver(.outboxWrites) }
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
            drain()   // (what a save above decided)
            deadlines.refusedPublish = inCore { $0.nextDeadline }
            deadlines.echo = echo?.due
        }
    }


    /// Events about the device itself, sent with the next flush.
    var deviceEvents: [OutboxEntry] = []
    /// Events not stamped once the seqs are used up: one log line per streak (it never ends: only moving the state
    /// directory aside starts the count again).
    var seqsExhausted = LogStreak(.error, "sequence numbers used up, events not stamped (retained states still published)",
                                  ended: "")
    var unannouncedShed: (count: Int, inputs: Set<Int>) = (0, [])
    var shedDeclaredAt: Int64?
    /// State changes not published because their events wait for a reservation on disk.
    var statesHeld = false
    /// How long after a refused reservation it is tried again.
    var reservationRetryWait = AgentRuntime.outboxWriteWait
    var outboxWriteWait = AgentRuntime.outboxWriteWait
}
