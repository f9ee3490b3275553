import FoundationEssentials
import ParkWiseContract
import Simulation
import Testing
@testable import Uplink

/// The hand-written payloads (`WireJSON.encode` for event, spot state and level state; the outbox's records) against
/// JSONEncoder, byte for byte, over seeded random payloads: every optional present and absent, hostile strings, awkward
/// numbers.
@Suite struct WireWriterTests {
    @Test func eventPayloadsMatchJSONEncoderByteForByte() {
        var random = PayloadDice(seed: 0x5EED_0001)
        for round in 0..<4000 {
            let e = random.event(all: round % 4 == 0)   // every fourth payload carries every optional field
            expectSameBytes(e, round: round)
        }
    }

    @Test func spotStatesMatchJSONEncoderByteForByte() {
        var random = PayloadDice(seed: 0x5EED_0002)
        for round in 0..<3000 {
            let spot = SpotStatePayload(state: random.text(), since: random.maybe(false) { $0.text() }, checkedIn: random.bool(),
                                        seq: random.maybe(false) { $0.unsigned() })
            expectSameBytes(spot, round: round)
        }
    }

    @Test func levelStatesMatchJSONEncoderByteForByte() {
        var random = PayloadDice(seed: 0x5EED_0003)
        for round in 0..<3000 {
            var level = LevelStatePayload(capacity: 48, occupied: random.maybe(false) { _ in 12 }, source: random.text(),
                                          spotsSensed: 0, spotsOccupied: 0, spotsUnknown: 0, laneCount: nil)
            // Any numbers, free on its own too (not only as the init derives it).
            level.capacity = random.integer()
            level.occupied = random.maybe(false) { $0.integer() }
            level.free = random.maybe(false) { $0.integer() }
            level.spotsSensed = random.integer()
            level.spotsOccupied = random.integer()
            level.spotsUnknown = random.integer()
            level.laneCount = random.maybe(false) { $0.integer() }
            level.unknown = random.integer()
            expectSameBytes(level, round: round)
        }
    }

    /// The writer starts in a scratch buffer on the stack and moves to the heap for what outgrows it: a payload of
    /// every size around that move, and far past it, comes out whole.
    @Test func payloadsLargerThanTheScratchBufferComeOutWhole() {
        for size in [0, 300, 400, 450, 480, 500, 511, 512, 513, 600, 1_100, 20_000] {
            var e = EventPayload(id: "i", seq: 1, boot: 1, type: "spot.occupied", at: "a", clock: "synced")
            e.reason = String(repeating: "x", count: size)
            expectSameBytes(e, round: size)
            e.reason = String(repeating: "\u{1}\"é", count: size / 3)
            expectSameBytes(e, round: size)
        }
    }

    /// Each awkward value alone, so a failure names it.
    @Test func awkwardValuesMatchOneByOne() {
        for text in PayloadDice.hostilePieces + [PayloadDice.hostilePieces.joined()] {
            var e = EventPayload(id: text, seq: 1, boot: 1, type: "spot.occupied", at: text, clock: "synced")
            e.reason = text
            expectSameBytes(e, round: 0)
            expectSameBytes(SpotStatePayload(state: text, since: text, checkedIn: true), round: 0)
        }
        for value in PayloadDice.awkwardDoubles {
            var e = EventPayload(id: "i", seq: 1, boot: 1, type: "spot.free", at: "a", clock: "synced")
            e.staySeconds = value
            expectSameBytes(e, round: 0)
        }
        for value in [Int.min, Int.max, 0, -1, 9, 10, -10, 99, 100] {
            var level = LevelStatePayload(capacity: 0, occupied: nil, source: "spots", spotsSensed: value, spotsOccupied: value,
                                          spotsUnknown: value, laneCount: value)
            level.capacity = value
            level.occupied = value
            level.free = value
            level.unknown = value
            expectSameBytes(level, round: 0)
        }
        for value in [UInt64.max, 0, 1, 9, 10, 10_000_000_000_000_000_000] {
            expectSameBytes(EventPayload(id: "i", seq: value, boot: value, type: "t", at: "a", clock: "c"), round: 0)
        }
    }

    /// Guards the comparison itself: the hand-written bytes also read back as the same payload (NaN aside).
    @Test func handWrittenBytesReadBack() {
        var random = PayloadDice(seed: 0x5EED_0004)
        for _ in 0..<500 {
            var e = EventPayload(id: random.text(), seq: random.unsigned(), boot: 7, type: random.text(), at: "a", clock: "c")
            e.spot = random.text()
            e.counted = random.integer()
            e.staySeconds = Double(random.integer() % 100_000) / 8
            #expect(WireJSON.decode(EventPayload.self, from: WireJSON.encode(e)) == e)
        }
    }

