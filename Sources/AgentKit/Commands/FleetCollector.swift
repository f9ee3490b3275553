import FoundationEssentials
import ParkWiseCLI
import ParkWiseContract
import MQTT

/// `monitor --fleet SITE`: the site's retained statuses, gathered until the broker has sent them all (no retained one
/// for `quiet` after the subscription, and never longer than `collectAtMost`), shown as the fleet table, one line a
/// board. A live status (not the broker's stored copy) updates its board but does not hold the table back: two boards
/// sharing a device id publish one every second or so, and the table waited for a quiet second they never gave.
enum FleetCollector {
    static func filter(_ site: String) -> String { "\(Topics.root)/\(site)/+/status" }

    /// How long no retained status means the broker has sent every one.
    static let quiet: Duration = .seconds(1)
    /// The longest the table waits after the connection, whatever keeps coming.
    static let collectAtMost: Duration = .seconds(5)
    /// How long to try the broker before giving up (exit 1).
    static let connectTimeout: Duration = .seconds(10)

    private enum Input: Sendable {
        case uplink(LinkEvent)
        case check
        case stop
    }

    static func run(site: String, settings: LinkSettings, staleAfter: Duration) async -> Int32 {
        let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
        let link = MQTTLink(settings: settings) { continuation.yield(.uplink($0)) }
        StopSignals.handle(onStop: { continuation.yield(.stop) })
        defer { StopSignals.release() }
        let clock = ContinuousClock()
        let started = clock.now
        // One wake-up at the deadline that matters now (the broker's time to answer, then `quiet` after the newest
        // status), moved on by each status: no timer ticking while the statuses come in.
        var pendingWake: Task<Void, Never>?
        func wake(at deadline: ContinuousClock.Instant) {
            pendingWake?.cancel()
            pendingWake = Task {
                try? await Task.sleep(until: deadline, clock: clock)
                if !Task.isCancelled { continuation.yield(.check) }
            }
        }
        defer { pendingWake?.cancel() }
        wake(at: started + connectTimeout)
        link.start()
        defer { link.stop() }
        var lastNews: ContinuousClock.Instant?
        var connectedAt: ContinuousClock.Instant?
        var boards: [String: FleetBoard] = [:]
        /// Per device, the runs (boot and start time) its online statuses came from while collecting: two means two
        /// boards on one id.
        var runs: [String: Set<String>] = [:]
        for await input in stream {
            switch input {
            case .uplink(.connected):
                lastNews = clock.now
                connectedAt = connectedAt ?? clock.now
                wake(at: clock.now + quiet)
            case .uplink(.message(let topic, let payload, let retained, let expiry)):
                guard let (_, device, rest) = Topics.parse(topic), rest == ["status"] else { continue }
                if retained {
                    lastNews = clock.now
                    wake(at: min(clock.now + quiet, (connectedAt ?? clock.now) + collectAtMost))
                }
                guard !payload.isEmpty, var status = WireJSON.decode(StatusPayload.self, from: payload) else {
                    boards[device] = nil   // a cleared retained status: the board was removed
                    continue
                }
                if status.state == "online", let boot = status.boot {
                    runs[device, default: []].insert("boot \(boot) since \(status.since ?? "?")")
                }
                if let seen = runs[device], seen.count > 1, status.idConflict == nil {
                    status.idConflict = "statuses of \(seen.sorted().joined(separator: " and ")) came within seconds: "
                        + "two boards publish as this device"
                }
                let published = StatusPayload.ageSeconds(remaining: expiry).map { Int64(Date().timeIntervalSince1970) - $0 }
                boards[device] = FleetBoard(site: site, device: device, retained: status, published: published)
            case .uplink:
                continue
            case .check:
                let waitedEnough = connectedAt.map { clock.now - $0 >= collectAtMost } ?? false
                if let lastNews, clock.now - lastNews >= quiet || waitedEnough {
                    show(site: site, boards: Array(boards.values), staleAfter: staleAfter)
                    return ExitCode.success
                }
                if lastNews == nil, clock.now - started >= connectTimeout {
                    printError("error: broker \(settings.brokers.map(\.description).joined(separator: ", ")) unreachable "
                               + "for \(connectTimeout.components.seconds)s\n    hint: check --broker, --credentials and --ca")
                    return ExitCode.failure
                }
            case .stop:
                return ExitCode.success
            }
        }
        return ExitCode.success
    }

    private static func show(site: String, boards: [FleetBoard], staleAfter: Duration) {
        guard !boards.isEmpty else {
            say("site \(site): no board has a retained status on this broker")
            return
        }
        let now = Int64(Date().timeIntervalSince1970)
        say("site \(site), \(WireTime.format(unixNanoseconds: now * 1_000_000_000)):")
        for line in FleetTable.lines(boards, now: now, staleAfter: staleAfter.components.seconds) { say(line) }
    }
}
