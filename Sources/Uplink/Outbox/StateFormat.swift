import SystemIO
import FoundationEssentials

/// The version of the formats of the state directory's files (`outbox.log`, `device-state.json`, `seq.ledger`).
///
/// Version 1 is every file written so far, and it carries no marker of its own (so the files this agent writes are
/// byte for byte those every earlier release writes and reads): `seq.ledger`'s slots begin with the magic `PWSEQ1`,
/// whose digit is the version; a `device-state.json` without a `"format"` key, and an `outbox.log` without a
/// `{"format": N}` record, are version 1. A later format says its version there (`PWSEQ2`, `"format": 2`, a first
/// record `{"format": 2}`), and this agent refuses such a file with exit 78 instead of reading it as damage,
/// "repairing" it and declaring its seqs dropped: a rollback needs the state directory of its own format.
public enum StateFormat {
    /// The version this agent reads and writes.
    public static let current: UInt64 = 1

    /// The refusal of a file of a later format: what it is, and what to do.
    public static func newer(_ path: String, version: UInt64) -> UplinkError {
        UplinkError(.newerFormat, "\(path) has format version \(version), newer than the \(current) this agent reads: "
                    + "it was written by a newer parkwise-agent, and this one would take it for damage and declare its "
                    + "events dropped\n    hint: install the newer parkwise-agent again, or, once the backend has every "
                    + "event, move the state directory aside (counts restart at 1)")
    }
}

extension StateFormat {
    /// The first file of `directory` written in a newer format, refused (nil: none). Reads only what says the
    /// version: the state file's `"format"` key, the ledger's magic, the outbox's first record; a file that is not
    /// there, not a regular file, or unreadable is left to its reader (which sets it aside or says so).
    public static func check(directory: String) -> UplinkError? {
        for name in ["device-state.json", "device-state.json.bak"] {
            let path = directory + "/" + name
            guard case .bytes(let bytes) = DurableFile.readState(path: path, limit: 1 << 20),
                  let version = (try? JSONDecoder().decode(Marker.self, from: Data(bytes)))?.format,
                  version > current else { continue }
            return newer(path, version: version)
        }
        let ledger = directory + "/seq.ledger"
        if case .bytes(let bytes) = DurableFile.readState(path: ledger, limit: 1 << 16) {
            let slots = stride(from: 0, to: bytes.count - SeqLedger.slotSize + 1, by: SeqLedger.slotSize).prefix(2)
                .map { Array(bytes[$0..<($0 + SeqLedger.slotSize)]) }
            if let version = slots.compactMap(SeqLedger.formatVersion).max(), version > current { return newer(ledger, version: version) }
        }
        let outbox = directory + "/outbox.log"
        if let version = OutboxLog.firstRecordFormat(path: outbox), version > current { return newer(outbox, version: version) }
        return nil
    }

    /// A JSON object's `"format"` key (other keys ignored).
    private struct Marker: Decodable {
        var format: UInt64?
    }
}
