import ConfigFile
import ParkWiseCore
import Testing

/// Drives a WiringLearner on a virtual clock and keeps what it said.
private struct LearnHarness {
    var learner: WiringLearner
    var out: [WiringLearner.Output] = []

    /// Lines 0…count-1 named GPIO<n>; `owners` claims some; `rest` the levels at rest (low unless given).
    init(spots: [String], lines count: Int, owners: [Int: String] = [:], rest: [Int: Bool] = [:], hold: Duration = .milliseconds(300)) {
        let lines = (0..<count).map { WiringLearner.Line(input: "GPIO\($0)", owner: owners[$0]) }
        learner = WiringLearner(spots: spots.map { .init(id: $0, hold: hold) }, lines: lines,
                                rest: (0..<count).map { rest[$0] ?? false })
        out = learner.start()
    }

    mutating func edge(_ line: Int, _ high: Bool, at ms: Int64) {
        learner.handle(LineChange(input: line, active: high, at: .milliseconds(ms)))
        out += learner.advance(to: .milliseconds(ms))
    }

    mutating func advance(to ms: Int64) { out += learner.advance(to: .milliseconds(ms)) }

    /// Covers `line` at `ms` for `forMs`, advancing through the hold, then uncovers it.
    mutating func cover(_ line: Int, at ms: Int64, for forMs: Int64 = 500, restHigh: Bool = false) {
        edge(line, !restHigh, at: ms)
        advance(to: ms + forMs)
        edge(line, restHigh, at: ms + forMs)
    }

    var said: [String] {
        out.map {
            switch $0 {
            case .prompt(let spot, let n, let total): return "cover \(spot) \(n)/\(total)"
            case .learned(let l): return "\(l.spot)=\(l.input)" + (l.activeLow ? " active_low" : "")
            case .claimed(let spot, let input, let owner): return "\(spot): \(input) is \(owner)'s"
            case .ambiguous(let spot, let inputs): return "\(spot): \(inputs.joined(separator: "+"))"
            case .skipped(let spot): return "\(spot) skipped"
            case .finished: return "finished"
            }
        }
    }
}

@Suite struct WiringLearnerTests {
    @Test func eachSpotGetsTheLineThatWasHeldInTheConfigsOrder() {
        var h = LearnHarness(spots: ["P1-A-01", "P1-A-02", "P1-A-03"], lines: 8, rest: [5: true])
        h.cover(3, at: 1000)
        h.cover(5, at: 3000, restHigh: true)   // a sensor that pulls its line low: active_low
        h.cover(0, at: 5000)
        #expect(h.said == ["cover P1-A-01 1/3", "P1-A-01=GPIO3", "cover P1-A-02 2/3", "P1-A-02=GPIO5 active_low",
                           "cover P1-A-03 3/3", "P1-A-03=GPIO0", "finished"])
        #expect(h.learner.isFinished && h.learner.learned.count == 3)
    }

    @Test func aPasserByShorterThanTheHoldIsForgotten() {
        var h = LearnHarness(spots: ["P1-A-01"], lines: 4)
        h.edge(2, true, at: 100); h.edge(2, false, at: 250); h.advance(to: 2000)   // 150 ms: bounce or a passer-by
        #expect(h.said == ["cover P1-A-01 1/1"])
        h.cover(1, at: 3000)
        #expect(h.said.suffix(2) == ["P1-A-01=GPIO1", "finished"])
    }

    @Test func aLineAnotherSpotOrLaneClaimsIsRefusedAndTheSpotWaits() {
        var h = LearnHarness(spots: ["P1-A-01", "P1-A-02"], lines: 6, owners: [4: "lane ramp loop a"])
        h.cover(4, at: 1000)
        #expect(h.said.last == "P1-A-01: GPIO4 is lane ramp loop a's")
        h.cover(1, at: 3000)
        // The same line for the next spot: claimed by the spot just learned.
        h.cover(1, at: 5000)
        h.cover(2, at: 7000)
        #expect(h.said == ["cover P1-A-01 1/2", "P1-A-01: GPIO4 is lane ramp loop a's", "P1-A-01=GPIO1", "cover P1-A-02 2/2",
                           "P1-A-02: GPIO1 is spot P1-A-01's", "P1-A-02=GPIO2", "finished"])
    }

    @Test func twoLinesHeldAtOnceTeachNothing() {
        var h = LearnHarness(spots: ["P1-A-01"], lines: 6)
        h.edge(2, true, at: 1000); h.edge(3, true, at: 1050); h.advance(to: 1400)
        #expect(h.said.last == "P1-A-01: GPIO2+GPIO3")
        h.edge(2, false, at: 1500); h.edge(3, false, at: 1500)
        h.cover(3, at: 4000)
        #expect(h.said.suffix(2) == ["P1-A-01=GPIO3", "finished"])
    }

    @Test func aJudgedLineIsIgnoredUntilQuietThenSkipLeavesASpotUnwired() {
        var h = LearnHarness(spots: ["P1-A-01", "P1-A-02", "P1-A-03"], lines: 4)
        h.cover(1, at: 1000)                          // P1-A-01 = GPIO1, released at 1500
        h.edge(1, true, at: 1700); h.advance(to: 2500)   // bounce on release, within quiet: not P1-A-02's claim
        h.edge(1, false, at: 2600)
        #expect(h.said.last == "cover P1-A-02 2/3")
        h.out += h.learner.skip()
        h.cover(2, at: 5000)
        #expect(h.said.suffix(4) == ["P1-A-02 skipped", "cover P1-A-03 3/3", "P1-A-03=GPIO2", "finished"])
        #expect(h.learner.skipped == ["P1-A-02"])
    }

    @Test func theHoldIsTheSpotsDelayedOnCappedAtOneSecond() {
        let learner = WiringLearner(spots: [.init(id: "P1-A-01", hold: .seconds(5))], lines: [.init(input: "GPIO2", owner: nil)],
                                    rest: [false])
        #expect(learner.spots[0].hold == .seconds(1))
        var h = LearnHarness(spots: ["P1-A-01"], lines: 3, hold: .seconds(5))
        h.edge(2, true, at: 0); h.advance(to: 999)
        #expect(h.said == ["cover P1-A-01 1/1"])
        h.advance(to: 1000)
        #expect(h.said.last == "finished")
    }
}

