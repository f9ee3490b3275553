import Glibc
import ParkWiseContract

/// The reply to `cmd/diag`: the status (as on the status socket) and the local checks that cost
/// nothing to make, size-bounded: past `limit` bytes the per-input and per-spot lists are cut
/// down, and `truncated` says what was left out.
struct DiagReply: Encodable {
    var command = "diag"
    var id: String?
    var ok = true
    var diag: Diag

    struct Diag: Encodable {
        var status: AgentStatus
        var checks: Checks
        var truncated: String?
    }

    struct Checks: Encodable {
        /// The kernel says NTP has set the wall clock.
        var clockSynced: Bool
        /// The outbox directory: may the agent write there, and the space left to it.
        var outboxWritable: Bool
        var outboxFreeBytes: UInt64?

        enum CodingKeys: String, CodingKey {
            case clockSynced = "clock_synced", outboxWritable = "outbox_writable", outboxFreeBytes = "outbox_free_bytes"
        }

        static func measure(outbox path: String) -> Checks {
            var fs = statvfs()
            let free = statvfs(path, &fs) == 0 ? UInt64(fs.f_bavail) * UInt64(fs.f_frsize) : nil
            return Checks(clockSynced: AgentClock.wallClockSynchronized(), outboxWritable: access(path, W_OK) == 0,
                          outboxFreeBytes: free)
        }
    }

    /// The largest reply sent (brokers' message limits are often 256 KB or more; a campus of 156
    /// spots fits whole).
    static let limit = 96 * 1024

    static func encode(id: String?, status: AgentStatus) -> [UInt8] {
        let checks = Checks.measure(outbox: status.outbox.path)
        var reply = DiagReply(id: id, diag: Diag(status: status, checks: checks))
        var bytes = WireJSON.encode(reply)
        guard bytes.count > limit else { return bytes }
        // First only what needs looking at: inputs not ok or never changed, spots not known.
        reply.diag.status.inputs = status.inputs.filter { $0.health != "ok" || $0.changes == 0 }
        reply.diag.status.spots = status.spots.filter { $0.state == "unknown" }
        reply.diag.truncated = "over \(limit) bytes: inputs limited to those faulted or never changed, spots to unknown ones; "
            + "the whole status: parkwise-agent status on the device"
        bytes = WireJSON.encode(reply)
        guard bytes.count > limit else { return bytes }
        reply.diag.status.inputs = []
        reply.diag.status.spots = []
        reply.diag.truncated = "over \(limit) bytes: inputs and spots left out (\(status.faultedInputs) inputs faulted); "
            + "the whole status: parkwise-agent status on the device"
        return WireJSON.encode(reply)
    }
}

extension DiagReply.Diag {
    enum CodingKeys: String, CodingKey { case status, checks, truncated }
}
