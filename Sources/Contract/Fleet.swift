/// One board of a site as the fleet view shows it: what its retained `status` says (or, for the bridge, what
/// `sensor_devices` kept of it), and since when. Shared by `parkwise-agent monitor --fleet` and `parkwise-bridge fleet`.
public struct FleetBoard: Sendable {
    public var site: String
    public var device: String
    public var online: Bool
    /// Unix seconds since when it is online (the status's `since`) or offline (when known: the bridge saw the will).
    public var since: Int64?
    /// Unix seconds of the newest sign of life: the status's `at` (the device's clock), or for the bridge the time
    /// it last applied a status or an event of this board.
    public var heardAt: Int64?
    /// The last online status the board sent (version, boot, outbox, clock, faults); for an offline board what it
    /// said before it went (the bridge keeps it; a retained last will replaces it on the broker).
    public var status: StatusPayload?
    /// The boot of the newest status, the will's included.
    public var boot: UInt64?
    /// Revoked on the broker host (the bridge's register): nothing of it is applied any more.
    public var revoked = false
    /// Spot reports the bridge refused because the site's register gives the spot to another device (or to none):
    /// how many, and one such spot with its owner then, e.g. `P1-A-01 (owner p1-north)`.
    public var refused: (reports: Int64, example: String)?

    public init(site: String, device: String, online: Bool, since: Int64? = nil, heardAt: Int64? = nil,
                status: StatusPayload? = nil, boot: UInt64? = nil) {
        self.site = site
        self.device = device
        self.online = online
        self.since = since
        self.heardAt = heardAt
        self.status = status
        self.boot = boot ?? status?.boot
    }

    /// A board as its retained status says it (what a subscriber sees). `published`: when the broker says the status
    /// was published (its message expiry, MQTT 5), Unix seconds of the reader's clock: the evidence of its age, whatever
    /// the board's clock. Without it the status's `at` is the board's clock: one that NTP has not set (`clock:
    /// unsynced`) tells nothing of how old the status is, so such a board is then never called stale.
    public init(site: String, device: String, retained status: StatusPayload, published: Int64? = nil) {
        let online = status.state == "online"
        self.init(site: site, device: device, online: online,
                  since: online ? status.since.flatMap(WireTime.unixSeconds) : nil,
                  heardAt: online ? published ?? (status.clock != "unsynced" ? status.at.flatMap(WireTime.unixSeconds) : nil) : nil,
                  status: online ? status : nil, boot: status.boot)
    }

    /// Online, but nothing heard from it for longer than `staleAfter` seconds.
    public func isStale(now: Int64, staleAfter: Int64) -> Bool {
        guard online, let heardAt else { return false }
        return now - heardAt > staleAfter
    }
}

/// The fleet as a table, one line a board (its notes indented under it), sorted by site and device, and a summary line.
public enum FleetTable {
    public static let header = ["DEVICE", "STATE", "FOR", "VERSION", "BOOT", "OUTBOX", "OLDEST", "FAULTED", "CLOCK"]