@Suite struct UnsetSpotTests {
    static let exported = """
    # From ParkWise's levels and spots tables
    site: "uniandes"
    device: "p2-a"
    board: raspberry-pi-4
    levels:
      - { id: "P2", capacity: 48 }
    spots:
      - { id: "P2-A-01", input: UNSET }   # A-01 ev
      - { id: "P2-A-02", input: GPIO5 }
      - id: "P2-A-03"
        input: UNSET
      - { id: "P2-A-04", input: UNSET, active_low: false }
    """

    @Test func theLearningReadKeepsUnwiredSpotsAsideAndTheRestAsUsual() throws {
        let (config, unset) = try ConfigFile.parseForLearning(Array(Self.exported.utf8), file: "x.yaml")
        #expect(config.spots.map(\.id) == ["P2-A-02"])
        #expect(unset.map(\.id) == ["P2-A-01", "P2-A-03", "P2-A-04"])
        #expect(unset.map(\.mark.line) == [8, 11, 12])
        #expect(unset.map(\.activeLow) == [nil, nil, false])
        // The usual read refuses each of them.
        #expect(issues(Self.exported).map(\.message) == ["spot P2-A-01: input not set", "spot P2-A-03: input not set",
                                                         "spot P2-A-04: input not set"])
    }

    @Test func theInputIsWrittenInPlaceWithActiveLowBesideItAndTheFileStillReads() throws {
        let (_, unset) = try ConfigFile.parseForLearning(Array(Self.exported.utf8), file: "x.yaml")
        // In the order learned; the block mapping's added line must not move the place of the spot after it.
        let text = try #require(UnsetSpot.wiring(Self.exported, [(unset[0], "1-0020:GPA0", true), (unset[1], "GPIO17", true),
                                                                 (unset[2], "GPIO27", true)]))   // P2-A-04 says active_low
        #expect(text.contains("  - { id: \"P2-A-01\", input: \"1-0020:GPA0\", active_low: true }   # A-01 ev"))
        #expect(text.contains("    input: GPIO17\n    active_low: true\n"))
        #expect(text.contains("  - { id: \"P2-A-04\", input: GPIO27, active_low: false }"))
        let config = try parse(text)
        #expect(config.spots.map(\.id) == ["P2-A-01", "P2-A-02", "P2-A-03", "P2-A-04"])
        #expect(config.spots.map(\.input.activeLow) == [true, false, true, false])
        #expect(config.spots[0].input.ref == .chipLine(chip: "1-0020", line: "GPA0"))
        // A file changed since it was read (the mark no longer on UNSET): nothing written.
        #expect(unset[0].wired(in: text, input: "GPIO6", activeLow: false) == nil)
    }
}
