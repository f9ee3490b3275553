import CMosquitto
#if canImport(Glibc)
import Glibc
#endif

/// The network rounds of one connection, for whichever thread runs them: the link's own, or (hosted) the thread of
/// the agent's event loop, so that a PUBACK is read where it is used, with no hop between threads. It says what to
/// poll the socket for and when a round is due without it (the connect timeout, then the keepalive), and runs a
/// round: read, write what is queued, ping when the keepalive is due, and hand on what the callbacks reported.
/// Every time is the caller's one clock reading for the wake-up (monotonic milliseconds).
struct LinkIO: Sendable {
    enum Round: Equatable {
        case carryOn
        /// The broker accepted the connection (CONNACK 0) in this round.
        case becameUp
        case lost(String)
    }

    let connection: MosquittoConnection
    private let keepalive: Int64
    private let connectDeadline: Int64
    private(set) var up = false
    private var lastRead: Int64
    private var lastWrite: Int64
    private var received: UInt64

    init(connection: MosquittoConnection, keepaliveSeconds: Int, now: Int64) {
        self.connection = connection
        keepalive = Int64(keepaliveSeconds) * 1000
        connectDeadline = now + Int64(max(keepaliveSeconds, 10)) * 1000
        lastRead = now
        lastWrite = now
        received = connection.received
    }

    /// What to poll the socket for.
    var events: Int16 { Int16(POLLIN) | (connection.wantsWrite ? Int16(POLLOUT) : 0) }

    /// When a round is due even if the socket stays quiet: at once when a publish wrote what an earlier one queued
    /// (what that reported is handed on by a round); else the timer's.
    var due: Int64? { connection.hasEvents ? 0 : timerDue }

    /// The connect timeout until the broker answers, then a keepalive after the last read or write (nil: no
    /// keepalive, nothing due).
    private var timerDue: Int64? {
        guard up else { return connectDeadline }
        return keepalive > 0 ? min(lastWrite, lastRead) + keepalive + 1000 : nil
    }

    /// The broker's CONNACK refusal in words: MQTT 3.1.1's codes (1 to 5), or MQTT 5's reason codes (0x80 and up).
    private var refusal: String {
        let code = connection.connack
        let words = code >= 0x80 ? MosquittoConnection.describeReason(code) : MosquittoConnection.describeConnack(code)
        return "broker refused the connection: \(words)"
    }

    /// One round after a poll: `revents` are the socket's (0 when the poll timed out); what the callbacks reported
    /// goes to `deliver`, together.
    mutating func round(revents: Int16, now: Int64, deliver: ([LinkEvent]) -> Void) -> Round {
        // Whatever the round (or a publish since the last one) brought: PUBACKs, messages, QoS 0 publishes written.
        defer {
            let events = connection.takeEvents()
            if !events.isEmpty { deliver(events) }
        }
        let dueBefore = timerDue
        if revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            let rc = connection.loopRead()
            lastRead = now
            if connection.received != received {
                received = connection.received
                lastWrite = now   // QoS 1 publishes were answered with PUBACKs
            }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                // A broker that refused the CONNECT closes at once: its CONNACK says why, not the closed socket.
                if !up, connection.connack > 0 { return .lost(refusal) }
                return .lost(MosquittoConnection.describe(rc))
            }
            // An MQTT 5 DISCONNECT from the broker: libmosquitto closed the socket and the read still succeeded.
            if connection.socket < 0 {
                return .lost(connection.disconnectReason.map { "the broker disconnected: \(MosquittoConnection.describeReason($0))" }
                             ?? "connection closed")
            }
        }
        if connection.wantsWrite {
            let rc = connection.loopWrite()
            lastWrite = now
            if rc != MOSQ_ERR_SUCCESS.rawValue { return .lost(MosquittoConnection.describe(rc)) }
        }
        let connack = connection.connack
        if !up {
            if connack == 0 {
                up = true
                lastRead = now
                return .becameUp
            }
            if connack > 0 { return .lost(refusal) }
            return now > connectDeadline ? .lost("no answer from the broker (timed out)") : .carryOn
        }
        if keepalive > 0, let dueBefore, now >= dueBefore {
            // A PINGREQ (written next round), or the end of a connection whose last PINGRESP never came.
            let rc = connection.loopMisc()
            if rc != MOSQ_ERR_SUCCESS.rawValue { return .lost(MosquittoConnection.describe(rc)) }
            // libmosquitto counts a ping as a read too. Had it seen a later write than this thread knows of,
            // it sent no ping: look again in half a keepalive.
            lastRead = now
            if !connection.wantsWrite { lastWrite = now - keepalive / 2 }
        }
        return .carryOn
    }
}
