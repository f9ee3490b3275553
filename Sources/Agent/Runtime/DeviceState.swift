import Glibc
import FoundationEssentials
import ParkWiseLog
import Uplink

/// What must survive a restart beside the outbox: the start counter (`boot`), the last event
/// sequence number (so `seq` only ever increases) and the levels' lane counts (so a restart neither
/// forgets a calibration nor counts a vehicle twice). Saved before the events it covers are sent.
struct DeviceState {
    private(set) var boot: UInt64 = 0
    private(set) var seq: UInt64 = 0
    private(set) var laneCounts: [String: Int] = [:]
    /// Events the full outbox gave up and no event has announced yet.
    private(set) var drops: Drops?
    /// The event announcing earlier drops, until the broker acknowledges it.
    private(set) var announcement: OutboxEntry?
    private var saved: Stored?
    let path: String?

    struct Drops: Codable, Equatable {
        var count: Int
        var firstSeq: UInt64
        var lastSeq: UInt64
        enum CodingKeys: String, CodingKey { case count, firstSeq = "first_seq", lastSeq = "last_seq" }
    }

    private struct Stored: Codable, Equatable {
        var boot: UInt64
        var seq: UInt64
        var laneCounts: [String: Int]?
        var drops: Drops?
        var announcement: OutboxEntry?
        enum CodingKeys: String, CodingKey {
            case boot, seq, laneCounts = "lane_counts", drops = "unannounced_drops", announcement
        }
    }

    /// The highest `boot` or `seq` a state file or an outbox may hold: 2^53, the largest whole number
    /// every JSON reader keeps exact. A higher one was damaged or forged, and counting on from it would wrap.
    static let highestCount: UInt64 = 1 << 53

    /// A count read from disk that the agent cannot go on from (a start would crash or reuse numbers).
    struct Exhausted: Error, CustomStringConvertible {
        var description: String
    }

    /// Loads the state and counts this start. Without a usable directory it keeps it in memory.
    init(directory: String) throws(Exhausted) {
        if let problem = DurableFile.makeDirectory(directory) {
            Log.error("state directory unusable, sequence numbers restart at 1", ["dir": directory, "error": problem])
            path = nil
        } else {
            path = directory + "/device-state.json"
        }
        if let path, let bytes = DurableFile.read(path: path) {
            if let stored = try? JSONDecoder().decode(Stored.self, from: Data(bytes)) {
                try Self.check(stored.boot, "boot", in: path)
                try Self.check(stored.seq, "seq", in: path)
                boot = stored.boot
                seq = stored.seq
                laneCounts = stored.laneCounts ?? [:]
                drops = stored.drops
                announcement = stored.announcement
            } else {
                Log.error("device state unreadable, kept aside; sequence numbers restart", ["path": path])
                _ = rename(path, path + ".corrupt")
            }
        }
        boot += 1
        save()
    }

    mutating func nextSeq() -> UInt64 {
        seq += 1
        return seq
    }

    /// Never below what an outbox on disk already holds.
    mutating func atLeast(seq floor: UInt64, from outbox: String) throws(Exhausted) {
        try Self.check(floor, "seq", in: outbox)
        seq = max(seq, floor)
    }

    private static func check(_ count: UInt64, _ name: String, in path: String) throws(Exhausted) {
        guard count >= highestCount else { return }
        throw Exhausted(description: "\(path) holds \(name) \(count), beyond 2^53: the file is damaged or forged, "
                        + "and counting on from it would wrap\n    hint: the backend orders this device's events by "
                        + "boot and seq; once it has every event, move the state directory aside (counts restart at 1)")
    }

    mutating func setLaneCounts(_ counts: [String: Int]) {
        laneCounts = counts
    }

    mutating func addDrops(_ seqs: [UInt64]) {
        guard let low = seqs.min(), let high = seqs.max() else { return }
        if var d = drops {
            d.count += seqs.count
            d.firstSeq = min(d.firstSeq, low)
            d.lastSeq = max(d.lastSeq, high)
            drops = d
        } else {
            drops = Drops(count: seqs.count, firstSeq: low, lastSeq: high)
        }
    }

    /// The drops are now told by this event (kept until acknowledged).
    mutating func announce(_ entry: OutboxEntry) {
        announcement = entry
        drops = nil
    }

    mutating func announcementAcknowledged(seq: UInt64) {
        if announcement?.event.seq == seq { announcement = nil }
    }

    /// Writes the state if it changed (temp file, fsync, rename).
    mutating func save() {
        let stored = Stored(boot: boot, seq: seq, laneCounts: laneCounts, drops: drops, announcement: announcement)
        guard let path, stored != saved else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let bytes = Array((try? encoder.encode(stored)) ?? Data())
        if let error = DurableFile.replace(path: path, with: bytes) {
            Log.error("cannot save device state", ["path": path, "error": error])
        } else {
            saved = stored
        }
    }
}

private func rename(_ from: String, _ to: String) -> Int32 { Glibc.rename(from, to) }
