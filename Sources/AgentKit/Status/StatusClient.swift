import SystemIO
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// Asks a running agent for its status over the local socket: connect, send the request, read the
/// answer, all within a deadline. For `status`, `status --watch` and `doctor`.
public enum StatusClient {

    /// The status of the agent on `path`, refused when it is another board's than the one asked about (`expected`:
    /// site and device of the config named): a technician must never read one board's health as another's.
    public static func fetch(path: String, expecting expected: (site: String, device: String)?, config: String?,
                             timeout: Double = 3) -> Result<AgentStatus, StatusClientError> {
        let result = fetch(path: path, timeout: timeout)
        guard case .success(let status) = result, let expected, (status.site, status.device) != expected else { return result }
        return .failure(StatusClientError(kind: .otherBoard, path: path,
                                message: "the agent answering on \(path) is \(status.site)/\(status.device), not "
                                    + "\(expected.site)/\(expected.device) of \(config ?? "the config"): that one is not running here",
                                hint: "start it (parkwise-agent run --config \(config ?? "FILE")), or ask the running one without --config"))
    }

    /// The largest answer read (a campus of 156 spots answers with about 60 KB).
    public static let answerLimit = 8 << 20

    /// The status of the agent listening on `path`, within `timeout` seconds.
    public static func fetch(path: String, timeout: Double = 3) -> Result<AgentStatus, StatusClientError> {
        switch request(path: path, timeout: timeout) {
        case .failure(let failure): return .failure(failure)
        case .success(let bytes):
            let decoder = JSONDecoder()
            if let status = try? decoder.decode(AgentStatus.self, from: Data(bytes)) { return .success(status) }
            let problem = (try? decoder.decode(ErrorAnswer.self, from: Data(bytes)))?.error
            return .failure(StatusClientError(kind: .badAnswer, path: path,
                                    message: problem.map { "the agent on \(path) could not answer: \($0)" }
                                        ?? "the answer from \(path) is not a status (\(bytes.count) bytes)",
                                    hint: problem == nil ? "is this a parkwise-agent of the same version? (parkwise-agent version)"
                                        : "try again; if it persists, see the agent's log (journalctl -u parkwise-agent)"))
        }
    }

    /// The first of `paths` where a socket exists, else the first of them (so the error names it).
    public static func locate(_ paths: [String]) -> String {
        paths.first { path in
            var st = stat()
            return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFSOCK
        } ?? paths.first ?? StatusSocket.serviceDirectory + "/" + StatusSocket.fileName
    }

    struct ErrorAnswer: Decodable { var error: String }

    /// The raw answer to one request.
    public static func request(path: String, timeout: Double = 3) -> Result<[UInt8], StatusClientError> {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(failure(.current, path)) }
        defer { close(fd) }
        StatusSocket.setTimeouts(fd, seconds: timeout)
        if let refused = StatusSocket.connect(fd, to: path) { return .failure(failure(refused, path)) }
        let deadline = now() + timeout
        var request = Array(StatusSocket.request.utf8)
        let sent = request.withUnsafeMutableBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else { return .failure(failure(.current, path)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            // Each recv is bounded by SO_RCVTIMEO; an interrupted one is made again.
            let n = retryingOnInterrupt { buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) } }
            if n == 0 { break }
            if n < 0 {
                let errno = Errno.current
                return .failure(failure(errno == .wouldBlock ? .timedOut : errno, path))
            }
            answer.append(contentsOf: buffer[..<n])
            if answer.count > answerLimit {
                return .failure(StatusClientError(kind: .badAnswer, path: path, message: "the answer from \(path) exceeds \(answerLimit) bytes",
                                        hint: "is this a parkwise-agent's status socket?"))
            }
            if now() > deadline { return .failure(failure(.timedOut, path)) }
        }
        return .success(answer)
    }

    static func failure(_ code: Errno, _ path: String) -> StatusClientError {
        switch code {
        case .noEntry, Errno(ENOTDIR):
            return StatusClientError(kind: .noAgent, path: path, message: "no agent is running: \(path) does not exist",
                           hint: "start it (systemctl start parkwise-agent, or parkwise-agent run --config FILE); "
                               + "a run by hand listens in its outbox directory: give the same --config (and --outbox), or --socket PATH",
                           errno: code)
        case .connectionRefused:
            return StatusClientError(kind: .refused, path: path, message: "no agent is answering on \(path) (connection refused: it stopped or crashed)",
                           hint: "see systemctl status parkwise-agent and journalctl -u parkwise-agent; start it again", errno: code)
        case .permissionDenied, .notPermitted:
            return StatusClientError(kind: .permission, path: path, message: "permission denied on \(path)",
                           hint: "the socket is readable by the service's group: add yourself to it "
                               + "(sudo usermod -aG parkwise $USER, then log in again), or use sudo", errno: code)
        case .timedOut:
            return StatusClientError(kind: .timeout, path: path, message: "the agent on \(path) did not answer in time",
                           hint: "it may be overloaded or hung; see journalctl -u parkwise-agent (the watchdog restarts a hung agent)",
                           errno: code)
        case .nameTooLong:
            return StatusClientError(kind: .other, path: path, message: "\(path) is longer than a unix socket path may be (107 bytes)",
                           hint: "use a shorter outbox directory", errno: code)
        default:
            return StatusClientError(kind: .other, path: path, message: "cannot ask \(path): \(code)",
                           hint: "check that \(path) is the agent's status socket", errno: code)
        }
    }

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Why no status came, with what to do about it.
public struct StatusClientError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable { case noAgent, refused, permission, timeout, badAnswer, otherBoard, other }
    public var kind: Kind
    public var path: String
    public var message: String
    public var hint: String
    public var errno: Errno?

    public var description: String { "error: \(message)\n    hint: \(hint)" }
}
