import Foundation
import Testing
import TestSupport

/// Issue 33: who may speak for a spot. The site's register (`parkwise/v1/<site>/_register/<device>`, retained, written
/// by the broker host's provision.sh, spots.sh and revoke.sh) gives each spot to one device; with the default
/// `spot_owners: registered` the bridge takes a spot's reports only from that device, and nothing from a revoked one —
/// against the private PostgreSQL and mosquitto, the register published as the broker host publishes it.
@Suite(.serialized) struct OwnershipTests {
    /// (`registered` is the default; said here since the harness gives other tests `first_report`.)
    static let config = "spot_owners: registered\nreassert_every: 200ms\nstale_after: 1s\n"

    /// Publishes the device's register entry, retained, as the broker host's scripts do.
    private func register(_ fixture: BridgeFixture, _ device: String, _ spots: [String], rev: Int64,
                          state: String = "provisioned") {
        let list = spots.map { "\"\($0)\"" }.joined(separator: ",")
        let code = try? mosquittoPublish(fixture.broker, "parkwise/v1/garage/_register/\(device)",
                                         #"{"at":"\#(wireTime())","rev":\#(rev),"spots":[\#(list)],"state":"\#(state)"}"#,
                                         retain: true)
        #expect(code == 0)
    }

    private func fleet(_ fixture: BridgeFixture) throws -> String {
        let result = try runBridge(["fleet", "--database", fixture.url])
        #expect(result.code == 0, "\(result.err)")
        return result.out
    }

    /// A board reporting a neighbour's spot (a wrong spot list, or not the board it says) changes nothing: the spot
    /// stays what its owner senses, the refusals are counted with the owner, said once per streak in the log and
    /// shown in `fleet`. Once the owner is offline past stale_after the spot goes unknown (disabled), never to the
    /// stranger; a spot nobody was given is refused from everyone.
    @Test func aSpotIsTakenOnlyFromTheDeviceTheRegisterGivesItTo() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(config: Self.config)
        register(fixture, "p1-north", ["P1-A-01", "P1-A-02"], rev: 1)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spot_owners WHERE device = 'p1-north'", "2"), "\(bridge.stderr)")

        var owner = FakeDevice(fixture.broker, device: "p1-north")
        owner.online()
        owner.occupy(["P1-A-01"])
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-01'", "occupied/sensor"))

