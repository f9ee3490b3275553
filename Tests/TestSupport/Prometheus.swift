import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Debian's prometheus-node-exporter with only its textfile collector, reading `textfileDirectory`, on a free
/// loopback port; ended by its PID.
public final class NodeExporter {
    public static let binary = "/usr/bin/prometheus-node-exporter"
    public private(set) var port = 0
    private var child: Child?

    public init(textfileDirectory: String) throws {
        try requireInstalled(NodeExporter.binary, package: "prometheus-node-exporter")
        try withFreePorts(1) { ports in
            port = ports[0]
            let child = try Child(NodeExporter.binary, ["--collector.disable-defaults", "--collector.textfile",
                                                        "--collector.textfile.directory=\(textfileDirectory)",
                                                        "--web.listen-address=127.0.0.1:\(port)"])
            self.child = child
            try awaitListening(child, "prometheus-node-exporter", says: "Listening on")
        }
    }

    public var target: String { "127.0.0.1:\(port)" }

    public func stop() {
        child?.signal(SIGTERM)
        _ = child?.wait(5)
        child = nil
    }

    deinit { stop() }
}

/// Debian's prometheus with `config` (YAML text, written into its own temporary directory with its TSDB), on a free
/// loopback port; ended by its PID. `value(of:)` asks its HTTP API, as an operator's dashboard would.
public final class PrometheusServer {
    public static let binary = "/usr/bin/prometheus"
    public let directory = temporaryDirectory()
    public private(set) var port = 0
    private var child: Child?

    public init(config: String) throws {
        try requireInstalled(PrometheusServer.binary, package: "prometheus")
        let file = directory.appendingPathComponent("prometheus.yml").path
        try config.write(toFile: file, atomically: true, encoding: .utf8)
        try withFreePorts(1) { ports in
            port = ports[0]
            let child = try Child(PrometheusServer.binary, ["--config.file=\(file)", "--storage.tsdb.path=\(directory.path)/data",
                                                            "--web.listen-address=127.0.0.1:\(port)"])
            self.child = child
            try awaitListening(child, "prometheus", says: "Server is ready to receive web requests")
        }
    }

    public var log: String { child?.stderr ?? "" }

    /// The instant query's single value (its text, as the API gives it), or nil: no such series, several, or no answer.
    public func value(of query: String) -> String? {
        var parts = URLComponents(string: "http://127.0.0.1:\(port)/api/v1/query")!
        parts.queryItems = [URLQueryItem(name: "query", value: query)]
        // A query's `+` (le="+Inf") is left as it is by URLComponents, and a form decoder reads it as a space.
        parts.percentEncodedQuery = parts.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        guard let data = try? Data(contentsOf: parts.url!),
              let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let result = (json["data"] as? [String: Any])?["result"] as? [[String: Any]],
              result.count == 1, let sample = result[0]["value"] as? [Any], sample.count == 2 else { return nil }
        return sample[1] as? String
    }

    public func stop() {
        child?.signal(SIGTERM)
        _ = child?.wait(10)
        child = nil
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A test that needs a Debian binary fails with the fix when it is missing (CI installs it with setup.sh), never skips.
private func requireInstalled(_ binary: String, package: String) throws {
    guard FileManager.default.isExecutableFile(atPath: binary) else {
        throw HarnessError("\(binary) is not installed: run deploy/dev/setup.sh (apt install --no-install-recommends \(package))")
    }
}

/// Waits for the server's "listening" line; throws `PortTaken` when another process had its port.
private func awaitListening(_ child: Child, _ name: String, says line: String) throws {
    guard eventually(30, { child.hasExited || child.stderr.contains(line) }), !child.hasExited else {
        child.signal(SIGKILL)
        _ = child.wait(5)
        if child.stderr.contains("address already in use") { throw PortTaken() }
        throw HarnessError("\(name) did not start: \(child.stderr)")
    }
}
