import Foundation

/// The package's root folder, from this file's path.
public let packageRoot: String = {
    var path = #filePath
    for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path
}()

/// The agent binary `swift build` made (or PARKWISE_AGENT_BIN).
public let agentBinary: String = ProcessInfo.processInfo.environment["PARKWISE_AGENT_BIN"]
    ?? packageRoot + "/.build/debug/parkwise-agent"

/// A fresh temporary directory for one test.
public func temporaryDirectory() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("parkwise-test-\(UUID().uuidString)")
    try! FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
public func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass.
@discardableResult
public func eventually(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let until = Date().addingTimeInterval(seconds)
    while Date() < until {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// A child process whose output is collected; ended by its PID only.
public final class Child: @unchecked Sendable {
    public let process = Process()
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()

    public init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let outPipe = Pipe(), errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        outPipe.fileHandleForReading.readabilityHandler = { [weak self] h in
            let d = h.availableData
            self?.lock.withLock { self?.out.append(d) }
        }
        errPipe.fileHandleForReading.readabilityHandler = { [weak self] h in
            let d = h.availableData
            self?.lock.withLock { self?.err.append(d) }
        }
        // Test threads (libdispatch workers) block signals, and a child inherits the mask: spawn
        // with nothing blocked, or SIGTERM would never reach mosquitto or the agent.
        var none = sigset_t(), previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
    }

    public var stdout: String { lock.withLock { String(decoding: out, as: UTF8.self) } }
    public var stderr: String { lock.withLock { String(decoding: err, as: UTF8.self) } }
    public var pid: Int32 { process.processIdentifier }

    /// Whether the child has exited, asked of the kernel without reaping it (Foundation reaps it).
    public var hasExited: Bool {
        var info = siginfo_t()
        let rc = waitid(P_PID, id_t(process.processIdentifier), &info, WEXITED | WNOHANG | WNOWAIT)
        return rc != 0 || info._sifields._sigchld.si_pid != 0 || !process.isRunning
    }

    public func signal(_ number: Int32) {
        if process.isRunning { kill(process.processIdentifier, number) }
    }

    /// Waits for exit; returns the exit code, or nil if it is still running after `seconds`.
    public func wait(_ seconds: Double = 10) -> Int32? {
        guard eventually(seconds, { hasExited }) else { return nil }
        process.waitUntilExit()
        usleep(50_000)   // let the pipes drain
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// A private mosquitto on a free loopback port, started for one test and ended by its PID.
public final class Broker {
    public let port: Int
    public let directory: URL
    private var child: Child?
    private let extraConfig: String

    public init(port: Int = freePort(), extraConfig: String = "") throws {
        self.port = port
        self.extraConfig = extraConfig
        directory = temporaryDirectory()
        try start()
    }

    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Starts (again) with the same port and persistence file: sessions and queued messages survive.
    public func start() throws {
        let config = """
        listener \(port) 127.0.0.1
        allow_anonymous true
        persistence true
        persistence_location \(directory.path)/
        user root
        \(extraConfig)
        """
        let path = directory.appendingPathComponent("mosquitto.conf").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        child = try Child("/usr/sbin/mosquitto", ["-c", path])
        guard eventually(5, { canConnect(port) }) else {
            throw HarnessError("mosquitto did not start on port \(port): \(child?.stderr ?? "")")
        }
    }

    /// Stops it (SIGTERM; it saves its sessions first).
    public func stop() {
        child?.signal(SIGTERM)
        _ = child?.wait(5)
        child = nil
    }

    deinit { stop() }
}

public struct HarnessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public func canConnect(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// One message as mosquitto_sub (an independent client) received it.
public struct Received: Sendable {
    public var retained: Bool
    public var topic: String
    public var payload: String

    public init(retained: Bool, topic: String, payload: String) {
        self.retained = retained
        self.topic = topic
        self.payload = payload
    }

    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:]
    }

    /// mosquitto_sub output in the `-F "%r\t%t\t%p"` format, a message a line.
    public static func parse(_ output: String) -> [Received] {
        output.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { return nil }
            return Received(retained: parts[0] == "1", topic: String(parts[1]), payload: String(parts[2]))
        }
    }
}

/// mosquitto_sub with a persistent session (QoS 1): once registered, the broker keeps every
/// message for it, even while it is not connected or the broker restarts.
public final class Subscriber {
    public let broker: Broker
    public let id = "test-\(UUID().uuidString.prefix(8))"
    public let filter: String
    private var child: Child?

    public init(_ broker: Broker, filter: String = "parkwise/#") throws {
        self.broker = broker
        self.filter = filter
        // Register the session and subscription, then leave.
        let register = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-c", "-i", id, "-q", "1",
                                                            "-t", filter, "-E"])
        guard register.wait(5) == 0 else { throw HarnessError("cannot register subscriber: \(register.stderr)") }
    }

    /// Connects and collects from now on (including what was queued while away).
    public func listen() throws {
        child = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-c", "-i", id, "-q", "1",
                                                     "-t", filter, "-F", "%r\t%t\t%p"])
    }

    public var messages: [Received] { Received.parse(child?.stdout ?? "") }

    public func events() -> [[String: Any]] { messages.filter { $0.topic.hasSuffix("/events") }.map(\.json) }

    public func stop() {
        child?.signal(SIGTERM)
        _ = child?.wait(5)
    }
}

/// Retained messages on a topic filter, as a new subscriber sees them. The broker sends them right
/// after the subscription; the subscriber is ended once 300 ms pass without more (1 s if none come).
public func retainedMessages(_ broker: Broker, _ filter: String) throws -> [Received] {
    let child = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-t", filter, "-F", "%r\t%t\t%p",
                                                     "--retained-only"])
    var seen = 0
    var quietSince = Date()
    let start = Date()
    while Date().timeIntervalSince(start) < 5 {
        usleep(20_000)
        let now = child.stdout.count
        if now != seen { seen = now; quietSince = Date() }
        let quiet = Date().timeIntervalSince(quietSince)
        if (seen > 0 && quiet > 0.3) || (seen == 0 && quiet > 1) { break }
    }
    child.signal(SIGTERM)
    _ = child.wait(5)
    return Received.parse(child.stdout)
}


/// mosquitto_pub, QoS 1 (retained with `retain`); its exit code, nil when it did not finish.
public func mosquittoPublish(_ broker: Broker, _ topic: String, _ payload: String, retain: Bool = false) throws -> Int32? {
    let child = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload]
                          + (retain ? ["-r"] : []))
    return child.wait(5)
}
