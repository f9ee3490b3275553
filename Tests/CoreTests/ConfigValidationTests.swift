import ConfigFile
import ParkWiseCore
import Testing

/// Configs that read fine but would make the agent misbehave: check-config must refuse them.
@Suite struct ConfigValidationTests {
    @Test(arguments: [("min_presence: 3m", 7), ("min_presence: 2m", 7), ("max_presence: 400ms", 7),
                      ("min_presence: 5s, max_presence: 1s", 7)])
    func minPresenceMustBeShorterThanMaxPresence(setting: String, line: Int) {
        let found = issues(minimal.replacingOccurrences(of: "loops: { a: GPIO17, b: GPIO27 }",
                                                        with: "loops: { a: GPIO17, b: GPIO27 }, \(setting)"))
        #expect(found.count == 1)
        #expect(found.first?.message.contains("must be longer than min_presence") == true)
        #expect(found.first?.mark.line == line)
    }

    /// Every problem comes with what to do about it, the shape mistakes of hand-written YAML too.
    @Test(arguments: [
        ("  - { id: P2, capacity: 48 }", "  - { id: P2, capacity: forty }"),
        ("  - { id: P2-A-01, input: GPIO22, delayed_on: 5s, delayed_off: 10s }",
         "  - { id: P2-A-01, input: GPIO22, active_low: maybe }"),
        ("levels:\n  - { id: P2, capacity: 48 }", "levels: { id: P2, capacity: 48 }"),
        ("levels:\n  - { id: P2, capacity: 48 }", "levels:\n  - P2"),
        ("site: uniandes", "site:"),
        ("site: uniandes", "site: [a, b]"),
    ])
    func everyShapeMistakeHasAHint(from: String, to: String) {
        let found = issues(minimal.replacingOccurrences(of: from, with: to))
        #expect(!found.isEmpty)
        for issue in found { #expect(issue.hint?.isEmpty == false, "no hint: \(issue.description)") }
    }

    /// The package installs its example with `device: ""`: refused, saying what goes there.
    @Test func anEmptyDeviceIdIsRefusedWithWhatGoesThere() {
        let found = issues(minimal.replacingOccurrences(of: "device: p2-east", with: "device: \"\""))
        #expect(found.map(\.message) == ["device is empty"])
        #expect(found.first?.hint?.contains("unique within its site") == true)
    }

    @Test func trueAndFalseInAnyCaseAreBooleans() throws {
        let config = try parse(minimal.replacingOccurrences(of: "delayed_on: 5s, delayed_off: 10s", with: "active_low: True"))
        #expect(config.spots.first?.input.activeLow == true)
    }

    @Test func aMinPresenceThatIsNotADurationIsOneIssue() {
        let found = issues(minimal.replacingOccurrences(of: "loops: { a: GPIO17, b: GPIO27 }",
                                                        with: "loops: { a: GPIO17, b: GPIO27 }, min_presence: soon"))
        #expect(found.map(\.message) == ["min_presence: 'soon' is not a duration"])
    }

    @Test(arguments: ["GPIO41", "GPIO28", "GPIO63"])
    func aGPIOTheNamedBoardDoesNotHaveIsAnIssue(gpio: String) {
        let yaml = minimal.replacingOccurrences(of: "board: simulated", with: "board: raspberry-pi-4")
            .replacingOccurrences(of: "input: GPIO22", with: "input: \(gpio)")
        let found = issues(yaml)
        #expect(found.map(\.message) == ["spot P2-A-01 uses \(gpio), which the raspberry-pi-4 does not bring out"])
        #expect(found.first?.mark == Mark(line: 9, column: 27))
    }

    @Test func everyHeaderGPIOIsAcceptedOnANamedBoard() throws {
        let config = try parse(minimal.replacingOccurrences(of: "board: simulated", with: "board: raspberry-pi-5")
            .replacingOccurrences(of: "input: GPIO22", with: "input: GPIO26"))
        #expect(config.spots[0].input.ref == .gpio(26))
    }

    @Test(arguments: [("GPIO2", "SDA"), ("pin 5", "SCL")])
    func theI2CPinsOfTheConfigsOwnExpandersAreNotInputs(line: String, signal: String) {
        let yaml = minimal.replacingOccurrences(of: "input: GPIO22", with: "input: \(line)")
            + "\n  - { id: P2-A-02, input: \"1-0020:GPA0\" }\n"
        let found = issues(yaml)
        #expect(found.count == 1)
        #expect(found.first?.message.hasPrefix("spot P2-A-01 uses GPIO\(line == "GPIO2" ? 2 : 3), which carries I2C bus 1 (\(signal))") == true)
        #expect(found.first?.mark.line == 9)
    }

    /// An expander on bus 3 (the campus example's second bus) takes GPIO4/5 as bus 1's take GPIO2/3 (issue 33: they
    /// were left free for sensors).
    @Test(arguments: [("GPIO4", "SDA"), ("pin 29", "SCL")])
    func theI2CPinsOfAnExpanderOnBusThreeAreNotInputs(line: String, signal: String) {
        let yaml = minimal.replacingOccurrences(of: "input: GPIO22", with: "input: \(line)")
            + "\n  - { id: P2-A-02, input: \"3-0020:GPA0\" }\n"
        let found = issues(yaml)
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.message.hasPrefix("spot P2-A-01 uses GPIO\(line == "GPIO4" ? 4 : 5), which carries I2C bus 3 (\(signal))") == true,
                "\(found)")
        #expect(found.first?.hint?.contains("GPIO4 and GPIO5 (pins 7 and 29) belong to the I2C bus") == true, "\(found)")
    }

