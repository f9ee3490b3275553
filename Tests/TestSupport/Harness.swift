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

/// Ports `freePort()` has handed out in this test process: suites run in parallel, and the kernel may
/// offer a port again once it is released, so one port never goes to two tests.
private let portsHandedOut = NSLock()
nonisolated(unsafe) private var portsTaken: Set<Int> = []

/// A free TCP port on 127.0.0.1 (bound, read, released), never one handed out before in this process.
/// Another process may still take it before it is used: servers started on it check that they own it.
public func freePort() -> Int {
    while true {
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
        let port = Int(UInt16(bigEndian: addr.sin_port))
        if portsHandedOut.withLock({ portsTaken.insert(port).inserted }) { return port }
    }
}

/// Starts mosquitto with `config` and waits until it says it is running: then every listener of the
/// config is its own (a port that merely accepts connections may belong to another process).
/// Throws `PortTaken` when a listener's port was taken meanwhile, so the caller can pick others.
public func startMosquitto(config: String, at path: String) throws -> Child {
    try config.write(toFile: path, atomically: true, encoding: .utf8)
    let child = try Child("/usr/sbin/mosquitto", ["-c", path])
    guard eventually(10, { child.hasExited || child.stderr.contains(" running") }), !child.hasExited else {
        _ = child.wait(5)
        if child.stderr.contains("Address already in use") { throw PortTaken() }
        throw HarnessError("mosquitto did not start: \(child.stderr)")
    }
    return child
}

public struct PortTaken: Error {
    public init() {}
}

/// Calls `body` with fresh free ports until none of them was taken by another process (five tries).
public func withFreePorts<T>(_ count: Int, _ body: ([Int]) throws -> T) throws -> T {
    for attempt in 1...5 {
        do {
            return try body((0..<count).map { _ in freePort() })
        } catch is PortTaken where attempt < 5 {
            continue
        }
    }
    throw HarnessError("five sets of free ports were all taken by other processes")
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
    private let output = Output()

    /// What the child writes, collected by one reader thread per pipe with blocking reads: a read
    /// returns 0 exactly when every writer has closed the pipe, so "all output is here" is a fact,
    /// not a guess (FileHandle's readability handler sometimes never reports the end of file).
    private final class Output: @unchecked Sendable {
        let lock = NSLock()
        var streams = [Data(), Data()]
        var open = 2

        func collect(_ handle: FileHandle, into index: Int) {
            Thread.detachNewThread { [self] in
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = buffer.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    lock.withLock { streams[index].append(contentsOf: buffer[..<n]) }
                }
                lock.withLock { open -= 1 }
                try? handle.close()
            }
        }
    }

    /// The write end of the child's stdin, when it was started with `input: true` (else stdin is /dev/null).
    private var input: FileHandle?

    public init(_ executable: String, _ arguments: [String], input: Bool = false) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let outPipe = Pipe(), errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        if input {
            let inPipe = Pipe()
            process.standardInput = inPipe
            self.input = inPipe.fileHandleForWriting
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        // Test threads (libdispatch workers) block signals, and a child inherits the mask: spawn
        // with nothing blocked, or SIGTERM would never reach mosquitto or the agent.
        var none = sigset_t(), previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
        // Our copies of the write ends must go, or the readers would never see the end of file.
        try? outPipe.fileHandleForWriting.close()
        try? errPipe.fileHandleForWriting.close()
        output.collect(outPipe.fileHandleForReading, into: 0)
        output.collect(errPipe.fileHandleForReading, into: 1)
    }

    /// Writes to the child's stdin (started with `input: true`).
    public func send(_ text: String) {
        try? input?.write(contentsOf: Data(text.utf8))
    }

    public var stdout: String { output.lock.withLock { String(decoding: output.streams[0], as: UTF8.self) } }
    public var stderr: String { output.lock.withLock { String(decoding: output.streams[1], as: UTF8.self) } }
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
        // Its output is complete once both pipes are at end of file (a grandchild may hold them longer).
        eventually(5) { output.lock.withLock { output.open <= 0 } }
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
    public private(set) var port = 0
    public let directory: URL
    private var child: Child?
    private let extraConfig: String

    /// `extraConfig` may add listeners of its own (on ports from `freePort()`).
    public init(extraConfig: String = "") throws {
        self.extraConfig = extraConfig
        directory = temporaryDirectory()
        try withFreePorts(1) { ports in
            port = ports[0]
            try start()
        }
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
        child = try startMosquitto(config: config, at: directory.appendingPathComponent("mosquitto.conf").path)
    }

    /// Freezes it (SIGSTOP): connections stay open and nothing is answered, like a broker behind a dead route;
    /// `resume` thaws it.
    public func pause() { child?.signal(SIGSTOP) }

    public func resume() { child?.signal(SIGCONT) }

    /// SIGHUP: it reads its password and ACL files again (connections stay).
    public func reload() { child?.signal(SIGHUP) }

    /// Stops it (SIGTERM; it saves its sessions first).
    public func stop() {
        resume()
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

/// One message as mosquitto_sub (an independent client) received it.
public struct Received: Sendable {
    public var retained: Bool
    /// The QoS it was delivered with: the lower of the publisher's and the subscription's.
    public var qos: Int
    public var topic: String
    public var payload: String

    public init(retained: Bool, qos: Int, topic: String, payload: String) {
        self.retained = retained
        self.qos = qos
        self.topic = topic
        self.payload = payload
    }

    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(payload.utf8))) as? [String: Any] ?? [:]
    }

    /// mosquitto_sub's `-F` format that `parse` reads: retained, QoS, topic, payload; a message a line.
    public static let format = "%r\t%q\t%t\t%p"

    /// mosquitto_sub output in the `format`. A line still being written (a large payload arrives in several reads) is
    /// not a message yet: it would parse as one whose JSON is cut.
    public static func parse(_ output: String) -> [Received] {
        let complete = output.hasSuffix("\n") ? output[...] : output[..<(output.lastIndex(of: "\n") ?? output.startIndex)]
        return complete.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false)
            guard parts.count == 4, let qos = Int(parts[1]) else { return nil }
            return Received(retained: parts[0] == "1", qos: qos, topic: String(parts[2]), payload: String(parts[3]))
        }
    }
}

