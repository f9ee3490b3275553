import ConfigFile
import ParkWiseCore
import Testing

/// Hostile or mistyped numbers and shapes in a config: each a clear issue, never a crash.
@Suite struct ConfigInputBoundsTests {
    @Test(arguments: ["stuck_after: 106752d", "delayed_on: 200000d", "checkin_after: 99999999999999999999s",
                      "recover_after: 366d", "delayed_off: 1\(String(repeating: "0", count: 400))ms"])
    func aDurationTooLongIsAnIssue(setting: String) {
        let found = issues(minimal.replacingOccurrences(of: "delayed_on: 5s, delayed_off: 10s", with: setting))
        #expect(found.count == 1)
        #expect(found.first?.message.hasSuffix("is longer than 365d, the longest duration allowed") == true)
        #expect(found.first?.mark.line == 9)
    }

    @Test func theLongestDurationIsAccepted() throws {
        let config = try parse(minimal.replacingOccurrences(of: "delayed_on: 5s", with: "delayed_on: 365d"))
        #expect(config.spots[0].input.delayedOn == DurationText.longest)
        #expect((try? DurationText.read("8760h")) == DurationText.longest)
    }

    @Test(arguments: ["capacity: 9223372036854775807", "capacity: 100001", "capacity: 0", "capacity: -3"])
    func aLevelCapacityOutOfRangeIsAnIssue(setting: String) {
        let found = issues(minimal.replacingOccurrences(of: "capacity: 48", with: setting))
        #expect(found.map(\.message) == ["capacity must be between 1 and 100000"])
    }

    /// An outbox larger than the service's memory holds is valid (configs always could say up to 100000, and an upgrade
    /// must not stop a board for it), but it is said, at its line: full, it would have the agent killed at every start.
    @Test func anOutboxLargerThanTheServicesMemoryHoldsIsSaidAndLowered() throws {
        let large = try parse(minimal + "\noutbox: { capacity: 50000 }\n").outbox
        let lowered = try #require(large.capacityLowered)
        #expect(lowered.message == "outbox.capacity 50000 is more than the agent keeps: it uses 20000")
        #expect(lowered.hint?.contains("MemoryMax=64M") == true)
        #expect(lowered.mark.line == 10)
        #expect(try parse(minimal + "\noutbox: { capacity: 20000 }\n").outbox.capacityLowered == nil)
        #expect(issues(minimal + "\noutbox: { capacity: 100001 }\n").map(\.message) == ["outbox.capacity must be between 1 and 100000"])
    }

    @Test func aCountTooLargeForAnIntIsNotAWholeNumber() {
        let found = issues(minimal.replacingOccurrences(of: "capacity: 48", with: "capacity: 99999999999999999999"))
        #expect(found.map(\.message) == ["capacity must be a whole number, found '99999999999999999999'"])
    }

    @Test func yamlNestedTooDeepIsRefusedAtOnce() {
        let deep = "site: " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "\n"
        let clock = ContinuousClock()
        let started = clock.now
        let found = issues(deep)
        #expect(clock.now - started < .seconds(2))
        #expect(found.map(\.message) == ["YAML nested more than 32 levels deep"])
        #expect(found.first?.mark == Mark(line: 1, column: 38))
    }

    @Test func blockNestingTooDeepIsRefused() {
        var yaml = "site:\n"
        for depth in 1...40 { yaml += String(repeating: "  ", count: depth) + "k\(depth):\n" }
        #expect(issues(yaml).map(\.message) == ["YAML nested more than 32 levels deep"])
    }

    @Test(arguments: ["site: !secret site_name", "site: !include site.yaml", "levels: !levels [P1]"])
    func anUnknownTagIsRefused(line: String) {
        let found = issues(minimal.replacingOccurrences(of: "site: uniandes", with: line))
        #expect(found.count == 1)
        #expect(found.first?.message.hasPrefix("YAML tag '!") == true)
        #expect(found.first?.mark.line == 1)
    }

    @Test func plainYAMLTypeTagsAreAccepted() throws {
        let config = try parse(minimal.replacingOccurrences(of: "site: uniandes", with: "site: !!str uniandes"))
        #expect(config.site == "uniandes")
    }
}
