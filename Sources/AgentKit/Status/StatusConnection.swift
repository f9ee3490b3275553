import Glibc
import ParkWiseContract
import SystemIO

/// One client of the status socket, on a non-blocking descriptor, moved on by the socket thread
/// whenever poll(2) says it can be or its deadline passes: it reads the request line, waits for
/// the event loop's answer, writes it, and is closed. Every phase has a deadline.
struct StatusConnection {
    enum Phase {
        case reading([UInt8])
        case waiting(StatusRequest)
        case writing([UInt8], written: Int)
    }

    let fd: Int32
    private(set) var phase: Phase = .reading([])
    private(set) var deadline: Double

    /// Seconds a client has to send its request, the event loop to answer (behind a backlog of
    /// line changes, say), and the client to take the answer.
    static let readTimeout = 1.0
    static let loopTimeout = 3.0
    static let writeTimeout = 2.0

    init(fd: Int32, now: Double) {
        self.fd = fd
        deadline = now + StatusConnection.readTimeout
    }

    /// What poll(2) should wait for on it.
    var events: Int16 {
        switch phase {
        case .reading: return Int16(POLLIN)
        case .waiting: return 0
        case .writing: return Int16(POLLOUT)
        }
    }

    /// Moves on with what poll reported; false when the connection is done (to be closed).
    mutating func step(_ revents: Int16, now: Double, ask: (StatusRequest) -> Void,
                       notify: @escaping @Sendable () -> Void) -> Bool {
        switch phase {
        case .reading(var bytes):
            if revents != 0 {
                var buffer = [UInt8](repeating: 0, count: StatusSocket.requestLimit + 1 - bytes.count)
                let n = retryingOnInterrupt { buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) } }
                if n < 0 && Errno.current != .wouldBlock { return false }
                if n > 0 { bytes += buffer[..<n] }
                if n == 0 || bytes.contains(UInt8(ascii: "\n")) || bytes.count > StatusSocket.requestLimit {
                    guard !bytes.isEmpty else { return false }
                    take(bytes, now: now, ask: ask, notify: notify)
                    return true
                }
                phase = .reading(bytes)
            }
            return now < deadline   // nothing asked in time: closed unanswered
        case .waiting(let request):
            // poll(2) reports a hang-up even when asked for nothing: a client gone while the loop builds its answer
            // is closed now, or poll would return at once, round after round, until the loop answers.
            if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { return false }
            if let status = request.answered {
                answer(WireJSON.encode(status) + [UInt8(ascii: "\n")], now: now)
            } else if now >= deadline {
                answer(StatusConnection.error("the agent's event loop did not answer within "
                                              + "\(Int(StatusConnection.loopTimeout)) s (stopping or overloaded)"), now: now)
            }
            return true
        case .writing(let bytes, var written):
            if revents != 0 {
                let n = retryingOnInterrupt {
                    bytes.withUnsafeBytes { send(fd, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                }
                if n < 0 && Errno.current != .wouldBlock { return false }
                if n > 0 { written += n }
                if written == bytes.count { return false }
                phase = .writing(bytes, written: written)
            }
            return now < deadline   // a client that does not read is given up
        }
    }

    private mutating func take(_ bytes: [UInt8], now: Double, ask: (StatusRequest) -> Void,
                               notify: @escaping @Sendable () -> Void) {
        guard bytes.count <= StatusSocket.requestLimit else {
            return answer(StatusConnection.error("request longer than \(StatusSocket.requestLimit) bytes"), now: now)
        }
        let line = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self).filter { !$0.isWhitespace }
        guard line == "status" else {
            return answer(StatusConnection.error("unknown request; send \"status\" and a newline"), now: now)
        }
        let request = StatusRequest(notify: notify)
        phase = .waiting(request)
        deadline = now + StatusConnection.loopTimeout
        ask(request)
    }

    private mutating func answer(_ bytes: [UInt8], now: Double) {
        phase = .writing(bytes, written: 0)
        deadline = now + StatusConnection.writeTimeout
    }

    static func error(_ message: String) -> [UInt8] {
        WireJSON.encode(["error": message]) + [UInt8(ascii: "\n")]
    }
}
