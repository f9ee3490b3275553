@testable import BridgeKit
import ConfigFile
import Foundation
import ParkWiseCLI
import ParkWiseCore
import Testing
import TestSupport

/// The command-line convention both programs follow (Sources/CLI/README.md): parsed in-process against the bridge's
/// own command specs, and where the exit code or stderr is the behaviour, through the built binaries.
@Suite struct CLIConventionTests {
    /// export-config's --spot-list is the older spelling of --spots (the name check-config reads the list by): it
    /// still works, as --spots, and the command line says it used it.
    @Test func anOlderSpellingIsTheNewOptionAndSaysSo() throws {
        let old = try ExportConfigCommand.spec.parse(["--level", "P1", "--spot-list", "spots.txt"])
        #expect(old.option("spots") == "spots.txt" && old.option("spot-list") == nil)
        #expect(old.deprecations == [Deprecation(old: "spot-list", new: "spots")])
        let new = try ExportConfigCommand.spec.parse(["--level", "P1", "--spots=spots.txt"])
        #expect(new.option("spots") == "spots.txt" && new.deprecations.isEmpty)
        let help = ExportConfigCommand.spec.help
        #expect(help.contains("\nDEPRECATED:\n  --spot-list <file>      Use --spots <file>; still accepted, with a line on stderr.\n"), "\(help)")
        #expect(!ExportConfigCommand.spec.usage.contains("spot-list"))
    }

    /// The line goes to stderr before the command runs, in the program's own name, once per older spelling.
    @Test func anOlderSpellingPrintsOneLineOnStderr() throws {
        // --site without --device: a usage error export-config finds before it needs the database.
        let r = try runBridge(["export-config", "--level", "P1", "--spot-list", temporaryDirectory().path + "/spots.txt", "--site", "s"])
        #expect(r.code == 64)
        let lines = r.err.split(separator: "\n").map(String.init)
        #expect(lines.first == "parkwise-bridge: --spot-list is deprecated, use --spots", "\(r.err)")
        #expect(lines.filter { $0.contains("deprecated") }.count == 1, "\(r.err)")
        #expect(lines.dropFirst().first == "Error: --site and --device go together (a whole config), or neither", "\(r.err)")
    }

    /// check-config's config is --config as everywhere else; its argument, the form scripts and the packages' hints
    /// use, is an alias of it (no deprecation); both at once is a usage error.
    @Test func checkConfigTakesTheConfigAsConfigOrAsItsArgument() throws {
        let spec = CheckConfigCommand.spec
        #expect(try spec.parse(["--config", "bridge.yaml"]).option("config") == "bridge.yaml")
        let positional = try spec.parse(["bridge.yaml"])
        #expect(positional.option("config") == "bridge.yaml" && positional.positionals.isEmpty && positional.deprecations.isEmpty)
        #expect(throws: UsageError.self) { try spec.parse(["a.yaml", "--config", "b.yaml"]) }
        #expect(throws: UsageError.self) { try spec.parse(["a.yaml", "b.yaml"]) }
        do {
            _ = try spec.parse([])
            Issue.record("check-config without a config parsed")
        } catch {
            #expect(error.message == "Missing expected argument '--config <file>'")
        }
        #expect(spec.usage.hasSuffix("check-config --config <file>"))
        #expect(spec.help.contains("\nARGUMENTS:\n  <file>                  The same as --config <file>.\n"))
    }

    /// Both forms check the same file the same way, through the binary.
    @Test func checkConfigReadsTheSameFileEitherWay() throws {
        let path = temporaryDirectory().appendingPathComponent("bridge.yaml").path
        try "sites: [garage]\n".write(toFile: path, atomically: true, encoding: .utf8)
        let named = try runBridge(["check-config", "--config", path])
        let positional = try runBridge(["check-config", path])
        #expect(named.code == 0 && positional.code == 0, "\(named.err) \(positional.err)")
        #expect(named.out == positional.out && named.err.isEmpty && positional.err.isEmpty)
    }

    /// `version` and `--version` print one line, the same in both programs but for the name: NAME VERSION (wire
    /// contract parkwise/v1); the packaging reads the second word (make-deb.sh, help2man.py).
    @Test func versionIsOneLineInBothProgramsAndBothForms() throws {
        let bridge = try runBridge(["version"]), bridgeFlag = try runBridge(["--version"])
        let agent = try runToCompletion(agentBinary, ["version"]), agentFlag = try runToCompletion(agentBinary, ["--version"])
        for r in [bridge, bridgeFlag, agent, agentFlag] { #expect(r.code == 0 && r.err.isEmpty, "\(r.err)") }
        #expect(bridge.out == bridgeFlag.out && agent.out == agentFlag.out)
        #expect(bridge.out == "parkwise-bridge \(BridgeCommands.version) (wire contract parkwise/v1)\n", "\(bridge.out)")
        #expect(agent.out.replacingOccurrences(of: "parkwise-agent ", with: "parkwise-bridge ") == bridge.out, "\(agent.out)")
        #expect(try runBridge(["help"]).out.contains("\n  version                 Print the version (the line --version prints).\n"))
    }

    /// The bridge's config reads a boolean as the agent's does: true/false, yes/no, on/off, any case.
    @Test func configBooleansReadInAnyCase() throws {
        for (text, value) in [("true", true), ("TRUE", true), ("Yes", true), ("On", true),
                              ("false", false), ("False", false), ("NO", false), ("off", false)] {
            #expect(ConfigBoolean.read(text) == value, "\(text)")
            let path = temporaryDirectory().appendingPathComponent("bridge.yaml").path
            try "accept_simulated: \(text)\n".write(toFile: path, atomically: true, encoding: .utf8)
            let config = try BridgeConfigReader.read(try ConfigFile.tree(path: path), file: path)
            #expect(config.acceptSimulated == value, "\(text)")
        }
        #expect(ConfigBoolean.read("1") == nil && ConfigBoolean.read("maybe") == nil && ConfigBoolean.read("") == nil)
    }

    /// Anything else is the config's problem at its place, with the spellings read, exit 78 (check-config and run).
    @Test func aBadBooleanIsAProblemAtItsLine() throws {
        let path = temporaryDirectory().appendingPathComponent("bridge.yaml").path
        try "sites: [garage]\naccept_simulated: maybe\n".write(toFile: path, atomically: true, encoding: .utf8)
        let check = try runBridge(["check-config", "--config", path])
        #expect(check.code == 78)
        #expect(check.err.contains("\(path):2:19: error: accept_simulated must be true or false, found 'maybe'\n"
                                   + "    hint: write true or false (yes/no and on/off are read too, in any case)"), "\(check.err)")
        #expect(check.err.contains("1 problem found"), "\(check.err)")
        let run = try runBridge(["run", "--broker", "mqtt://127.0.0.1:1", "--database", "postgresql://nobody@127.0.0.1:1/none",
                                 "--config", path])
        #expect(run.code == 78, "\(run.err)")
        #expect(run.err.contains("\(path):2:19: error: accept_simulated must be true or false, found 'maybe'"), "\(run.err)")
    }
}
