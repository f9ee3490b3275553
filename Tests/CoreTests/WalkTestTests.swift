import ParkWiseCore
import Testing

/// Drives a WalkTest on a virtual clock and keeps what it said.
struct WalkHarness {
    var walk: WalkTest
    var out: [WalkTest.Output] = []

    init(_ config: AgentConfig, initial: [Bool]? = nil, previous: [WalkResult] = [], from: String? = nil) {
        walk = WalkTest(config: config, initial: initial ?? Array(repeating: false, count: config.inputs.count),
                        previous: previous, from: from)!
        out = walk.start()
    }

    mutating func edge(_ input: Int, _ active: Bool, at ms: Int64) {
        out += walk.handle(LineChange(input: input, active: active, at: .milliseconds(ms)))
        out += walk.advance(to: .milliseconds(ms))
    }

    mutating func advance(to ms: Int64) { out += walk.advance(to: .milliseconds(ms)) }

    /// "step verdict" per result so far.
    var verdicts: [String] {
        out.compactMap { if case .result(let r) = $0 { return "\(r.step) \(r.verdict.rawValue)" } else { return nil } }
    }
    var prompts: [String] {
        out.compactMap { if case .prompt(let s, _, _) = $0 { return s.id } else { return nil } }
    }
}

/// lane0 loops a=0 b=1, then spots P1-A-01 (input 2), P1-A-02 (input 3), P1-A-03 (input 4); spot windows 1 s.
private func walkConfig() -> AgentConfig { garageConfig(lanes: 1, spots: 3, spotOn: "1s", spotOff: "1s") }

struct WalkTestTests {
    @Test func correctWiringConfirmsEveryStepInOrder() {
        var h = WalkHarness(walkConfig())
        #expect(h.prompts == ["lane0"])
        h.edge(0, true, at: 100); h.edge(1, true, at: 300); h.edge(0, false, at: 600); h.edge(1, false, at: 800)
        h.advance(to: 1000)
        h.edge(2, true, at: 3000); h.advance(to: 4100); h.edge(2, false, at: 5000)
        h.edge(3, true, at: 7000); h.edge(3, false, at: 7500); h.advance(to: 8100)
        h.edge(4, true, at: 10_000); h.advance(to: 11_100)
        #expect(h.verdicts == ["lane0 confirmed", "P1-A-01 confirmed", "P1-A-02 confirmed", "P1-A-03 confirmed"])
        #expect(h.prompts == ["lane0", "P1-A-01", "P1-A-02", "P1-A-03"])
        #expect(h.out.last == .finished)
        #expect(h.walk.isFinished)
    }

    @Test func aSwappedPairNamesBothSpots() {
        var h = WalkHarness(walkConfig(), from: "P1-A-01")
        // P1-A-01's sensor is on P1-A-02's line and the other way round.
        h.edge(3, true, at: 1000); h.edge(3, false, at: 2000)
        h.edge(2, true, at: 5000); h.edge(2, false, at: 6000)
        h.edge(4, true, at: 9000); h.advance(to: 10_100)
        #expect(h.verdicts == ["P1-A-01 swapped", "P1-A-02 swapped", "P1-A-03 confirmed"])
        let results = h.walk.results
        #expect(results["P1-A-01"]?.other == "spot P1-A-02")
        #expect(results["P1-A-02"]?.other == "spot P1-A-01")
        #expect(results["P1-A-01"]?.detail.contains("P1-A-01 and P1-A-02 are swapped") == true)
    }

    @Test func anInputActiveAtRestIsAPolarityProblem() {
        var h = WalkHarness(walkConfig(), initial: [false, false, true, false, false], from: "P1-A-01")
        #expect(h.out.contains { if case .note(let n) = $0 { return n.contains("spot P1-A-01 (GPIO4) reads active at rest") } else { return false } })
        h.edge(2, false, at: 1000); h.advance(to: 2100)
        #expect(h.verdicts == ["P1-A-01 polarity"])
        #expect(h.walk.results["P1-A-01"]?.detail.contains("active_low: true") == true)
    }

