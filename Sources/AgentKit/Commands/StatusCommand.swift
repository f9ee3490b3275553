import ConfigFile
import FoundationEssentials
import Glibc
import ParkWiseCLI
import ParkWiseContract
import Synchronization

/// `parkwise-agent status`: what the running agent reports on its status socket, as text, as
/// JSON, or (--watch) as a live full-screen view of the garage.
enum StatusCommand {
    static let spec = CommandSpec(
        name: "status", abstract: "Show the running agent's status: link, outbox, clock, every input, spot, lane and level.",
        discussion: """
        Asks the running agent on its status socket: the service's (/run/parkwise-agent/status.sock,
        readable by the service's group), or with --config (and --outbox) that of an agent run by hand
        (<outbox dir>/status.sock). --watch shows the garage live, full screen (Ctrl-C quits); it fits
        an 80x24 terminal over SSH, in colour unless NO_COLOR is set or TERM is dumb.
        """,
        options: [
            .config(help: "The agent's config file: find the socket of an agent run with it."),
            .init(name: "outbox", value: "dir", help: "The --outbox the agent was run with."),
            .init(name: "socket", value: "path", help: "The status socket itself."),
            .init(name: "json", value: nil, help: "Print the status as JSON."),
            .init(name: "watch", value: nil, help: "A live full-screen view, updated every second."),
        ])

    static func run(_ args: ParsedArguments) async -> Int32 {
        guard !(args.flag("json") && args.flag("watch")) else {
            printError(UsageError(command: spec, message: "--json and --watch do not go together").text)
            return ExitCode.usage
        }
        var outbox = args.option("outbox")
        /// The board the config names: an answer from another one is refused.
        var expected: (site: String, device: String)?
        if let path = args.option("config") {
            do {
                let config = try ConfigFile.load(path: path)
                expected = (config.site, config.device)
                if outbox == nil { outbox = config.outbox.path }
            } catch {
                printConfigIssues(error)
                return ExitCode.config
            }
        }
        let candidates = args.option("socket").map { [$0] } ?? StatusSocket.candidates(outboxPath: outbox)
        let path = StatusClient.locate(candidates)
        let config = args.option("config")
        if args.flag("watch") { return await watch(path: path, expecting: expected, config: config) }
        switch StatusClient.fetch(path: path, expecting: expected, config: config) {
        case .failure(var failure):
            if failure.kind == .noAgent && candidates.count > 1 {
                failure.message = "no agent is running: no status socket at \(candidates.joined(separator: " nor "))"
            }
            printError(failure.description)
            return ExitCode.failure
        case .success(let status):
            if args.flag("json") {
                say(String(decoding: WireJSON.encode(status), as: UTF8.self))
            } else {
                say(StatusText.render(status))
            }
            return ExitCode.success
        }
    }

    /// Redraws every second until SIGINT/SIGTERM; the terminal is given back as it was.
    static func watch(path: String, expecting expected: (site: String, device: String)?, config: String?) async -> Int32 {
        let terminal = isatty(1) == 1
        let environment = ProcessInfo.processInfo.environment
        let colour = terminal && environment["TERM"] != "dumb" && (environment["NO_COLOR"] ?? "").isEmpty
        let stop = Stop()
        let restore = { @Sendable in if terminal { write("\u{1B}[?25h\u{1B}[?1049l") } }
        StopSignals.handle(onStop: { stop.flag.store(true, ordering: .releasing) }, onForce: restore)
        defer { StopSignals.release() }
        if terminal { write("\u{1B}[?1049h\u{1B}[?25l") }   // alternate screen, cursor hidden
        defer { restore() }
        while !stop.flag.load(ordering: .acquiring) {
            let (width, height) = size(terminal: terminal, environment: environment)
            var lines: [String]
            switch StatusClient.fetch(path: path, expecting: expected, config: config, timeout: 2) {
            case .success(let status): lines = WatchFrame.render(status, width: width, height: height, colour: colour)
            case .failure(let failure):
                lines = (failure.message + "\n" + failure.hint + "\n(trying again every second; Ctrl-C quits)")
                    .split(separator: "\n").map { String($0.prefix(width)) }
            }
            if terminal {
                write("\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
            } else {
                write(lines.joined(separator: "\n") + "\n\n")
            }
            // A second, in steps, so a stop is not kept waiting.
            for _ in 0..<10 where !stop.flag.load(ordering: .acquiring) { try? await Task.sleep(for: .milliseconds(100)) }
        }
        return ExitCode.success
    }

    private final class Stop: Sendable { let flag = Atomic<Bool>(false) }

    private static func size(terminal: Bool, environment: [String: String]) -> (Int, Int) {
        var ws = winsize()
        if terminal, ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 { return (Int(ws.ws_col), Int(ws.ws_row)) }
        return (environment["COLUMNS"].flatMap(Int.init) ?? 80, environment["LINES"].flatMap(Int.init) ?? 24)
    }

    private static func write(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(1, $0.baseAddress, $0.count) }
    }
}