    /// The table's lines (header first, the summary last); `now` and `staleAfter` in seconds.
    public static func lines(_ boards: [FleetBoard], now: Int64, staleAfter: Int64) -> [String] {
        let sorted = boards.sorted { ($0.site, $0.device) < ($1.site, $1.device) }
        let multiSite = Set(sorted.map(\.site)).count > 1
        var rows = [header]
        var allNotes: [String] = []
        var online = 0, offline = 0, stale = 0, twins = 0, revoked = 0
        for board in sorted {
            let isStale = !board.revoked && board.isStale(now: now, staleAfter: staleAfter)
            if board.revoked { revoked += 1 } else if isStale { stale += 1 } else if board.online { online += 1 } else { offline += 1 }
            let s = board.status
            var notes: [String] = []
            // Two boards on one device id: first, it is what a technician must go and fix (their events mix).
            if let conflict = s?.idConflict, board.online {
                twins += 1
                notes.append("DEVICE ID CONFLICT: \(conflict)")
            }
            // A board that speaks for spots it does not own: misconfigured (a wrong spot list) or not what it says.
            if let refused = board.refused {
                notes.append("\(refused.reports) spot report\(refused.reports == 1 ? "" : "s") refused, e.g. \(refused.example)")
            }
            if isStale, let heard = board.heardAt { notes.append("nothing heard for \(age(now - heard))") }
            if let fault = s?.storageFault, board.online { notes.append("storage: \(fault)") }
            if let refused = s?.publishRefused, board.online { notes.append("broker refuses its events: \(refused)") }
            // FOR counts from the agent's start: a link that dropped since is said, or "online 3h" hides it.
            if let n = s?.reconnects, n > 0, board.online { notes.append("reconnected \(n == 1 ? "once" : "\(n) times")") }
            if let mode = s?.mode { notes.append("\(mode) feed") }
            if !board.online, !board.revoked, s != nil { notes.append("last known") }
            rows.append([
                multiSite ? "\(board.site)/\(board.device)" : board.device,
                board.revoked ? "REVOKED" : isStale ? "STALE" : board.online ? "online" : "OFFLINE",
                board.since.map { age(now - $0) } ?? "-",
                s?.version ?? "-",
                board.boot.map(String.init) ?? "-",
                s?.outboxDepth.map(String.init) ?? "-",
                s?.outboxOldestAgeSeconds.map { age(Int64($0)) } ?? "-",
                s?.faultedInputs.map(String.init) ?? "-",
                s?.clock ?? "-",
            ])
            allNotes.append(notes.joined(separator: "; "))
        }
        // A terminal's 80 columns: the columns on the board's line, its notes on indented lines of their own under it.
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        var lines: [String] = []
        for (index, row) in rows.enumerated() {
            lines.append(row.indices.map { pad(row[$0], widths[$0]) }.joined(separator: "  ").trimmingTrailingSpaces)
            if index > 0, !allNotes[index - 1].isEmpty { lines += wrap(allNotes[index - 1], indent: "  ", then: "    ") }
        }
        lines += wrap("\(sorted.count) board\(sorted.count == 1 ? "" : "s"): \(online) online, \(offline) offline, \(stale) stale"
                      + (revoked > 0 ? ", \(revoked) revoked" : "")
                      + " (stale: nothing heard for more than \(age(staleAfter)))"
                      + (twins > 0 ? "; \(twins) with a device id another board also uses (see its note)" : ""), indent: "", then: "  ")
        return lines
    }

    /// A terminal's width: a board's notes and the summary are wrapped to it.
    public static let width = 80

    /// The words of `text` on lines of at most `width` columns, the first starting with `indent`, the others with
    /// `then` (a longer word alone on its line).
    public static func wrap(_ text: String, indent: String, then: String) -> [String] {
        var lines: [String] = []
        var line = indent, start = indent.count
        for word in text.split(separator: " ") {
            if line.count > start, line.count + 1 + word.count > width {
                lines.append(line)
                (line, start) = (then, then.count)
            }
            line += (line.count > start ? " " : "") + word
        }
        if line.count > start { lines.append(line) }
        return lines
    }

    /// `45s`, `12m`, `3h05m`, `2d04h`: how long ago, or an age.
    public static func age(_ seconds: Int64) -> String {
        let s = max(seconds, 0)
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m" }
        if s < 86_400 { return "\(s / 3600)h" + two(s / 60 % 60) + "m" }
        return "\(s / 86_400)d" + two(s / 3600 % 24) + "h"
    }

    private static func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

extension String {
    fileprivate var trimmingTrailingSpaces: String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}

extension WireTime {
    /// Unix seconds of an ISO-8601 UTC time as the wire writes it (`2026-12-02T14:23:40.123Z`, fraction optional),
    /// or of PostgreSQL's text form of a timestamptz in UTC (`2026-12-02 14:23:40.123+00`); nil for anything else.
    public static func unixSeconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 19, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "), b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ from: Int, _ count: Int) -> Int64? {
            var n: Int64 = 0
            for i in from..<from + count {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                n = n * 10 + Int64(b[i] - 48)
            }
            return n
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let h = number(11, 2), let m = number(14, 2), let s = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), h < 24, m < 60, s < 61 else { return nil }
        let zone = b[19...].drop(while: { $0 == UInt8(ascii: ".") || ($0 >= 48 && $0 <= 57) })
        guard zone.elementsEqual("Z".utf8) || zone.elementsEqual("+00".utf8) || zone.elementsEqual("+00:00".utf8) else {
            return nil
        }
        return unixSeconds(year: year, month: month, day: day) + h * 3600 + m * 60 + s
    }

    /// Unix seconds at the start of a civil date (UTC; Howard Hinnant's algorithm).
    public static func unixSeconds(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return (era * 146_097 + doe - 719_468) * 86_400
    }
}
