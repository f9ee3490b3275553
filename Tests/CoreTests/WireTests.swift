import ParkWiseContract
import Testing

@Suite struct WireTests {
    @Test func wireTimeIsExactToTheMillisecond() {
        #expect(WireTime.format(unixNanoseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(WireTime.format(unixNanoseconds: 1_764_424_987_250_999_999) == "2025-11-29T14:03:07.250Z")
        #expect(WireTime.format(unixNanoseconds: 951_782_400_001_000_000) == "2000-02-29T00:00:00.001Z")
        #expect(WireTime.format(unixNanoseconds: 4_107_542_399_999_000_000) == "2100-02-28T23:59:59.999Z")
        // Before 1970 the millisecond rounds down, and the ends of the nanosecond range keep four-digit years.
        #expect(WireTime.format(unixNanoseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(WireTime.format(unixNanoseconds: .max) == "2262-04-11T23:47:16.854Z")
        #expect(WireTime.format(unixNanoseconds: .min + 1_000_000) == "1677-09-21T00:12:43.146Z")
        #expect(WireTime.format(unixNanoseconds: .min) == "1677-09-21T00:12:43.145Z")
        #expect(WireTime.format(unixNanoseconds: -86_400_000_000_001) == "1969-12-30T23:59:59.999Z")
        #expect(WireTime.format(unixNanoseconds: -86_400_000_000_000) == "1969-12-31T00:00:00.000Z")
    }

    @Test func topics() {
        let t = Topics(site: "uniandes", device: "p2-east")
        #expect(t.status == "parkwise/v1/uniandes/p2-east/status")
        #expect(t.spot("P2-B-07") == "parkwise/v1/uniandes/p2-east/state/spot/P2-B-07")
        #expect(t.level("P2") == "parkwise/v1/uniandes/p2-east/state/level/P2")
        #expect(t.command("calibrate") == "parkwise/v1/uniandes/p2-east/cmd/calibrate")
        #expect(Topics.parse("parkwise/v1/uniandes/p2-east/state/spot/P2-B-07")?.rest == ["state", "spot", "P2-B-07"])
        #expect(Topics.parse("other/v1/x/y/z") == nil)
    }

    @Test func unknownLevelNumbersAreNullNotZero() {
        let payload = LevelStatePayload(capacity: 48, occupied: nil, source: "unknown", spotsSensed: 0, spotsOccupied: 0,
                                        spotsUnknown: 0, laneCount: nil)
        let json = String(decoding: WireJSON.encode(payload), as: UTF8.self)
        #expect(json == #"{"capacity":48,"free":null,"lane_count":null,"occupied":null,"source":"unknown","spots_occupied":0,"spots_sensed":0,"spots_unknown":0,"unknown":48}"#)
    }
}
