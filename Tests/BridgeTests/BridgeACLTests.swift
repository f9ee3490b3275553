import Foundation
import Testing
import TestSupport

/// The bridge against the broker of deploy/mosquitto: TLS verified against the site CA, logged in as
/// `parkwise-backend` with a credentials file like the agent's, within that identity's ACL.
@Suite struct BridgeACLTests {
    @Test func theBridgeWorksWithinTheBackendsACLOverTLS() throws {
        let site = try SiteBroker()
        let fixture = try BridgeFixture()
        let credentials = fixture.dir.path + "/credentials"
        let secret = Data("username=parkwise-backend\npassword=\(SiteBroker.passwords["parkwise-backend"]!)\n".utf8)
        #expect(FileManager.default.createFile(atPath: credentials, contents: secret, attributes: [.posixPermissions: 0o600]))
        let config = fixture.dir.path + "/acl-bridge.yaml"
        try "credentials: \(credentials)\ntls: { ca: \(site.certs)/ca.crt }\nreassert_every: 200ms\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let bridge = try Child(bridgeBinary, ["run", "--broker", "mqtts://localhost:\(site.tls)", "--database", fixture.url,
                                              "--config", config])
        #expect(eventually(15) { bridge.stderr.contains("bridge running") }, "\(bridge.stderr)\n\(site.log)")

        let device = "parkwise/v1/uniandes/p2-east"
        let login = site.login("p2-east")
        // The register, as provision.sh writes it: only the admin role may; a board may not give itself spots.
        let entry = #"{"rev":1,"spots":["P2-A-05"],"state":"provisioned"}"#
        #expect(try !site.publish(login, "parkwise/v1/uniandes/_register/p2-east", entry, retain: true).accepted)
        #expect(try site.publish(site.login("parkwise-admin"), "parkwise/v1/uniandes/_register/p2-east", entry, retain: true).accepted)
        #expect(fixture.waitFor("SELECT device FROM sensor_spot_owners WHERE spot_id = 'P2-A-05'", "p2-east"))
        let commands = try Child("/usr/bin/mosquitto_sub", login + ["-q", "1", "-t", device + "/cmd/#", "-F", "%t"])
        #expect(try site.publish(login, device + "/status", #"{"boot":1,"since":"\#(wireTime())","state":"online","version":"0.1.0"}"#,
                                 retain: true).accepted)
        #expect(try site.publish(login, device + "/state/spot/P2-A-05",
                                 #"{"checked_in":false,"seq":0,"since":"\#(wireTime(-5))","state":"occupied"}"#, retain: true).accepted)
        #expect(fixture.waitFor("SELECT status || '/' || source FROM spots WHERE id = 'P2-A-05'", "occupied/sensor"),
                "\(bridge.stderr)\n\(site.log)")
        // A gap: the bridge asks the device for a rebirth, which its ACL allows.
        for seq in [1, 4] {
            let event = #"{"at":"\#(wireTime())","boot":1,"clock":"synced","id":"\#(UUID().uuidString.lowercased())","lane":"P2-ramp","from":"outside","to":"P2","seq":\#(seq),"type":"lane.passage"}"#
            #expect(try site.publish(login, device + "/events", event).accepted)
        }
        #expect(fixture.waitFor("SELECT count(*) FROM sensor_gaps", "1"))
        #expect(eventually(10) { commands.stdout.contains(device + "/cmd/rebirth") }, "\(site.log)")
        #expect(site.log.components(separatedBy: "Denied").count == 2, "only the board's own register write: \(site.log)")
        commands.signal(SIGTERM)
        bridge.signal(SIGTERM)
        #expect(bridge.wait(10) == 0)
    }
}
