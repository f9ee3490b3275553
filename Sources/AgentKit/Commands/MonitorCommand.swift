import FoundationEssentials
import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore
import ServiceSetup
import MQTT

/// What a backend sees: subscribes to a site's tree and prints, per device, the level view and
/// every event, and says when a device goes offline or falls silent.
enum MonitorCommand {
    static let spec = CommandSpec(
        name: "monitor", abstract: "Watch a site's live feed: level occupancy and every event, per device.",
        options: [
            .init(name: "broker", value: "url", help: "The broker, e.g. mqtt://127.0.0.1:1883 (default)."),
            .init(name: "site", value: "site", help: "Only this site (default: every site)."),
            .init(name: "count", value: "n", help: "Exit after this many events."),
            .init(name: "stale", value: "duration",
                  help: "Mark a device that says it is online but has sent nothing for this long (default 10m)."),
            .init(name: "credentials", value: "file",
                  help: "A login for a broker that wants one: username= and password= lines, mode 0600 (a user the ACL lets "
                      + "read parkwise/v1/#, e.g. deploy/mosquitto's parkwise-backend; a device's own login may not)."),
            .init(name: "ca", value: "file", help: "The CA of an mqtts:// broker's certificate (default: the system's CAs)."),
            .init(name: "fleet", value: "site",
                  help: "Instead: every board of this site at a glance from the retained statuses, one line each, then exit "
                      + "(online/OFFLINE since when, version, boot, outbox, faulted inputs, clock; STALE: online but its "
                      + "status older than --stale)."),
        ])

    private enum Input: Sendable {
        case uplink(LinkEvent)
        case check
        case stop
    }

    static func run(_ args: ParsedArguments) async -> Int32 {
        let url = args.option("broker") ?? "mqtt://127.0.0.1:1883"
        guard let broker = BrokerAddress.parse(url) else {
            printError(UsageError(command: spec, message: "'\(url)' is not a broker address like mqtt://HOST:PORT").text)
            return ExitCode.usage
        }
        let staleText = args.option("stale") ?? "10m"
        guard let stale = try? DurationText.read(staleText), stale > .zero else {
            printError(UsageError(command: spec, message: "--stale '\(staleText)' is not a duration like 90s or 10m").text)
            return ExitCode.usage
        }
        var limit: Int?
        if let countText = args.option("count") {
            guard let count = Int(countText), count > 0 else {
                printError(UsageError(command: spec, message: "--count must be a whole number of events, 1 or more").text)
                return ExitCode.usage
            }
            limit = count
        }
        let fleetSite = args.option("fleet")
        if let fleetSite, fleetSite.isEmpty || fleetSite.contains(where: { "/+#".contains($0) }) {
            printError(UsageError(command: spec, message: "--fleet '\(fleetSite)' is not a site name").text)
            return ExitCode.usage
        }
        let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
        var settings = LinkSettings(
            brokers: [.init(host: broker.host, port: broker.port, tls: broker.tls)],
            clientID: "parkwise-monitor-\(ProcessInfo.processInfo.processIdentifier)", keepaliveSeconds: 30,
            will: nil, subscriptions: [fleetSite.map(FleetCollector.filter) ?? Topics.siteFilter(args.option("site"))])
        settings.unreachableMessage = "broker unreachable, retrying"
        // MQTT 5 where the broker speaks it: a retained status then comes with its age by the broker's clock.
        settings.protocolVersion = 5
        settings.fallsBackTo311 = true
        if let path = args.option("credentials") {
            do {
                let login = try Credentials.load(path: path)
                settings.username = login.username
                settings.password = login.password
            } catch {
                printError("error: \(error)")
                return ExitCode.config
            }
        }
        if let ca = args.option("ca") {
            do { _ = try Credentials.checkReadable(ca, what: "CA file") } catch {
                printError("error: \(error)")
                return ExitCode.config
            }
            settings.tls = (ca: ca, cert: nil, key: nil)
        }
        if let fleetSite {
            return await FleetCollector.run(site: fleetSite, settings: settings, staleAfter: stale)
        }
        let link = MQTTLink(settings: settings) { continuation.yield(.uplink($0)) }
        StopSignals.handle(onStop: { continuation.yield(.stop) })
        defer { StopSignals.release() }
        // Silence is only noticed by looking: a check a few times per stale period.
        let checks = Task { [every = min(stale / 4, .seconds(30))] in
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                continuation.yield(.check)
            }
        }
        link.start()
        var view = MonitorView(staleAfter: stale)
        var seen = 0
        loop: for await input in stream {
            switch input {
            case .uplink(.message(let topic, let payload, _, _)):
                for line in view.take(topic: topic, payload: payload, at: .now) { say(line) }
                if topic.hasSuffix("/events") { seen += 1 }
                if let limit, seen >= limit { break loop }
            case .uplink(.connected(let broker, _, _)):
                say("monitor: connected to \(broker), watching \(Topics.siteFilter(args.option("site")))")
            case .uplink:
                continue
            case .check:
                for line in view.check(at: .now) { say(line) }
            case .stop:
                break loop
            }
        }
        checks.cancel()
        link.stop()
        return ExitCode.success
    }
}
