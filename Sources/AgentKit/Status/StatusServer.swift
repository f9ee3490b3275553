import SystemIO
import FoundationEssentials
import Glibc
import ParkWiseContract
import ParkWiseLog
import Synchronization

/// The local status endpoint: a unix socket whose one thread sleeps in poll(2) until a client
/// connects (no timer, no CPU while nobody asks). Each connection gets one answer: the client
/// sends `status\n`, the event loop builds the status (before its next input), this thread
/// encodes and writes it, and closes. Up to `clientLimit` clients at once, each on a non-blocking
/// descriptor with deadlines (`StatusConnection`): a client that says nothing or never reads holds
/// up nobody, neither the other clients nor the event loop.
final class StatusServer: Sendable {
    let path: String
    private let listener: Int32
    /// Written to wake the thread: by a stop, and by the event loop when it has answered.
    private let wake: (read: Int32, write: Int32)
    private let thread = Mutex<DedicatedThread?>(nil)
    /// Set by `stop`: the thread ends, requests still waiting for the event loop unanswered.
    private let stopping = Atomic<Bool>(false)
    private let ask: @Sendable (StatusRequest) -> Void

    /// Clients served at once; more wait in the listen queue.
    static let clientLimit = 16

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
            Log.warn("no status endpoint", ["path": path, "error": Errno.current.text])
            return nil
        }
        var addr = address
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o660) == 0, listen(fd, 16) == 0 else {
            Log.warn("no status endpoint", ["path": path, "error": Errno.current.text])
            close(fd)
            return nil
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            unlink(path)
            return nil
        }
        for end in pipeFDs {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)   // the event loop's notify never blocks
        }
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
        nameThread("status-socket")   // deploy/dev/status-cost.sh finds the thread by this name
        let notify: @Sendable () -> Void = { [wake] in
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
        var clients: [StatusConnection] = []
        defer { clients.forEach { close($0.fd) } }
        while true {
            var fds = [pollfd(fd: listener, events: clients.count < StatusServer.clientLimit ? Int16(POLLIN) : 0, revents: 0),
                       pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
                + clients.map { pollfd(fd: $0.fd, events: $0.events, revents: 0) }
            // Asleep until something happens; a deadline only while a client is being served.
            let n = retryingOnInterrupt {
                let timeout = clients.map(\.deadline).min().map { Int32(max(0, min(($0 - monotonicSeconds()) * 1000 + 1, 10_000))) } ?? -1
                return poll(&fds, nfds_t(fds.count), timeout)
            }
            if n < 0 { return }
            if n > 0 && fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                _ = read(wake.read, &drain, drain.count)
                if stopping.load(ordering: .acquiring) { return }
            }
            let now = monotonicSeconds()
            var kept: [StatusConnection] = []
            for (i, var client) in clients.enumerated() {
                if client.step(n > 0 ? fds[i + 2].revents : 0, now: now, ask: ask, notify: notify) {
                    kept.append(client)
                } else {
                    close(client.fd)
                }
            }
            clients = kept
            if n > 0 && fds[0].revents & Int16(POLLIN) != 0 {
                let fd = accept(listener, nil, nil)
                if fd >= 0 {
                    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                    clients.append(StatusConnection(fd: fd, now: now))
                }
            }
        }
    }
}
