import Foundation
import Testing
import TestSupport

/// The agent's side of the command-line convention both programs follow (Sources/CLI/README.md; the bridge's side
/// and the version line: BridgeTests.CLIConventionTests).
@Suite struct AgentCLIConventionTests {
    /// check-config takes the config as --config, as every other command does, or as its argument (the postinst's
    /// and the scripts' form, kept for good: no deprecation line); --spots reads the list either way.
    @Test func checkConfigTakesTheConfigAsConfigOrAsItsArgument() throws {
        let dir = temporaryDirectory()
        let path = dir.appendingPathComponent("agent.yaml").path
        try writeOneSpotConfig(path)
        let list = dir.appendingPathComponent("spots.txt").path
        try "P2-A-01\n".write(toFile: list, atomically: true, encoding: .utf8)
        let named = try runAgent(["check-config", "--config", path, "--spots", list])
        let positional = try runAgent(["check-config", path, "--spots", list])
        #expect(named.code == 0 && positional.code == 0, "\(named.err) \(positional.err)")
        #expect(named.out == positional.out && named.err.isEmpty && positional.err.isEmpty, "\(named.err) \(positional.err)")

        let twice = try runAgent(["check-config", path, "--config", path])
        #expect(twice.code == 64)
        #expect(twice.err.hasPrefix("Error: '\(path)' and '--config' both name the file: give it once"), "\(twice.err)")
    }

    /// A boolean in any case reads (YAML writers put True and FALSE); anything else is a problem at its line with the
    /// spellings read, exit 78: the same reader as the bridge's.
    @Test func configBooleansReadInAnyCaseAndABadOneIsAProblemAtItsLine() throws {
        let path = temporaryDirectory().appendingPathComponent("agent.yaml").path
        for text in ["TRUE", "Yes", "on", "False", "NO", "Off"] {
            try writeOneSpotConfig(path, spot: ", active_low: \(text)")
            let r = try runAgent(["check-config", "--config", path])
            #expect(r.code == 0, "\(text): \(r.err)")
        }
        try writeOneSpotConfig(path, spot: ", active_low: maybe")
        let r = try runAgent(["check-config", "--config", path])
        #expect(r.code == 78)
        #expect(r.err.contains("\(path):5:52: error: active_low must be true or false, found 'maybe'\n"
                               + "    hint: write true or false (yes/no and on/off are read too, in any case)"), "\(r.err)")
    }
}

/// A valid config of one level and one spot (simulated board) at `path`; `spot` adds settings to the spot's mapping.
func writeOneSpotConfig(_ path: String, spot: String = "") throws {
    try """
    site: uniandes
    device: p2-east
    board: simulated
    levels: [ { id: P2, capacity: 1 } ]
    spots: [ { id: P2-A-01, input: GPIO22\(spot) } ]
    """.write(toFile: path, atomically: true, encoding: .utf8)
}