        var stranger = FakeDevice(fixture.broker, device: "p1-rogue")
        stranger.online()
        stranger.event("spot.vacated", #""spot":"P1-A-01","level":"P1""#)
        stranger.spot("P1-A-01", "free", since: wireTime())
        stranger.event("spot.occupied", #""spot":"P1-A-03","level":"P1""#)   // nobody's
        #expect(fixture.waitFor("""
            SELECT string_agg(spot_id || ':' || coalesce(owner, '-') || ':' || reports, ',' ORDER BY spot_id)
            FROM sensor_refused_spots WHERE device = 'p1-rogue'
            """, "P1-A-01:garage/p1-north:2,P1-A-03:-:1"), "\(bridge.stderr)")
        #expect(fixture.spot("P1-A-01") == "occupied/sensor")
        #expect(fixture.query("SELECT count(*) FROM sensor_spots WHERE device = 'p1-rogue'") == "0")
        // (The log lines follow the commit the query saw: waited for.)
        let another = "spot report refused: the site's register gives this spot to another device"
        #expect(eventually(5) { bridge.stderr.contains("spot report refused: no device is registered for this spot")
                    && bridge.stderr.contains(another) }, "\(bridge.stderr)")
        #expect(bridge.stderr.components(separatedBy: another).count == 2, "once for the streak of P1-A-01: \(bridge.stderr)")
        #expect(bridge.stderr.contains("spots.sh garage p1-rogue P1-A-01"), "the fix names the one command")
        // Its events are still its own history.
        #expect(fixture.query("SELECT count(*) FROM sensor_events WHERE device = 'p1-rogue'") == "2")

        let view = try fleet(fixture)
        #expect(view.contains("3 spot reports refused, e.g. P1-A-01 (owner p1-north)"), "\(view)")

        // The owner goes: its spots leave the free count, and the stranger still cannot have them.
        owner.offline()
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-01'", "disabled/sensor"), "\(bridge.stderr)")
        stranger.event("spot.vacated", #""spot":"P1-A-01","level":"P1""#)
        #expect(fixture.waitFor("SELECT reports FROM sensor_refused_spots WHERE device = 'p1-rogue' AND spot_id = 'P1-A-01'", "3"))
        #expect(fixture.spot("P1-A-01") == "disabled/sensor")
        #expect(fixture.query("SELECT device FROM sensor_spots WHERE spot_id = 'P1-A-01'") == "p1-north")
    }

    /// Moving spots is the register's entries of both boards written anew (spots.sh): the new owner takes the spot at
    /// once although the former one is online (it is asked for a rebirth, so its states refused before come again),
    /// the former one's reports of it are refused from then on, and the older entries a broker brings back change
    /// nothing.
    @Test func aMovedSpotGoesToItsNewOwnerAndAnOlderEntryCannotTakeItBack() throws {
        let fixture = try BridgeFixture()
        let bridge = try fixture.startBridge(config: Self.config)
        let commands = try Subscriber(fixture.broker, filter: "parkwise/v1/garage/p1-south/cmd/#")
        try commands.listen()
        register(fixture, "p1-north", ["P1-A-01", "P1-A-02"], rev: 1)
        register(fixture, "p1-south", ["P1-A-03"], rev: 1)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spot_owners", "3"))
        var north = FakeDevice(fixture.broker, device: "p1-north")
        north.online()
        north.occupy(["P1-A-01"])
        var south = FakeDevice(fixture.broker, device: "p1-south")
        south.online()
        south.event("spot.vacated", #""spot":"P1-A-01","level":"P1""#)
        south.spot("P1-A-01", "free", since: wireTime())
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_refused_spots WHERE device = 'p1-south'", "1"))
        #expect(fixture.spot("P1-A-01") == "occupied/sensor")

        // P1-A-01 moves to p1-south (its sensor was rewired there).
        register(fixture, "p1-north", ["P1-A-02"], rev: 2)
        register(fixture, "p1-south", ["P1-A-01", "P1-A-03"], rev: 2)
        #expect(fixture.waitFor("SELECT device FROM sensor_spot_owners WHERE spot_id = 'P1-A-01'", "p1-south"), "\(bridge.stderr)")
        #expect(eventually(10) { commands.messages.contains { $0.topic.hasSuffix("p1-south/cmd/rebirth") } },
                "the new owner is asked for its states again")
        south.spot("P1-A-01", "free", since: wireTime())   // what its rebirth sends
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P1-A-01'", "free/sensor"), "\(bridge.stderr)")
        north.event("spot.occupied", #""spot":"P1-A-01","level":"P1""#)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_refused_spots WHERE device = 'p1-north'", "1"))
        #expect(fixture.spot("P1-A-01") == "free/sensor")

        // A broker restored from an old backup hands out the first entries again.
        register(fixture, "p1-north", ["P1-A-01", "P1-A-02"], rev: 1)
        north.event("spot.occupied", #""spot":"P1-A-01","level":"P1""#)
        #expect(fixture.waitFor("SELECT reports FROM sensor_refused_spots WHERE device = 'p1-north'", "2"), "\(bridge.stderr)")
        #expect(fixture.query("SELECT device || ':' || rev FROM sensor_spot_owners WHERE spot_id = 'P1-A-01'") == "p1-south:2")
        #expect(fixture.spot("P1-A-01") == "free/sensor")
    }

    /// Revoking a board (revoke.sh's entry) ends it for the bridge for good: offline and REVOKED in `fleet`, its spots
    /// unknown until their new owner reports them, and whatever it or the broker sends afterwards — its retained
    /// online status, states and events, as a broker restart or a copied certificate bring them — is ignored, across
    /// a bridge restart too. A provisioned entry older than the revocation cannot bring it back.
    @Test func aRevokedDeviceStaysGoneWhateverTheBrokerSendsAgain() throws {
        let fixture = try BridgeFixture()
        var bridge = try fixture.startBridge(config: Self.config)
        register(fixture, "p1-north", ["P1-A-01", "P1-A-02"], rev: 1)
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_spot_owners", "2"))
        var ghost = FakeDevice(fixture.broker, device: "p1-north")
        ghost.online()
        ghost.occupy(["P1-A-01"])
        ghost.spot("P1-A-02", "free", since: wireTime())
        #expect(fixture.waitFor("SELECT status FROM spots WHERE id IN ('P1-A-01', 'P1-A-02') ORDER BY id", "occupied\nfree"))

        register(fixture, "p1-north", [], rev: 2, state: "revoked")
        #expect(fixture.waitFor("SELECT revoked_at IS NOT NULL AND NOT online FROM sensor_devices WHERE device = 'p1-north'", "t"),
                "\(bridge.stderr)")
        #expect(fixture.waitFor("SELECT string_agg(status || '/' || source, ',' ORDER BY id) FROM spots WHERE id IN ('P1-A-01', 'P1-A-02')",
                                "disabled/sensor,disabled/sensor"), "its spots unknown, out of the free count")
        #expect(fixture.query("SELECT count(*) FROM sensor_spot_owners") == "0")
        let events = fixture.query("SELECT count(*) FROM sensor_events")

        // The ghost comes back: its retained status and states, a new event; then the bridge restarts (a broker
        // restart delivers the same retained messages).
        ghost.online()
        ghost.spot("P1-A-02", "free", since: wireTime())
        ghost.event("spot.vacated", #""spot":"P1-A-01","level":"P1""#)
        register(fixture, "p1-north", ["P1-A-01", "P1-A-02"], rev: 1)   // an older entry, brought back
        #expect(eventually(10) { bridge.stderr.contains("message of a revoked device ignored") }, "\(bridge.stderr)")
        bridge.signal(SIGTERM)
        #expect(bridge.wait(30) == 0)
        bridge = try fixture.startBridge(config: Self.config)
        #expect(eventually(10) { bridge.stderr.contains("message of a revoked device ignored") }, "\(bridge.stderr)")
        #expect(fixture.query("SELECT online FROM sensor_devices WHERE device = 'p1-north'") == "f")
        #expect(fixture.query("SELECT count(*) FROM sensor_events") == events)
        #expect(fixture.query("SELECT count(*) FROM sensor_spot_owners") == "0")
        #expect(fixture.spot("P1-A-02") == "disabled/sensor")
        let view = try fleet(fixture)
        #expect(view.components(separatedBy: "\n").contains { $0.hasPrefix("p1-north") && $0.contains("REVOKED") },
                "\(view)")
        #expect(view.contains("1 board: 0 online, 0 offline, 0 stale, 1 revoked (stale:"), "\(view)")

        // Its replacement, provisioned with the spots, reports them.
        register(fixture, "p1-new", ["P1-A-01", "P1-A-02"], rev: 3)
        let replacement = FakeDevice(fixture.broker, device: "p1-new")
        replacement.online()
        replacement.spot("P1-A-01", "occupied", since: wireTime())
        replacement.spot("P1-A-02", "free", since: wireTime())
        #expect(fixture.waitFor("SELECT string_agg(status || '/' || source, ',' ORDER BY id) FROM spots WHERE id IN ('P1-A-01', 'P1-A-02')",
                                "occupied/sensor,free/sensor"), "\(bridge.stderr)")
    }
}
