import ConfigFile
import ParkWiseCore
import Testing

/// Parses YAML text as a config file named `test.yaml`.
func parse(_ yaml: String) throws(ConfigError) -> AgentConfig {
    try ConfigFile.parse(Array(yaml.utf8), file: "test.yaml")
}

/// The issues a config produces; fails the test if it is valid.
func issues(_ yaml: String, sourceLocation: SourceLocation = #_sourceLocation) -> [ConfigIssue] {
    do {
        _ = try parse(yaml)
        Issue.record("expected the config to be rejected", sourceLocation: sourceLocation)
        return []
    } catch {
        return error.issues
    }
}

let minimal = """
site: uniandes
device: p2-east
board: simulated
levels:
  - { id: P2, capacity: 48 }
lanes:
  - { id: P2-ramp, from: outside, to: P2, loops: { a: GPIO17, b: GPIO27 } }
spots:
  - { id: P2-A-01, input: GPIO22, delayed_on: 5s, delayed_off: 10s }
"""

@Suite struct ConfigTests {
    @Test func minimalConfigReadsWithDefaults() throws {
        let config = try parse(minimal)
        #expect(config.site == "uniandes")
        #expect(config.device == "p2-east")
        #expect(config.board == .simulated)
        #expect(config.mqtt.brokers == [BrokerAddress(tls: false, host: "127.0.0.1", port: 1883)])
        #expect(config.outbox.capacity == 200)
        #expect(config.lanes[0].loopA.ref == .gpio(17))
        #expect(config.lanes[0].loopA.delayedOn == ConfigDefaults.loopDelayedOn)
        #expect(config.spots[0].level == "P2")
        #expect(config.spots[0].input.delayedOn == .seconds(5))
        #expect(config.spots[0].input.delayedOff == .seconds(10))
        #expect(config.inputs.count == 3)
    }

    @Test(arguments: ["campus.yaml", "single-gate.yaml"])
    func shippedExamplesAreValid(name: String) throws {
        let path = packageRoot + "/hardware/examples/" + name
        let config = try ConfigFile.load(path: path)
        #expect(!config.levels.isEmpty)
        if name == "campus.yaml" {
            #expect(config.spots.count == 156)
            #expect(config.levels.map(\.id) == ["P1", "P2", "P3"])
            #expect(config.levels.map(\.capacity) == [60, 48, 48])
            #expect(Set(config.spots.map(\.id)).count == 156)
            #expect(config.lanes.count == 4)
        }
    }

    @Test func unknownKeySuggestsTheRightOne() {
        let found = issues(minimal.replacingOccurrences(of: "board: simulated", with: "bord: simulated"))
        #expect(found.count == 1)
        #expect(found[0].mark == Mark(line: 3, column: 1))
        #expect(found[0].message == "unknown key 'bord' in the config file")
        #expect(found[0].hint == "did you mean 'board'?")
        #expect(found[0].description.hasPrefix("test.yaml:3:1: error: unknown key 'bord'"))
    }

    @Test func aliasHintForBuffer() {
        let found = issues(minimal + "\nbuffer: { path: /tmp/x, capacity: 200 }\n")
        #expect(found.map(\.hint) == ["did you mean 'outbox'?"])
    }

    @Test func wrongTypesAreNamed() {
        let found = issues(minimal.replacingOccurrences(of: "capacity: 48", with: "capacity: lots")
            .replacingOccurrences(of: "levels:\n", with: "levels:\n") + "\noutbox: [a, b]\n")
        #expect(found.contains { $0.message == "capacity must be a whole number, found 'lots'" && $0.mark.line == 5 })
        #expect(found.contains { $0.message.hasPrefix("outbox must be a mapping") })
    }

    @Test func duplicateIdsAreReportedAtTheSecond() {
        let yaml = minimal + "\n  - { id: P2-A-01, input: GPIO23 }\n"
        let found = issues(yaml)
        #expect(found.count == 1)
        #expect(found[0].message == "duplicate spot id 'P2-A-01' (first defined at line 9)")
        #expect(found[0].mark == Mark(line: 10, column: 5))
    }

    @Test func aLineUsedTwiceEvenWhenWrittenDifferently() {
        // pin 11 on the header is GPIO17, already loop a of the ramp.
        let found = issues(minimal + "\n  - { id: P2-A-02, input: pin 11 }\n")
        #expect(found.count == 1)
        #expect(found[0].message == "spot P2-A-02 uses line pin 11 which lane P2-ramp loop a already uses (line 7)")
        #expect(found[0].mark == Mark(line: 10, column: 27))
    }

    @Test func laneToUnknownLevel() {
        let found = issues(minimal.replacingOccurrences(of: "to: P2,", with: "to: P4,"))
        #expect(found.count == 1)
        #expect(found[0].message == "lane points at unknown level 'P4'")
        #expect(found[0].hint == "did you mean 'P2'? known: P2, outside")
        #expect(found[0].mark == Mark(line: 7, column: 39))
    }