    @Test func loopBBeforeLoopAIsLoopsSwapped() {
        var h = WalkHarness(walkConfig())
        h.edge(1, true, at: 100); h.edge(0, true, at: 300); h.edge(1, false, at: 600); h.edge(0, false, at: 800)
        h.advance(to: 1000)
        #expect(h.verdicts == ["lane0 loops_swapped"])
        #expect(h.walk.results["lane0"]?.detail.contains("loops: { a: GPIO3, b: GPIO2 }") == true)
    }

    @Test func bounceFarBeyondTheFilterIsBouncy() {
        var h = WalkHarness(walkConfig(), from: "P1-A-01")
        for n in 0..<10 { h.edge(2, n % 2 == 0, at: 1000 + Int64(n) * 30) }
        h.edge(2, true, at: 1400)
        h.advance(to: 2100)
        #expect(h.verdicts == ["P1-A-01 bouncy"])
        #expect(h.walk.results["P1-A-01"]?.edges == 11)
    }

    @Test func aFewEdgesWithinTheWindowAreStillConfirmed() {
        var h = WalkHarness(walkConfig(), from: "P1-A-01")
        h.edge(2, true, at: 1000); h.edge(2, false, at: 1010); h.edge(2, true, at: 1020)
        h.advance(to: 2100)
        #expect(h.verdicts == ["P1-A-01 confirmed"])
        #expect(h.walk.results["P1-A-01"]?.edges == 3)
    }

    @Test func releaseBounceOfAJudgedInputIsNotTheNextStepsWiring() {
        var h = WalkHarness(walkConfig(), from: "P1-A-01")
        h.edge(2, true, at: 1000); h.advance(to: 2100)
        // The hand leaves P1-A-01 with contact bounce while P1-A-02 is asked for.
        h.edge(2, false, at: 2500); h.edge(2, true, at: 2510); h.edge(2, false, at: 2520)
        h.edge(3, true, at: 5000); h.advance(to: 6100)
        #expect(h.verdicts == ["P1-A-01 confirmed", "P1-A-02 confirmed"])
    }

    @Test func skipRetryAndResume() {
        var h = WalkHarness(walkConfig(), from: "P1-A-01")
        h.out += h.walk.skip()
        h.edge(3, true, at: 1000); h.advance(to: 2100)
        #expect(h.verdicts == ["P1-A-01 skipped", "P1-A-02 confirmed"])
        // Retry walks P1-A-02 again.
        h.out += h.walk.retry()
        #expect(h.walk.current?.id == "P1-A-02")
        #expect(h.walk.results["P1-A-02"] == nil)
        h.edge(3, false, at: 2500)
        h.edge(3, true, at: 4000); h.advance(to: 5100)
        #expect(h.walk.results["P1-A-02"]?.verdict == .confirmed)
        #expect(h.walk.current?.id == "P1-A-03")

        // Resuming from these results walks the lane, the skipped spot and the untested one, not P1-A-02.
        let previous = Array(h.walk.results.values)
        var resumed = WalkHarness(walkConfig(), previous: previous)
        #expect(resumed.walk.current?.id == "lane0")
        resumed.out += resumed.walk.skip()
        #expect(resumed.walk.current?.id == "P1-A-01")
        resumed.out += resumed.walk.skip()
        #expect(resumed.walk.current?.id == "P1-A-03")
        #expect(resumed.walk.results["P1-A-02"]?.verdict == .confirmed)
        #expect(WalkTest(config: walkConfig(), initial: [false, false, false, false, false], from: "nope") == nil)
    }

    @Test func progressCountsEveryStep() {
        let h = WalkHarness(walkConfig(), from: "P1-A-02")
        #expect(h.out.contains(.prompt(WalkStep.all(of: walkConfig())[2], number: 3, total: 4)))
    }
}
