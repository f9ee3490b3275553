/// A set of seqs kept as sorted, disjoint, non-adjacent closed ranges: exactly the seqs put in, however many, in as
/// few ranges as they allow (a range is never widened over a seq that was not put in).
public struct SeqRuns: Equatable, Sendable {
    public private(set) var ranges: [ClosedRange<UInt64>] = []

    public init() {}

    public init<S: Sequence>(_ ranges: S) where S.Element == ClosedRange<UInt64> {
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = self.ranges.last, range.lowerBound <= last.upperBound || range.lowerBound - last.upperBound == 1 {
                if range.upperBound > last.upperBound { self.ranges[self.ranges.count - 1] = last.lowerBound...range.upperBound }
            } else {
                self.ranges.append(range)
            }
        }
    }

    /// The seqs given, in any order, repeated or not.
    public init<S: Sequence>(seqs: S) where S.Element == UInt64 {
        for seq in seqs.sorted() {
            if let last = ranges.last, seq <= last.upperBound + 1 {
                if seq > last.upperBound { ranges[ranges.count - 1] = last.lowerBound...seq }
            } else {
                ranges.append(seq...seq)
            }
        }
    }

    public var isEmpty: Bool { ranges.isEmpty }
    /// How many seqs (not ranges).
    public var seqCount: UInt64 { ranges.reduce(0) { $0 + ($1.upperBound - $1.lowerBound + 1) } }
    public var highest: UInt64? { ranges.last?.upperBound }

    public func contains(_ seq: UInt64) -> Bool {
        var low = 0, high = ranges.count
        while low < high {
            let mid = (low + high) / 2
            if ranges[mid].upperBound < seq { low = mid + 1 } else { high = mid }
        }
        return low < ranges.count && ranges[low].contains(seq)
    }

    /// Adds the range, joining the ranges it overlaps or touches.
    public mutating func insert(_ range: ClosedRange<UInt64>) {
        var low = range.lowerBound, high = range.upperBound
        var kept: [ClosedRange<UInt64>] = []
        kept.reserveCapacity(ranges.count + 1)
        var placed = false
        for r in ranges {
            if r.upperBound < low && low - r.upperBound > 1 {
                kept.append(r)
            } else if r.lowerBound > high && r.lowerBound - high > 1 {
                if !placed { kept.append(low...high); placed = true }
                kept.append(r)
            } else {
                low = min(low, r.lowerBound)
                high = max(high, r.upperBound)
            }
        }
        if !placed { kept.append(low...high) }
        ranges = kept
    }

    public mutating func insert(_ seq: UInt64) { insert(seq...seq) }

    /// The seqs of `self` that are not in `other`.
    public func subtracting(_ other: SeqRuns) -> SeqRuns {
        var result = SeqRuns()
        var j = 0
        for r in ranges {
            var low = r.lowerBound
            var exhausted = false
            while j < other.ranges.count && other.ranges[j].upperBound < low { j += 1 }
            var k = j
            while k < other.ranges.count && other.ranges[k].lowerBound <= r.upperBound {
                let cut = other.ranges[k]
                if cut.lowerBound > low { result.ranges.append(low...(cut.lowerBound - 1)) }
                if cut.upperBound >= r.upperBound { exhausted = true; break }
                low = max(low, cut.upperBound + 1)
                k += 1
            }
            if !exhausted { result.ranges.append(low...r.upperBound) }
        }
        return result
    }

    /// The seqs of `self` that are not among `seqs`.
    public func subtracting<S: Sequence>(seqs: S) -> SeqRuns where S.Element == UInt64 {
        subtracting(SeqRuns(seqs: seqs))
    }

    /// The seqs of `seqs` that are in `self`.
    public func filter<S: Sequence>(_ seqs: S) -> [UInt64] where S.Element == UInt64 { seqs.filter { contains($0) } }
}