    /// The outbox file's records, as JSONEncoder writes them with `.withoutEscapingSlashes` (the event inside is its
    /// published bytes, `OutboxEntry.wire`), and still read back by the decoder that reads escaped slashes too.
    @Test func outboxRecordsMatchJSONEncoderByteForByte() throws {
        var random = PayloadDice(seed: 0x5EED_0005)
        for round in 0..<3000 {
            let entry = OutboxEntry(event: random.event(all: round % 4 == 0), atMonotonic: Int64(truncatingIfNeeded: random.integer()),
                                    arrivalMonotonic: random.maybe(false) { Int64(truncatingIfNeeded: $0.integer()) },
                                    kernelBoot: random.text())
            compare(WireJSON.encode(entry), WireJSON.encodeWithFoundation(entry), round: round)
            for record in [OutboxLog.Record(add: entry), OutboxLog.Record(del: random.unsigned()), OutboxLog.Record(floor: random.unsigned()),
                           OutboxLog.Record(drop: random.unsigned()), OutboxLog.Record(drop: random.unsigned(), dropTo: random.unsigned()),
                           OutboxLog.Record(add: entry, del: random.unsigned(), drop: random.unsigned(), dropTo: random.unsigned(),
                                            floor: random.unsigned())] {
                // Nothing where JSONEncoder throws (a NaN): the outbox refuses such a record.
                let reference = (try? Self.encoder.encode(record)).map { Array($0) } ?? []
                compare(record.json, reference, round: round)
                if !reference.isEmpty {
                    #expect(try JSONDecoder().decode(OutboxLog.Record.self, from: Data(record.json)).add == record.add, "round \(round)")
                }
            }
        }
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    private func expectSameBytes(_ value: EventPayload, round: Int) {
        compare(WireJSON.encode(value), WireJSON.encodeWithFoundation(value), round: round)
    }
    private func expectSameBytes(_ value: SpotStatePayload, round: Int) {
        compare(WireJSON.encode(value), WireJSON.encodeWithFoundation(value), round: round)
    }
    private func expectSameBytes(_ value: LevelStatePayload, round: Int) {
        compare(WireJSON.encode(value), WireJSON.encodeWithFoundation(value), round: round)
    }

    private func compare(_ fast: [UInt8], _ reference: [UInt8], round: Int) {
        #expect(fast == reference, "round \(round): hand-written \(String(decoding: fast, as: UTF8.self)) JSONEncoder \(String(decoding: reference, as: UTF8.self))")
    }
}

/// Random payload parts, seeded: the same payloads on every run and every machine.
struct PayloadDice {
    private var random: SeededRandom
    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    mutating func next() -> UInt64 { random.next() }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func bool() -> Bool { next() & 1 == 1 }

    /// Present always when `all`, else half the time.
    mutating func maybe<T>(_ all: Bool, _ make: (inout PayloadDice) -> T) -> T? {
        all || bool() ? make(&self) : nil
    }

    mutating func event(all: Bool) -> EventPayload {
        var e = EventPayload(id: text(), seq: unsigned(), boot: unsigned(), type: text(), at: text(), clock: text())
        e.replayed = maybe(all) { $0.bool() }
        e.spot = maybe(all) { $0.text() }
        e.level = maybe(all) { $0.text() }
        e.lane = maybe(all) { $0.text() }
        e.from = maybe(all) { $0.text() }
        e.to = maybe(all) { $0.text() }
        e.arrival = maybe(all) { $0.text() }
        e.departure = maybe(all) { $0.text() }
        e.staySeconds = maybe(all) { $0.double() }
        e.subject = maybe(all) { $0.text() }
        e.input = maybe(all) { $0.text() }
        e.reason = maybe(all) { $0.text() }
        e.counted = maybe(all) { $0.integer() }
        e.clampedTo = maybe(all) { $0.integer() }
        e.dropped = maybe(all) { $0.integer() }
        e.firstSeq = maybe(all) { $0.unsigned() }
        e.lastSeq = maybe(all) { $0.unsigned() }
        return e
    }

    static let hostilePieces: [String] = [
        "", "\"", "\\", "/", "//", "\\/", "\u{0}", "\u{1}", "\u{8}", "\u{9}", "\u{A}", "\u{B}", "\u{C}", "\u{D}", "\u{1B}",
        "\u{1F}", " ", "\u{7F}", "\u{80}", "é", "ß", "€", "\u{2028}", "\u{2029}", "\u{FEFF}", "\u{FFFD}", "😀", "𝄞",
        "👩‍👩‍👧", "🇨🇴", "e\u{301}", "P2-B-07", "spot.occupied", "2026-11-29T14:03:07.250Z", "</script>", "{\"a\":1}",
        "\r\n", "null", "0", "-", "a",
    ]

    mutating func text() -> String {
        var s = ""
        for _ in 0..<below(7) {
            if below(4) == 0 {
                s.unicodeScalars.append(Unicode.Scalar(UInt8(below(0x80))))   // any ASCII, control characters too
            } else {
                s += Self.hostilePieces[below(Self.hostilePieces.count)]
            }
        }
        return s
    }

    mutating func integer() -> Int {
        switch below(5) {
        case 0: return [Int.min, Int.max, 0, -1, 1][below(5)]
        case 1: return Int(bitPattern: UInt(truncatingIfNeeded: next()))
        default: return below(2001) - 1000
        }
    }

    mutating func unsigned() -> UInt64 {
        switch below(4) {
        case 0: return [UInt64.max, 0, 1][below(3)]
        case 1: return next()
        default: return UInt64(below(1_000_000))
        }
    }

    static let awkwardDoubles: [Double] = [
        0, -0.0, 0.1, 0.2, 0.30000000000000004, 1e-7, 1e-6, 1e-5, 2520, 2520.5, 1e15, 1e16, 1e17, 1.5e16, 123456789012345680,
        9_007_199_254_740_992, 9_007_199_254_740_994, 1e300, -1e300, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude,
        .leastNormalMagnitude, -2.5, 86_400, 3.14159, 1.0 / 3, .nan, .infinity, -.infinity,
    ]

    mutating func double() -> Double {
        switch below(5) {
        case 0: return Self.awkwardDoubles[below(Self.awkwardDoubles.count)]
        case 1: return Double(bitPattern: next())   // any bits: subnormals, NaNs, infinities too
        case 2: return Double(below(1_000_000)) / 1000
        case 3: return -Double(below(100_000))
        default: return Double(next() % 1_000_000_000) * 0.001 * (bool() ? 1 : -1)
        }
    }
}
