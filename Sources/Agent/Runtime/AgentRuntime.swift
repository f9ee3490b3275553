import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ParkWiseLog
import Synchronization
import Uplink

/// The composition of one running agent: line source -> garage -> stamper -> uplink session.
/// Everything runs on one event loop fed by an AsyncStream, so the garage needs no locks and
/// events keep the order in which lines changed. The loop runs on its own thread (`ThreadExecutor`):
/// it waits for fsync on every outbox append.
actor AgentRuntime {
    private nonisolated let executor = ThreadExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    struct Options {
        var configHash: String?
        /// The status `mode` (nil: live sensors).
        var mode: String?
        /// How long a graceful stop waits for the broker to acknowledge what is in flight.
        var stopGrace: Duration = .seconds(3)
        /// systemd readiness and watchdog (does nothing outside a `Type=notify` unit).
        var service = ServiceNotifier(environment: [:])
    }

    private let config: AgentConfig
    private let options: Options
    private let clock: AgentClock
    private let source: LineSource
    private var garage: Garage
    private var stamper: EventStamper
    private let topics: Topics
    private let session: UplinkSession
    private let link: MQTTLink
    private let inputs: AsyncStream<AgentInput>
    private nonisolated let continuation: AsyncStream<AgentInput>.Continuation
    private var events: [GarageEvent] = []
    private var timer: (due: MonotonicInstant, task: Task<Void, Never>)?
    private var clockSynced = false
    private var housekeeping: Task<Void, Never>?
    private var tracker: StatusTracker
    private var statusSchedule: RetainedStatusSchedule
    private var statusTimer: Task<Void, Never>?
    private nonisolated let statusInbox = StatusInbox()

    init(config: AgentConfig, source: LineSource, clock: AgentClock, credentials: Credentials?,
         options: Options) throws(DeviceState.Exhausted) {
        self.config = config
        self.options = options
        self.clock = clock
        self.source = source
        garage = Garage(config: config)
        tracker = StatusTracker(initial: source.initialLevels(count: config.inputs.count), at: clock.now())
        statusSchedule = RetainedStatusSchedule(every: config.mqtt.statusEvery)
        stamper = EventStamper(state: try DeviceState(directory: config.outbox.path), clock: clock,
                               kernelBoot: EventStamper.readKernelBoot())
        topics = Topics(site: config.site, device: config.device)
        (inputs, continuation) = AsyncStream.makeStream(of: AgentInput.self)
        let offline = WireJSON.encode(StatusPayload(state: "offline", boot: stamper.state.boot))
        var settings = LinkSettings(
            brokers: config.mqtt.brokers.map { .init(host: $0.host, port: $0.port, tls: $0.tls) },
            clientID: "parkwise-\(config.site)-\(config.device)",
            keepaliveSeconds: Int(config.mqtt.keepalive.components.seconds),
            will: (topics.status, offline), username: credentials?.username, password: credentials?.password,
            subscriptions: [topics.commands])
        settings.tls = config.mqtt.tls.map { ($0.ca, $0.cert, $0.key) }
        settings.protocolVersion = Int32(config.mqtt.protocolVersion)
        let continuation = self.continuation
        link = MQTTLink(settings: settings) { continuation.yield(.uplink($0)) }
        let birth = StatusPayload(state: "online", version: AgentVersion.current, configHash: options.configHash,
                                  boot: stamper.state.boot, since: stamper.wallTime(clock.now()), mode: options.mode)
        let outbox: any Outbox
        var outboxHighest: UInt64 = 0
        do {
            let (durable, problems) = try DurableOutbox.open(directory: config.outbox.path, capacity: config.outbox.capacity)
            outbox = durable
            for problem in problems { Log.warn("outbox repaired at start", ["problem": problem]) }
            startProblems = problems.filter { $0.contains("damaged") }
            // Whatever the outbox lost, and whatever seqs the last run may have used that nothing
            // accounts for (a crash, a lost file), is declared: a gap in seq is never silent.
            for range in durable.lostAtOpen { stamper.state.addDrops(range) }
            if let range = stamper.state.unaccounted(outboxHighest: durable.highestSeq) {
                Log.warn("seqs of the last run unaccounted for, declared dropped",
                         ["first_seq": range.lowerBound, "last_seq": range.upperBound])
                stamper.state.addDrops(range)
            }
            outboxHighest = durable.highestSeq
        } catch {
            Log.error("outbox unusable, events kept in memory only", ["dir": config.outbox.path, "error": error])
            outbox = MemoryOutbox(capacity: config.outbox.capacity)
            startProblems = [error.message]
        }
        try stamper.state.atLeast(seq: outboxHighest, from: config.outbox.path + "/outbox.log")
        session = UplinkSession(link: link, topics: topics, outbox: outbox, birth: birth)
    }

    /// Outbox trouble found while opening it, announced as fault events once running.
    private var startProblems: [String]
    /// The outbox problem last announced.
    private var announcedProblem: String?

    /// The stream's continuation, for signal handlers.
    /// A stop request and the end of the stop's grace: flags the event loop reads before each input,
    /// so neither waits behind a backlog of queued line changes (each of which costs a disk sync).
    private final class Flags: Sendable {
        let stopRequested = Atomic<Bool>(false)
        let graceElapsed = Atomic<Bool>(false)
    }
    private nonisolated let flags = Flags()

    /// SIGTERM/SIGINT: stop gracefully, ahead of whatever inputs are still queued.
    nonisolated func requestStop() {
        flags.stopRequested.store(true, ordering: .releasing)
        continuation.yield(.stop)
    }

    /// Runs until stopped; returns the process exit code.
    func run() async -> Int32 {
        let start = clock.now()
        garage.start(initial: source.initialLevels(count: garage.inputCount), at: start)
        if case .simulator = source {
            // The simulated garage starts empty: its lane counts are known from the first minute.
            for level in config.levels { _ = garage.calibrate(level: level.id, count: 0) }
        } else {
            for (level, count) in stamper.state.laneCounts { _ = garage.calibrate(level: level, count: count) }
        }
        clockSynced = stamper.clockSynchronized
        if let pending = stamper.state.announcement { session.announce(pending) }
        for problem in startProblems { deviceEvent("outbox.fault") { $0.reason = problem } }
        flush()
        publishChangedStates()
        link.start()
        let stopSource = source.start(clock: clock, into: continuation)
        Log.info("agent running", ["site": config.site, "device": config.device, "lanes": config.lanes.count,
                                   "spots": config.spots.count, "boot": stamper.state.boot])
        scheduleTimer()
        options.service.ready()
        housekeeping = Task { [continuation, every = min(.seconds(5), options.service.watchdogInterval ?? .seconds(5))] in
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                continuation.yield(.housekeeping)
            }
        }
        for await input in inputs {
            statusInbox.answer { statusSnapshot.build() }
            if flags.stopRequested.load(ordering: .acquiring) {
                stopSource()
                return await stop(exitCode: ExitCode.success)
            }
            switch input {
            case .lines(let changes):
                tracker.note(changes)
                for change in changes { garage.handle(change, into: &events) }
                flush()
            case .tick:
                timer = nil
                garage.advance(to: clock.now(), into: &events)
                flush()
            case .housekeeping:
                checkClock()
                options.service.alive()   // the watchdog is fed by the event loop itself
            case .uplink(let event):
                noteForStatus(event)
                session.handle(event)
                switch event {
                case .message(let topic, let payload): command(topic: topic, payload: payload)
                case .connected: announceDrops()
                case .acknowledged:
                    if let seq = session.acknowledgedAnnouncement, stamper.state.announcement?.event.seq == seq {
                        stamper.state.announcementAcknowledged(seq: seq)
                        stamper.state.save()
                        announceDrops()
                    }
                default: break
                }
            case .inputLost(let input, let message):
                Log.error("GPIO input lost", ["input": input.map { config.inputs[$0].ref.description } ?? "all",
                                              "problem": message])
                garage.inputLost(input, at: clock.now(), into: &events)
                flush()
                if garage.everyInputLost {
                    // Running on with nothing watched helps nobody: fail, so systemd restarts the agent.
                    Log.error("every GPIO input is lost, stopping so that the service restarts", [:])
                    stopSource()
                    return await stop(exitCode: ExitCode.failure)
                }
            case .sourceFinished:
                Log.info("trace finished, agent keeps running until stopped")
            case .stop:
                stopSource()
                return await stop(exitCode: ExitCode.success)
            case .stopGraceElapsed:
                continue
            case .statusRequested:
                break   // answered above
            case .statusDue:
                statusSchedule.woke()
            }
            refreshStatus()
        }
        return 0
    }

    /// Graceful stop: say offline, give the broker a moment to acknowledge, disconnect cleanly.
    private func stop(exitCode: Int32) async -> Int32 {
        Log.info("stopping", ["outbox": session.outboxCount])
        options.service.stopping()
        timer?.task.cancel()
        housekeeping?.cancel()
        statusTimer?.cancel()
        garage.advance(to: clock.now(), into: &events)
        flush()
        // flush() arms the garage's next timer; nothing is due any more once stopping.
        timer?.task.cancel()
        timer = nil
        session.sayOffline()
        let giveUp = Task { [continuation, flags, grace = options.stopGrace] in
            try? await Task.sleep(for: grace)
            flags.graceElapsed.store(true, ordering: .releasing)
            continuation.yield(.stopGraceElapsed)
        }
        var unread = 0   // line changes still queued: never stamped nor stored, the board's levels say the rest at the next start
        if session.isConnected {
            waiting: for await input in inputs {
                if flags.graceElapsed.load(ordering: .acquiring) {
                    Log.warn("broker did not acknowledge everything before stopping", ["outbox": session.outboxCount])
                    break waiting
                }
                if case .lines(let changes) = input { unread += changes.count }
                statusInbox.answer { statusSnapshot.build() }
                switch input {
                case .uplink(let event):
                    session.handle(event)
                    if !session.isConnected || (session.offlineAcknowledged && session.settled) { break waiting }
                case .lines, .tick, .sourceFinished, .stop, .housekeeping, .inputLost, .stopGraceElapsed, .statusDue, .statusRequested:
                    continue   // (the grace's end is its flag, read above)
                }
            }
        }
        giveUp.cancel()
        if unread > 0 { Log.info("line changes queued behind the stop, left unread", ["changes": unread]) }
        link.stop()
        stamper.state.settle(oldestPending: session.oldestPendingSeq)
        stamper.state.stoppedCleanly()
        continuation.finish()
        Log.info("stopped", ["outbox": session.outboxCount, "exit": exitCode])
        return exitCode
    }

    // MARK: - Events and states out

    /// Stamps the garage's new events, saves the device state (sequence, lane counts) before any
    /// of them leaves, hands them to the uplink, and publishes the states they changed.
    private func flush() {
        checkClock()
        stamper.state.settle(oldestPending: session.oldestPendingSeq)
        let entries = events.map { stamper.stamp($0, synced: clockSynced) } + deviceEvents
        events.removeAll(keepingCapacity: true)
        deviceEvents.removeAll()
        tracker.note(entries)
        stamper.state.setLaneCounts(garage.laneCounts)
        stamper.state.save()
        for entry in entries { Log.debug("event", ["type": entry.event.type, "seq": entry.event.seq]) }
        let lost = session.accept(entries).map(\.event.seq)
        if !lost.isEmpty {
            stamper.state.addDrops(lost)
            stamper.state.save()
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
        announceDrops()
        publishChangedStates()
        scheduleTimer()
    }

    /// Events about the device itself, sent with the next flush.
    private var deviceEvents: [OutboxEntry] = []

    private func deviceEvent(_ type: String, _ fill: (inout EventPayload) -> Void) {
        deviceEvents.append(stamper.stampDevice(type: type, at: clock.now(), synced: clockSynced, fill))
    }

    /// Declares the events a full outbox gave up, so the backend sees a gap it can explain: one
    /// announcement at a time, kept on disk until the broker acknowledges it.
    private func announceDrops() {
        guard session.isConnected, stamper.state.announcement == nil, let drops = stamper.state.drops else { return }
        Log.warn("announcing dropped events", ["count": drops.count, "first_seq": drops.firstSeq, "last_seq": drops.lastSeq])
        tracker.dropsDeclared += drops.count
        let entry = stamper.stampDevice(type: "outbox.dropped", at: clock.now(), synced: clockSynced) {
            $0.dropped = drops.count
            $0.firstSeq = drops.firstSeq
            $0.lastSeq = drops.lastSeq
        }
        stamper.state.announce(entry)
        stamper.state.save()
        session.announce(entry)
    }

    /// When NTP sets the clock, events still waiting get their true times.
    private func checkClock() {
        let synced = stamper.clockSynchronized
        defer { clockSynced = synced }
        guard synced && !clockSynced else { return }
        let stamper = self.stamper
        session.correctClock(kernelBoot: stamper.kernelBoot) { ns in
            stamper.wallTime(MonotonicInstant(nanoseconds: ns))
        }
    }

    private func publishChangedStates() {
        let changed = garage.takeChanged()
        for s in changed.spots {
            let spot = garage.spot(s)
            session.setRetained(topic: topics.spot(spot.id), payload: WireJSON.encode(stamper.spotState(spot)))
        }
        for l in changed.levels {
            let level = garage.level(l)
            session.setRetained(topic: topics.level(level.id), payload: WireJSON.encode(stamper.levelState(level)))
        }
    }

    private func scheduleTimer() {
        let due = garage.nextDeadline
        guard due != timer?.due else { return }
        timer?.task.cancel()
        timer = nil
        guard let due else { return }
        let delay = clock.realDelay(until: due)
        let task = Task { [continuation] in
            try? await Task.sleep(for: delay)
            if !Task.isCancelled { continuation.yield(.tick) }
        }
        timer = (due, task)
    }

    // MARK: - Commands

    private func command(topic: String, payload: [UInt8]) {
        guard topic.hasPrefix(topics.prefix + "/cmd/") else { return }
        let name = String(topic.dropFirst(topics.prefix.count + 5))
        let reply = CommandHandler.handle(name: name, payload: payload, garage: &garage,
                                          status: name == "diag" ? statusSnapshot.build() : nil)
        Log.info("command", ["name": String(name.prefix(40)), "ok": reply.ok])
        session.publishReply(topic: topics.reply, payload: reply.payload)
        if reply.ok && name == "rebirth" { session.rebirth() }
        stamper.state.setLaneCounts(garage.laneCounts)
        stamper.state.save()
        publishChangedStates()
    }

    // MARK: - Status (built in Sources/Agent/Status)

    /// For the status socket's thread: the event loop answers before its next input.
    nonisolated func requestStatus(_ request: StatusRequest) {
        statusInbox.add(request)
        continuation.yield(.statusRequested)
    }

    private var statusSnapshot: StatusSnapshot {
        StatusSnapshot(config: config, garage: garage, session: session, stamper: stamper, tracker: tracker,
                       configHash: options.configHash, mode: options.mode, clockSynced: clockSynced)
    }

    /// Link events for the status; a new connection's birth carries the facts as they are now.
    private func noteForStatus(_ event: UplinkEvent) {
        tracker.note(event, at: clock.now())
        if case .connected = event { publishStatus(statusSnapshot) }
    }

    /// Republishes the retained status when its facts changed, at most once per `mqtt.status_every`.
    private func refreshStatus() {
        let snapshot = statusSnapshot
        switch statusSchedule.decide(snapshot.health, connected: session.isConnected, now: RetainedStatusSchedule.now) {
        case .nothing:
            break
        case .publishNow:
            publishStatus(snapshot)
        case .wake(let delay):
            statusTimer = Task { [continuation] in
                try? await Task.sleep(for: delay)
                if !Task.isCancelled { continuation.yield(.statusDue) }
            }
        }
    }

    private func publishStatus(_ snapshot: StatusSnapshot) {
        let health = snapshot.health
        session.updateStatus(session.birth.with(health, uptimeSeconds: Int(tracker.uptimeSeconds),
                                                outboxOldestAgeSeconds: snapshot.oldestAgeSeconds.map { Int($0) }))
        statusSchedule.didPublish(health, at: RetainedStatusSchedule.now)
    }
}