    /// Of levels equally close to a wrong name, the hint names the first in sorted order: it named one picked by a
    /// Set's order, which changes from one run to the next (the same file gave 'G0001P4', then 'G0001P2'). 26 levels
    /// PA-PZ, each two edits from 12: a pick in any other order names PA once in 26 runs.
    @Test func anUnknownLevelsSuggestionIsTheSameAtEveryRun() {
        let ids = (UInt8(ascii: "A")...UInt8(ascii: "Z")).map { "P" + String(UnicodeScalar($0)) }
        let yaml = minimal
            .replacingOccurrences(of: "  - { id: P2, capacity: 48 }", with: ids.map { "  - { id: \($0), capacity: 10 }" }.joined(separator: "\n"))
            .replacingOccurrences(of: "to: P2,", with: "to: \"12\",")
            .replacingOccurrences(of: "{ id: P2-A-01,", with: "{ id: P2-A-01, level: \"12\",")
        let found = issues(yaml)
        #expect(found.map(\.message) == ["lane points at unknown level '12'", "spot P2-A-01 is on unknown level '12'"])
        #expect(found.map(\.hint) == ["did you mean 'PA'? known: \((ids + ["outside"]).joined(separator: ", "))",
                                      "did you mean 'PA'? known: \(ids.joined(separator: ", "))"])
    }

    @Test func spotIdPattern() throws {
        let yaml = minimal + "\n  - { id: P2-A-7, input: GPIO23 }\nspot_id_pattern: \"<level>-<zone>-<nn>\"\n"
        let found = issues(yaml)
        #expect(found.count == 1)
        #expect(found[0].message == "spot id 'P2-A-7' does not match spot_id_pattern \"<level>-<zone>-<nn>\"")
        #expect(found[0].hint == "rename it to follow the pattern, e.g. P2-A-01")
        _ = try parse(minimal + "\nspot_id_pattern: \"<level>-<zone>-<nn>\"\n")
    }

    @Test func capacitySmallerThanSpots() {
        let found = issues(minimal.replacingOccurrences(of: "capacity: 48", with: "capacity: 1")
                           + "\n  - { id: P2-A-02, input: GPIO23 }\n")
        #expect(found.map(\.message) == ["level P2 has capacity 1 but 2 spots are configured on it"])
    }

    @Test func yamlSyntaxErrorHasLineAndColumn() {
        let found = issues("site: uniandes\ndevice: [p2\nlevels: []\n")
        #expect(found.count == 1)
        #expect(found[0].message.hasPrefix("YAML syntax:"))
        #expect(found[0].mark.line == 3)
    }

    @Test func everyProblemAtOnceInFileOrder() {
        let yaml = """
        site: uni andes
        device: p2-east
        mqtt: { brokers: ["http://x"], keepalive: 1s }
        levels:
          - { id: P2, capacity: 48 }
        lanes:
          - { id: L1, from: outside, to: P9, loops: { a: GPIO17 } }
        spots:
          - { id: P2-A-01, input: GPIO99, delayed_on: soon }
        """
        let found = issues(yaml)
        #expect(found.map(\.mark.line) == found.map(\.mark.line).sorted())
        let messages = found.map(\.message)
        #expect(messages.contains("site 'uni andes' has characters that cannot go in an MQTT topic"))
        #expect(messages.contains("'http://x' is not a broker address"))
        #expect(messages.contains("keepalive must be between 5s and 1h"))
        #expect(messages.contains("lane points at unknown level 'P9'"))
        #expect(messages.contains("missing required key 'b'"))
        #expect(messages.contains("'GPIO99' is not an input"))
        #expect(messages.contains("delayed_on: 'soon' is not a duration"))
        #expect(found.count == 7)
    }

    @Test func missingFileIsAClearIssue() {
        do {
            _ = try ConfigFile.load(path: "/nonexistent/agent.yaml")
            Issue.record("expected failure")
        } catch {
            #expect(error.issues.first?.message == "cannot read the config file: no such file")
        }
        do {
            _ = try ConfigFile.load(path: "/tmp")
            Issue.record("expected failure")
        } catch {
            #expect(error.issues.first?.message == "cannot read the config file: it is a directory")
            #expect(error.issues.first?.description.contains("/tmp:1:1") == true, "\(error)")
        }
    }

    @Test func durations() {
        #expect((try? DurationText.read("250ms")) == .milliseconds(250))
        #expect((try? DurationText.read("5s")) == .seconds(5))
        #expect((try? DurationText.read("2m")) == .seconds(120))
        #expect((try? DurationText.read("1.5s")) == .milliseconds(1500))
        #expect((try? DurationText.read("0")) == .zero)
        #expect((try? DurationText.read("5")) == nil)
        #expect((try? DurationText.read("-1s")) == nil)
        #expect(DurationText.format(.seconds(120)) == "2m")
    }

    @Test func inputs() {
        #expect(InputRef.parse("GPIO17") == .gpio(17))
        #expect(InputRef.parse("pin 11") == .headerPin(11))
        #expect(InputRef.parse("pin 11")?.canonical == "GPIO17")
        #expect(InputRef.parse("mcp23017:GPA0") == .chipLine(chip: "mcp23017", line: "GPA0"))
        #expect(InputRef.parse("nonsense") == nil)
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

let packageRoot: String = {
    var path = #filePath
    for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
    return path
}()
