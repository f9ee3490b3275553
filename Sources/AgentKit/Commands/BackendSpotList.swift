import ParkWiseCore
import SystemIO

/// The backend's spot ids, one a line (blank lines and `#` comments skipped), as `parkwise-bridge export-config
/// --spots` writes them from ParkWise's `spots` table: `check-config --spots` refuses a spot id not in it.
struct BackendSpotList {
    let path: String
    let ids: Set<String>

    /// The list's ids; a file that cannot be read, or that holds no id, is a problem (exit 78).
    static func read(path: String) -> Result<BackendSpotList, BackendSpotListError> {
        let bytes: [UInt8]
        switch WholeFile.read(path) {
        case .success(let read): bytes = read
        case .failure(let failure):
            return .failure(BackendSpotListError(message: "cannot read the spot list \(path): \(failure.errno.map(\.description) ?? "not a regular file")",
                                                 hint: "write it with parkwise-bridge export-config --spots \(path)"))
        }
        var ids: Set<String> = []
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r") }
            let trimmed = line.drop(while: blank).reversed().drop(while: blank).reversed()
            let id = String(decoding: trimmed, as: UTF8.self)
            if id.isEmpty || id.hasPrefix("#") { continue }
            ids.insert(id)
        }
        guard !ids.isEmpty else {
            return .failure(BackendSpotListError(message: "the spot list \(path) has no spot id",
                                                 hint: "write it with parkwise-bridge export-config --spots \(path) (one id a line)"))
        }
        return .success(BackendSpotList(path: path, ids: ids))
    }

    /// A problem at each spot of `config` whose id the backend does not know, with the closest id it knows.
    func unknownSpots(_ config: AgentConfig, configPath: String) -> [ConfigIssue] {
        config.spots.filter { !ids.contains($0.id) }.map { spot in
            let close = suggestion(for: spot.id, among: ids).map { "did you mean '\($0)'? " } ?? ""
            return ConfigIssue(file: configPath, mark: spot.mark,
                               message: "spot \(spot.id) is not in the backend's spot list \(path) (\(ids.count) spots)",
                               hint: close + "take spot ids from the backend (parkwise-bridge export-config), never type them; "
                                   + "a spot the backend lacks must be added there first")
        }
    }
}

struct BackendSpotListError: Error {
    var message: String
    var hint: String
}