    @Test func theI2CPinsAreFreeWithoutAnExpanderOnBusOne() throws {
        _ = try parse(minimal.replacingOccurrences(of: "input: GPIO22", with: "input: GPIO2")
                      + "\n  - { id: P2-A-02, input: \"3-0020:GPA0\" }\n")
    }

    @Test(arguments: ["capacity: ten", "capacity: 0", "capacity: 100001"])
    func aBadLevelIsOneIssueNotAlsoAnUnknownLevel(level: String) {
        let found = issues(minimal.replacingOccurrences(of: "capacity: 48", with: level))
        #expect(found.count == 1, "\(found.map(\.description))")
    }

    /// `user:pass@host` would have been taken as a host name (a lookup that never resolves, "broker unreachable").
    @Test func aBrokerAddressWithAPasswordIsRefusedWithWhereItGoes() {
        let found = issues(minimal + "\nmqtt: { brokers: [\"mqtt://gate:secret@10.0.0.5:1883\"] }\n")
        #expect(found.map(\.message) == ["'mqtt://gate:secret@10.0.0.5:1883' is not a broker address"])
        #expect(found.first?.hint?.contains("mqtt.credentials") == true, "\(found.map(\.description))")
    }

    @Test func aMistypedTLSBrokerIsOneIssueNotAlsoTLSWithoutBroker() {
        let found = issues(minimal + "\nmqtt: { brokers: [\"mqtts//10.0.0.5:8883\"], tls: { ca: /etc/ca.pem } }\n")
        #expect(found.map(\.message) == ["'mqtts//10.0.0.5:8883' is not a broker address"])
        let plain = issues(minimal + "\nmqtt: { brokers: [\"mqtt://10.0.0.5:1883\"], tls: { ca: /etc/ca.pem } }\n")
        #expect(plain.map(\.message) == ["mqtt.tls is set but no broker uses mqtts://"])
    }

    @Test(arguments: ["levels: lots", "levels: { P2: 48 }"])
    func levelsThatAreNoListAreOneIssueNotAlsoEmpty(levels: String) {
        let found = issues(minimal.replacingOccurrences(of: "levels:\n  - { id: P2, capacity: 48 }", with: levels))
        #expect(found.count == 1, "\(found.map(\.message))")
        #expect(found.first?.message.hasPrefix("levels must be a list") == true)
    }

    @Test func brokersThatAreNoListAreOneIssueNotAlsoEmpty() {
        let found = issues(minimal + "\nmqtt: { brokers: mqtt://10.0.0.5 }\n")
        #expect(found.map(\.message) == ["mqtt.brokers must be a list (lines starting with '- '), found a single value"])
    }

    @Test func missingLevelsAreOneIssue() {
        let found = issues(minimal.replacingOccurrences(of: "levels:\n  - { id: P2, capacity: 48 }\n", with: ""))
        #expect(found.map(\.message) == ["missing required key 'levels'"])
    }

    @Test(arguments: [("0s", false), ("500ms", false), ("2h", false), ("1s", true), ("1m", true), ("1h", true)])
    func statusEveryIsBetweenASecondAndAnHour(every: String, valid: Bool) throws {
        let yaml = minimal + "\nmqtt: { status_every: \(every) }\n"
        if valid {
            #expect(try parse(yaml).mqtt.statusEvery == DurationText.read(every))
        } else {
            let found = issues(yaml)
            #expect(found.map(\.message) == ["status_every must be between 1s and 1h"])
            #expect(found.first?.mark.line == minimal.split(separator: "\n", omittingEmptySubsequences: false).count + 1)
        }
    }

    @Test func statusEveryDefaultsToAMinute() throws {
        #expect(try parse(minimal).mqtt.statusEvery == .seconds(60))
    }
}

