import AgentStatus
import FoundationEssentials
import Glibc
import ParkWiseContract
import ParkWiseLog
import Synchronization
import Uplink

/// The local status endpoint: a unix socket whose one thread sleeps in poll(2) until a client
/// connects (no timer, no CPU while nobody asks). Each connection gets one answer: the client
/// sends `status\n`, the event loop builds the status, this thread encodes and writes it, and
/// closes. Bounded: a request of at most `StatusSocket.requestLimit` bytes, one second to send it,
/// a few seconds to read the answer; a client that never reads costs this thread a timeout, never
/// the event loop.
final class StatusServer: Sendable {
    let path: String
    private let listener: Int32
    /// Written once to wake the thread for a stop.
    private let wake: (read: Int32, write: Int32)
    private let thread = Mutex<DedicatedThread?>(nil)
    /// Set by `stop`: a request still waiting for the event loop (which has ended) gives up.
    private let stopping = Atomic<Bool>(false)
    private let ask: @Sendable (StatusRequest) -> Void

    /// Seconds the thread gives a client to send its request, and to take the answer.
    static let readTimeout = 1.0
    static let writeTimeout = 2.0
    /// Seconds it waits for the event loop (behind a backlog of line changes, say).
    static let loopTimeout = 3.0

    /// Listens on `path` (mode 0660: the service's group may ask); nil, with the reason logged, when
    /// it cannot (the agent runs on without it).
    static func start(path: String, ask: @escaping @Sendable (StatusRequest) -> Void) -> StatusServer? {
        guard let address = StatusSocket.address(path) else {
            Log.warn("status socket path too long, no status endpoint", ["path": path, "limit": StatusSocket.pathLimit])
            return nil
        }
        if let problem = clearStale(path) {
            Log.warn("no status endpoint", ["path": path, "problem": problem])
            return nil
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            Log.warn("no status endpoint", ["path": path, "error": String(cString: strerror(errno))])
            return nil
        }
        var addr = address
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o660) == 0, listen(fd, 16) == 0 else {
            Log.warn("no status endpoint", ["path": path, "error": String(cString: strerror(errno))])
            close(fd)
            return nil
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            unlink(path)
            return nil
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let server = StatusServer(path: path, listener: fd, wake: (pipeFDs[0], pipeFDs[1]), ask: ask)
        server.thread.withLock { $0 = DedicatedThread { [server] in server.run() } }
        Log.info("status endpoint listening", ["path": path])
        return server
    }

    private init(path: String, listener: Int32, wake: (read: Int32, write: Int32), ask: @escaping @Sendable (StatusRequest) -> Void) {
        self.path = path
        self.listener = listener
        self.wake = wake
        self.ask = ask
    }

    /// A socket file left by an agent that did not stop cleanly is removed; a live one, or anything
    /// that is not a socket, is left alone (the reason is returned).
    private static func clearStale(_ path: String) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else { return "\(path) exists and is not a socket: move it away" }
        if case .success = StatusClient.request(path: path, timeout: 1) {
            return "another agent answers on \(path)"
        }
        unlink(path)
        return nil
    }

    /// Ends the thread and removes the socket.
    func stop() {
        stopping.store(true, ordering: .releasing)
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        let t = thread.withLock { t in defer { t = nil }; return t }
        t?.join()
        close(listener)
        close(wake.read)
        close(wake.write)
        unlink(path)
    }

    private func run() {
        // Named as ps -L and /proc/PID/task/*/comm show it (pthread_setname_np is not in Swift's Glibc).
        let comm = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        if comm >= 0 {
            _ = DurableFile.writeAll(comm, Array("status-socket".utf8))
            close(comm)
        }
        var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        while true {
            let n = poll(&fds, 2, -1)
            if n < 0 && errno == EINTR { continue }
            if n < 0 || fds[1].revents != 0 { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            serve(client)
            close(client)
        }
    }

    private func serve(_ client: Int32) {
        StatusSocket.setTimeouts(client, seconds: StatusServer.readTimeout)
        let request = readRequest(client)
        let answer: [UInt8]
        switch request {
        case "status":
            let pending = StatusRequest()
            ask(pending)
            if let status = waitForLoop(pending) {
                answer = StatusServer.encode(status)
            } else {
                answer = StatusServer.error("the agent's event loop did not answer within \(Int(StatusServer.loopTimeout)) s (stopping or overloaded)")
            }
        case nil:
            return   // nothing asked in time
        default:
            answer = StatusServer.error("unknown request; send \"status\" and a newline")
        }
        StatusSocket.setTimeouts(client, seconds: StatusServer.writeTimeout)
        writeAll(client, answer)
    }

    /// The event loop's answer, waited for in short steps so that a stop does not wait for it.
    private func waitForLoop(_ request: StatusRequest) -> AgentStatus? {
        let until = monotonicSeconds() + StatusServer.loopTimeout
        while !stopping.load(ordering: .acquiring) && monotonicSeconds() < until {
            if let status = request.wait(seconds: 0.1) { return status }
        }
        return nil
    }

    /// The request line, without its newline; nil when none came in time or it is too long.
    private func readRequest(_ client: Int32) -> String? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: StatusSocket.requestLimit)
        while bytes.count <= StatusSocket.requestLimit {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count - bytes.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer[..<n]
            if bytes.contains(UInt8(ascii: "\n")) { break }
        }
        guard !bytes.isEmpty, bytes.count <= StatusSocket.requestLimit else { return bytes.isEmpty ? nil : "" }
        let line = bytes.prefix { $0 != UInt8(ascii: "\n") }
        return String(decoding: line, as: UTF8.self).filter { !$0.isWhitespace }
    }

    /// Writes until done, the client closes, or a send times out (the client does not read).
    private func writeAll(_ client: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(client, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    static func encode(_ status: AgentStatus) -> [UInt8] { WireJSON.encode(status) + [UInt8(ascii: "\n")] }

    static func error(_ message: String) -> [UInt8] {
        WireJSON.encode(["error": message]) + [UInt8(ascii: "\n")]
    }
}
