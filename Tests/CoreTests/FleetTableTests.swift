import ParkWiseContract
import ParkWiseCore
import Testing

/// The pieces of issue 25 that need no broker or database: the placeholder export-config leaves for an input, and the
/// fleet table's rules (times read back, ages, what is stale).
@Suite struct FleetTableTests {
    /// `input: UNSET` (what export-config writes) and an empty input are both "input not set", at the input's line.
    @Test(arguments: ["input: UNSET", "input: \"UNSET\"", "input: null", "input: ~"])
    func aSpotWhoseInputIsNotSetIsRefusedAtItsLine(input: String) {
        let found = issues(minimal.replacingOccurrences(of: "input: GPIO22", with: input))
        #expect(found.map(\.message) == ["spot P2-A-01: input not set"], "\(found)")
        #expect(found.first?.mark.line == 9)
        #expect(found.first?.hint?.contains("1-0020:GPA0") == true)
    }

    @Test func wireTimesReadBackToTheSecond() {
        for ns: Int64 in [0, 1_764_684_220_123_000_000, 951_782_400_000_000_000, 4_102_444_799_999_000_000] {
            #expect(WireTime.unixSeconds(WireTime.format(unixNanoseconds: ns)) == ns / 1_000_000_000)
        }
        #expect(WireTime.unixSeconds("2026-12-02 14:23:40.5+00") == WireTime.unixSeconds("2026-12-02T14:23:40Z"))
        for bad in ["", "2026-12-02", "2026-13-02T14:23:40Z", "2026-12-02T14:23:40+05", "2026-12-02T14:23:40.1Zx", "yesterday"] {
            #expect(WireTime.unixSeconds(bad) == nil, "\(bad)")
        }
    }

