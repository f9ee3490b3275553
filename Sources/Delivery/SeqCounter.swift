/// The promise's third part, pure: **a seq is never reused.** Which seqs this run has given out, which block of them
/// the disk reserves (the sequence ledger, and the state file's copy), and so how far events may go out.
///
/// A seq is given out only under a reservation asked for before it (`next()` returns the reservation to write when it
/// runs past the last one), and an event goes out only once a reservation on disk covers its seq (`durable`): a crash
/// then leaves the next start a count at or above every seq that may have reached the broker, and it counts on from
/// there (declaring the unused rest of the block). A reservation the disk refused leaves `durable` where it was:
/// events above it wait (`awaitingReservation`) and the reservation is asked for again (`reservationRefused`).
///
/// No I/O: the shell writes each reservation it is asked for and reports it with `reserved(upTo:)`.
public struct SeqCounter: Equatable, Sendable {
    /// The last seq given out.
    public private(set) var seq: UInt64
    /// The reservation asked for: seqs up to this one may be given out.
    public private(set) var reserved: UInt64
    /// The highest seq a reservation on disk covers (or the outbox file holds): the next start counts on from at least
    /// here. An event with a higher seq must not go out yet.
    public private(set) var durable: UInt64
    /// The last seq this counter gives out (`seqsLeft` is 0 there).
    public let last: UInt64
    /// Seqs reserved per write.
    public let block: UInt64

    /// A counter that goes on from `seq` (the highest seq the start found anywhere), reserved on disk up to `durable`
    /// (`.max`: nothing is kept across restarts, nothing waits).
    public init(seq: UInt64, durable: UInt64, last: UInt64, block: UInt64) {
        self.seq = min(seq, last)
        reserved = self.seq
        self.durable = durable
        self.last = last
        self.block = max(1, block)
    }

    /// Seqs this run may still give out.
    public var seqsLeft: UInt64 { last - min(seq, last) }

    /// The next seq, and the reservation to write first when it runs past the last one asked for. Only while
    /// `seqsLeft` is above 0: the caller stamps nothing more after the last seq.
    public mutating func next() -> (seq: UInt64, reserve: UInt64?) {
        precondition(seq < last, "no seq left: the caller checks seqsLeft")
        seq += 1
        guard seq > reserved else { return (seq, nil) }
        reserved = min(seq + block - 1, last)
        return (seq, reserved)
    }

    /// Seqs were given out that no reservation on disk covers: their events wait until one does.
    public var awaitingReservation: Bool { seq > durable }

    /// The last reservation asked for is not on disk (the disk refused it): the next try waits.
    public var reservationRefused: Bool { durable < reserved }

    /// Less than half a block is reserved on disk beyond the last seq: the next block is best reserved now, while no
    /// event waits. Also true while a refused reservation leaves events unsendable.
    public var reservationDue: Bool { durable < min(seq + block / 2, last) }

    /// The reservation to write ahead of need (nil: none is due). It grows by one block, so still one write per block;
    /// after a refused write the same reservation is asked for again.
    public mutating func reserveAhead() -> UInt64? {
        guard reservationDue else { return nil }
        if reserved < seq + block / 2 { reserved = min(max(reserved, seq) + block, last) }
        return reserved
    }

    /// A clean stop: the reservation to write is exactly the last seq given out, so the next start declares nothing.
    public mutating func stoppedCleanly() -> UInt64 {
        reserved = seq
        return reserved
    }

    /// A reservation up to this seq reached the disk.
    public mutating func reserved(upTo seq: UInt64) {
        durable = max(durable, seq)
    }

    /// The start found an outbox file holding seqs up to `floor`: never counted below, and on disk already.
    public mutating func atLeast(_ floor: UInt64) {
        seq = max(seq, min(floor, last))
        reserved = max(reserved, seq)
        durable = max(durable, floor)
    }
}
