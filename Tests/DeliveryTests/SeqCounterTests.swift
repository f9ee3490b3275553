import Delivery
import Testing

/// The seq counter's rules, in-process: a seq is given out only under a reservation asked for first, and an event goes
/// out only once a reservation on disk covers it.
@Suite struct SeqCounterTests {
    @Test func aSeqIsGivenOutOnlyUnderAReservationAskedForFirst() {
        var counter = SeqCounter(seq: 10, durable: 10, last: 1000, block: 8)
        let first = counter.next()
        #expect(first.seq == 11 && first.reserve == 18, "past the reservation: the next block is asked for with it")
        #expect(counter.awaitingReservation, "not on disk yet: seq 11 must not go out")
        counter.reserved(upTo: 18)
        #expect(!counter.awaitingReservation)
        for expected in UInt64(12)...18 { #expect(counter.next() == (expected, nil)) }
        #expect(counter.next() == (19, 26))
    }

    /// A refused reservation leaves `durable` where it was: events above it wait, and the same reservation is asked for
    /// again (not a new one per event).
    @Test func aRefusedReservationHoldsEventsAndIsAskedForAgain() {
        var counter = SeqCounter(seq: 0, durable: 0, last: 1000, block: 8)
        #expect(counter.next().reserve == 8)
        #expect(counter.reservationRefused && counter.awaitingReservation && counter.reservationDue)
        #expect(counter.next().reserve == nil, "seq 2 is under the reservation asked for")
        #expect(counter.reserveAhead() == 8, "asked for again, unchanged")
        counter.reserved(upTo: 8)
        #expect(!counter.reservationRefused && !counter.awaitingReservation)
    }

    /// The next block is asked for once less than half of one is left, so events seldom wait for a write.
    @Test func theNextBlockIsReservedAheadOfNeed() {
        var counter = SeqCounter(seq: 0, durable: 0, last: 1000, block: 8)
        counter.reserved(upTo: counter.next().reserve ?? 0)
        for _ in 2...4 { _ = counter.next() }
        #expect(counter.reserveAhead() == nil, "4 of 8 used: not yet")
        _ = counter.next()
        #expect(counter.reserveAhead() == 16)
        counter.reserved(upTo: 16)
        #expect(counter.reserveAhead() == nil)
    }

    /// A clean stop reserves exactly the last seq given out (the next start declares nothing); the last seq is the end.
    @Test func aCleanStopAndTheLastSeq() {
        var counter = SeqCounter(seq: 995, durable: 995, last: 1000, block: 8)
        #expect(counter.next() == (996, 1000), "never reserved past the last seq")
        #expect(counter.stoppedCleanly() == 996)
        var end = SeqCounter(seq: 1000, durable: 1000, last: 1000, block: 8)
        #expect(end.seqsLeft == 0)
        end.atLeast(2000)
        #expect(end.seq == 1000 && end.seqsLeft == 0, "a floor past the end counts only to the end")
    }

    /// An outbox file holding higher seqs than any reservation: counted on from there, and already on disk.
    @Test func theOutboxOnDiskRaisesTheCount() {
        var counter = SeqCounter(seq: 20, durable: 20, last: 1000, block: 8)
        counter.atLeast(30)
        #expect(counter.seq == 30 && !counter.awaitingReservation)
        #expect(counter.next() == (31, 38))
    }
}