    @Test func agesAreShortAndNeverNegative() {
        #expect([-5, 0, 59, 60, 3599, 3600, 3_660, 86_399, 86_400, 180_000].map { FleetTable.age(Int64($0)) }
                == ["0s", "0s", "59s", "1m", "59m", "1h00m", "1h01m", "23h59m", "1d00h", "2d02h"])
    }

    /// Online and heard within the limit: online; online but silent past it: STALE; offline is never stale.
    @Test func onlyAnOnlineBoardHeardTooLongAgoIsStale() {
        var status = StatusPayload(state: "online", version: "0.2.0", boot: 3, since: "2026-12-02T10:00:00.000Z")
        status.at = "2026-12-02T11:50:00.000Z"
        status.outboxDepth = 12
        status.clock = "unsynced"
        let now = WireTime.unixSeconds("2026-12-02T12:00:00Z")!
        // Its own clock not set: its `at` says nothing of the status's age.
        #expect(FleetBoard(site: "s", device: "unset", retained: status).heardAt == nil)
        // Unless the broker says when it was published (MQTT 5 message expiry): its evidence, whatever the board's clock.
        let aged = FleetBoard(site: "s", device: "unset", retained: status, published: now - 900)
        #expect(aged.heardAt == now - 900 && aged.isStale(now: now, staleAfter: 600))
        #expect(StatusPayload.ageSeconds(remaining: UInt32.max - 900) == 900 && StatusPayload.ageSeconds(remaining: nil) == nil)
        #expect(StatusPayload.ageSeconds(remaining: 60) == nil, "another interval than the status's says nothing of its age")
        status.clock = "synced"
        let fresh = FleetBoard(site: "s", device: "fresh", retained: status)
        #expect(fresh.since == now - 7200 && fresh.heardAt == now - 600 && fresh.boot == 3)
        #expect(!fresh.isStale(now: now, staleAfter: 600) && fresh.isStale(now: now, staleAfter: 599))
        let gone = FleetBoard(site: "s", device: "gone", retained: StatusPayload(state: "offline", boot: 2))
        #expect(!gone.online && gone.boot == 2 && !gone.isStale(now: now, staleAfter: 1))
        let lines = FleetTable.lines([gone, fresh], now: now, staleAfter: 300)
        #expect(lines[0].hasPrefix("DEVICE  STATE    FOR"), "\(lines)")
        #expect(lines[1].split(separator: " ", omittingEmptySubsequences: true) ==
                ["fresh", "STALE", "2h00m", "0.2.0", "3", "12", "-", "-", "synced"], "\(lines)")
        #expect(lines[2] == "  nothing heard for 10m", "\(lines)")
        #expect(lines[3].split(separator: " ", omittingEmptySubsequences: true) == ["gone", "OFFLINE", "-", "-", "2", "-", "-", "-", "-"],
                "\(lines)")
        #expect(lines[4] == "2 boards: 0 online, 1 offline, 1 stale (stale: nothing heard for more than 5m)")
    }

    /// FOR counts from the agent's start: a board whose link dropped since says so in its note (issue 33: "online 3m"
    /// hid a reconnect); one that never dropped says nothing of it.
    @Test func aReconnectIsShownBesideHowLongTheBoardIsOnline() {
        var status = StatusPayload(state: "online", version: "0.2.0", boot: 5, since: "2026-12-02T09:00:00.000Z")
        status.at = "2026-12-02T11:59:00.000Z"
        status.clock = "synced"
        status.reconnects = 3
        let now = WireTime.unixSeconds("2026-12-02T12:00:00Z")!
        let dropped = FleetBoard(site: "s", device: "dropped", retained: status)
        status.reconnects = 1
        let once = FleetBoard(site: "s", device: "once", retained: status)
        status.reconnects = 0
        let steady = FleetBoard(site: "s", device: "steady", retained: status)
        let lines = FleetTable.lines([dropped, once, steady], now: now, staleAfter: 600)
        #expect(lines[1].hasPrefix("dropped") && lines[1].hasSuffix("synced") && lines[2] == "  reconnected 3 times", "\(lines)")
        #expect(lines[3].hasPrefix("once") && lines[4] == "  reconnected once", "\(lines)")
        #expect(lines[5].hasPrefix("steady") && lines[6].hasPrefix("3 boards"), "\(lines)")
    }

    /// A board whose status says another board uses its device id says so first in its note, and the summary counts it.
    @Test func aDeviceIdConflictIsNamedFirstAndCounted() {
        var status = StatusPayload(state: "online", version: "0.2.0", boot: 5, since: "2026-12-02T11:00:00.000Z")
        status.at = "2026-12-02T11:59:00.000Z"
        status.clock = "synced"
        status.storageFault = "disk full"
        status.idConflict = "the broker gave this device's connection to another client 6 times"
        let now = WireTime.unixSeconds("2026-12-02T12:00:00Z")!
        let twin = FleetBoard(site: "s", device: "twin", retained: status)
        status.idConflict = nil
        let calm = FleetBoard(site: "s", device: "calm", retained: status)
        let lines = FleetTable.lines([twin, calm], now: now, staleAfter: 600)
        #expect(lines[1].hasPrefix("calm") && lines[2] == "  storage: disk full", "\(lines)")
        #expect(lines[3].hasPrefix("twin") && lines[4] == "  DEVICE ID CONFLICT: the broker gave this device's connection to another client"
                && lines[5] == "    6 times; storage: disk full", "\(lines)")
        #expect(lines[6...].map { $0.trimmingPrefix("  ") }.joined(separator: " ").hasSuffix("; 1 with a device id another board also uses (see its note)"), "\(lines)")
        #expect(!FleetTable.lines([calm], now: now, staleAfter: 600).last!.contains("device id"))
    }

    /// Issue 33: the table wrapped at 80 columns for simulated and offline boards (their notes). Every line now fits a
    /// terminal's 80: a board's notes go on indented lines of their own under it, and a long summary is wrapped.
    @Test func everyLineFitsEightyColumns() {
        var status = StatusPayload(state: "online", version: "0.2.0", boot: 12, since: "2026-12-02T09:00:00.000Z")
        status.at = "2026-12-02T11:59:00.000Z"
        status.clock = "simulated"
        status.mode = "simulated"
        status.outboxDepth = 200
        status.outboxOldestAgeSeconds = 11_000
        status.faultedInputs = 3
        status.reconnects = 12
        let now = WireTime.unixSeconds("2026-12-02T12:00:00Z")!
        let simulated = FleetBoard(site: "uniandes", device: "lot-b-gate", retained: status)
        var offline = FleetBoard(site: "uniandes", device: "p2-east-2", online: false, since: now - 90_000, status: status, boot: 12)
        offline.refused = (3, "P1-A-01 (owner p1-north)")
        status.idConflict = "statuses of boot 3 since 2026-12-02T10:00:00.000Z and boot 9 since 2026-12-02T11:00:00.000Z came within seconds"
        status.clock = "unsynced"
        status.mode = nil
        let twin = FleetBoard(site: "uniandes", device: "p3-west", retained: status)
        let lines = FleetTable.lines([simulated, offline, twin], now: now, staleAfter: 600)
        #expect(lines.allSatisfy { $0.count <= 80 }, "\(lines.filter { $0.count > 80 })")
        let board = lines.firstIndex { $0.hasPrefix("lot-b-gate") }!
        #expect(lines[board].hasSuffix("simulated"), "the board's columns stay on its line: \(lines)")
        #expect(lines[board + 1] == "  reconnected 12 times; simulated feed", "\(lines)")
        let gone = lines.firstIndex { $0.hasPrefix("p2-east-2") }!
        #expect(lines[gone + 1] == "  3 spot reports refused, e.g. P1-A-01 (owner p1-north); simulated feed; last"
                && lines[gone + 2] == "    known", "\(lines)")
        let conflict = lines.firstIndex { $0.hasPrefix("p3-west") }!
        #expect(lines[conflict + 1].hasPrefix("  DEVICE ID CONFLICT: statuses of boot 3") && lines[conflict + 2].hasPrefix("  "), "\(lines)")
        #expect(lines[lines.count - 2].hasPrefix("3 boards: 2 online, 1 offline, 0 stale (stale:") && lines.last!.hasPrefix("  "), "\(lines)")
        // A board without notes: one line.
        let steady = FleetTable.lines([FleetBoard(site: "s", device: "p1", online: false)], now: now, staleAfter: 600)
        #expect(steady.count == 3 && steady[1].hasPrefix("p1      OFFLINE") && steady[2] == "1 board: 0 online, 1 offline, 0 stale (stale: nothing heard for more than 10m)", "\(steady)")
    }
}