/// mosquitto_sub with a persistent session (QoS 1): once registered, the broker keeps every QoS 1
/// message for it (not the QoS 0 states), even while it is not connected or the broker restarts.
///
/// It also subscribes to a sentinel topic of its own, outside the feed: `drain()` publishes there and
/// waits for it, and since the broker delivers one subscriber's QoS 1 messages in the order it took
/// them, everything the broker had taken before has then arrived too. No quiet windows, no sleeps.
public final class Subscriber {
    public let broker: Broker
    public let id = "test-\(UUID().uuidString.prefix(8))"
    public let filter: String
    private var sentinel: String { "parkwise-test/sentinel/\(id)" }
    private var child: Child?

    public init(_ broker: Broker, filter: String = "parkwise/#") throws {
        self.broker = broker
        self.filter = filter
        // Register the session and subscriptions, then leave.
        let register = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-c", "-i", id, "-q", "1",
                                                            "-t", filter, "-t", sentinel, "-E"])
        guard register.wait(5) == 0 else { throw HarnessError("cannot register subscriber: \(register.stderr)") }
    }

    /// Connects and collects from now on (including what was queued while away).
    public func listen() throws {
        child = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-c", "-i", id, "-q", "1",
                                                     "-t", filter, "-t", sentinel, "-F", Received.format])
    }

    private var everything: [Received] { Received.parse(child?.stdout ?? "") }

    public var messages: [Received] { everything.filter { $0.topic != sentinel } }

    public func events() -> [[String: Any]] { messages.filter { $0.topic.hasSuffix("/events") }.map(\.json) }

    /// Waits until every message the broker took before this call has arrived here.
    public func drain() throws {
        let mark = "drained-\(UUID().uuidString.prefix(8))"
        try publish(broker, sentinel, mark)
        guard eventually(10, { everything.contains { $0.topic == sentinel && $0.payload == mark } }) else {
            throw HarnessError("subscriber \(id) never received its sentinel: \(child?.stderr ?? "not listening")")
        }
    }

    public func stop() {
        child?.signal(SIGTERM)
        _ = child?.wait(5)
    }
}

/// Retained messages on a topic filter, as a new subscriber sees them. The subscriber asks for the
/// filter and then for a retained marker topic of its own in one SUBSCRIBE: the broker sends the
/// filter's retained messages first, so once the marker is here, all of them are.
public func retainedMessages(_ broker: Broker, _ filter: String) throws -> [Received] {
    let marker = "parkwise-test/marker/\(UUID().uuidString.prefix(8))"
    try publish(broker, marker, "end", retain: true)
    defer { try? publish(broker, marker, "", retain: true) }   // an empty retained message clears it
    let child = try Child("/usr/bin/mosquitto_sub", ["-p", "\(broker.port)", "-t", filter, "-t", marker,
                                                     "-F", Received.format, "--retained-only"])
    let arrived = eventually(10) { Received.parse(child.stdout).contains { $0.topic == marker } }
    child.signal(SIGTERM)
    _ = child.wait(5)
    guard arrived else { throw HarnessError("the retained marker never came: \(child.stderr)") }
    return Received.parse(child.stdout).filter { $0.topic != marker }
}

public func publish(_ broker: Broker, _ topic: String, _ payload: String, retain: Bool = false) throws {
    let child = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload]
                          + (retain ? ["-r"] : []))
    guard child.wait(5) == 0 else { throw HarnessError("mosquitto_pub \(topic) failed: \(child.stderr)") }
}

/// mosquitto_pub, QoS 1 (retained with `retain`); its exit code, nil when it did not finish.
public func mosquittoPublish(_ broker: Broker, _ topic: String, _ payload: String, retain: Bool = false,
                             options: [String] = []) throws -> Int32? {
    let child = try Child("/usr/bin/mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload]
                          + (retain ? ["-r"] : []) + options)
    return child.wait(5)
}
