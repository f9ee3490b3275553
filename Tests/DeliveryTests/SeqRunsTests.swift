import Delivery
import Testing

@Suite struct SeqRunsTests {
    @Test func rangesStayExactWhateverOrderSeqsComeIn() {
        var runs = SeqRuns()
        for seq: UInt64 in [5, 3, 9, 4, 10, 1] { runs.insert(seq) }
        #expect(runs.ranges == [1...1, 3...5, 9...10])
        runs.insert(2...2)
        #expect(runs.ranges == [1...5, 9...10])
        #expect(SeqRuns(seqs: [7, 1, 2, 2, 8, 4]).ranges == [1...2, 4...4, 7...8])
    }

    @Test func subtractingLeavesExactlyTheRest() {
        let all = SeqRuns([1...20, 30...40])
        let rest = all.subtracting(SeqRuns([5...6, 10...35]))
        #expect(rest.ranges == [1...4, 7...9, 36...40])
        #expect(all.subtracting(seqs: [1, 20, 31]).ranges == [2...19, 30...30, 32...40])
        #expect(all.subtracting(all).isEmpty)
    }

    @Test func agreesWithASetOfSeqs() {
        var generator = SplitMix(seed: 7)
        for _ in 0..<300 {
            var runs = SeqRuns(), set = Set<UInt64>(), given: [ClosedRange<UInt64>] = []
            for _ in 0..<generator.below(12) {
                let low = generator.below(60) + 1, high = low + generator.below(6)
                runs.insert(low...high)
                set.formUnion(low...high)
                given.append(low...high)
            }
            #expect(SeqRuns(given) == runs, "built in one pass or one by one: the same runs")
            let cut = (0..<generator.below(20)).map { _ in generator.below(70) }
            let expected = set.subtracting(cut)
            let rest = runs.subtracting(seqs: cut)
            #expect(Set(rest.ranges.flatMap { Array($0) }) == expected)
            #expect(zip(rest.ranges, rest.ranges.dropFirst()).allSatisfy { $0.upperBound + 1 < $1.lowerBound }, "disjoint, not adjacent")
            #expect(rest.seqCount == UInt64(expected.count))
            for seq in 0..<70 as Range<UInt64> { #expect(rest.contains(seq) == expected.contains(seq)) }
        }
    }
}

/// A small seeded generator: the same runs on every machine (a failure names its seed).
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: UInt64) -> UInt64 { n == 0 ? 0 : next() % n }
    mutating func chance(_ percent: UInt64) -> Bool { below(100) < percent }
}
