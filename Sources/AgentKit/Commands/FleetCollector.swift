import FoundationEssentials
import ParkWiseCLI
import ParkWiseContract
import Uplink

/// `monitor --fleet SITE`: the site's retained statuses, gathered until the broker has sent them all (nothing new for
/// `quiet` after the subscription), shown as the fleet table, one line a board.
enum FleetCollector {
    static func filter(_ site: String) -> String { "\(Topics.root)/\(site)/+/status" }

    /// How long nothing new means the broker has sent every retained status.
    static let quiet: Duration = .seconds(1)
    /// How long to try the broker before giving up (exit 1).
    static let connectTimeout: Duration = .seconds(10)

    private enum Input: Sendable {
        case uplink(UplinkEvent)
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
        var boards: [String: FleetBoard] = [:]
        for await input in stream {
            switch input {
            case .uplink(.connected):
                lastNews = clock.now
                wake(at: clock.now + quiet)
            case .uplink(.message(let topic, let payload, _)):
                guard let (_, device, rest) = Topics.parse(topic), rest == ["status"] else { continue }
                lastNews = clock.now
                wake(at: clock.now + quiet)
                guard !payload.isEmpty, let status = WireJSON.decode(StatusPayload.self, from: payload) else {
                    boards[device] = nil   // a cleared retained status: the board was removed
                    continue
                }
                boards[device] = FleetBoard(site: site, device: device, retained: status)
            case .uplink:
                continue
            case .check:
                if let lastNews, clock.now - lastNews >= quiet {
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
