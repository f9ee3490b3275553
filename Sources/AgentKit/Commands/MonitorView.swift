import ParkWiseCLI
import ParkWiseContract
import ParkWiseCore

/// The monitor's picture of a site, kept per device (two devices may both report a level P1):
/// printed lines for each message, and marks for devices that are offline or have gone silent.
struct MonitorView {
    /// One device's part of the picture.
    private struct Device {
        var label: String
        var state: String?
        var levels: [String: LevelStatePayload] = [:]
        var lastLevelLine = ""
        var lastHeard: ContinuousClock.Instant
        var silent = false
    }

    let staleAfter: Duration
    private var devices: [String: Device] = [:]

    init(staleAfter: Duration) {
        self.staleAfter = staleAfter
    }

    /// The lines a message adds to the view.
    mutating func take(topic: String, payload: [UInt8], at now: ContinuousClock.Instant) -> [String] {
        guard let (site, device, rest) = Topics.parse(topic) else { return [] }
        let key = site + "/" + device
        var lines: [String] = []
        var entry = devices[key] ?? Device(label: device, lastHeard: now)
        if entry.silent {
            entry.silent = false
            lines.append("\(entry.label): heard again")
        }
        entry.lastHeard = now
        defer { devices[key] = entry }
        switch rest.first {
        case "status":
            guard let s = WireJSON.decode(StatusPayload.self, from: payload) else { return lines }
            entry.state = s.state
            var line = "\(device): \(s.state)" + (s.boot.map { " (boot \($0)" + (s.version.map { ", v\($0)" } ?? "") + ")" } ?? "")
            if s.state == "offline" && !entry.levels.isEmpty { line += ", its levels are as last known" }
            lines.append(line)
            if let levels = levelLine(&entry) { lines.append(levels) }
        case "events":
            guard let e = WireJSON.decode(EventPayload.self, from: payload) else { return lines + ["\(device): unreadable event"] }
            let time = e.at.count >= 23 ? String(e.at.dropFirst(11).prefix(12)) : e.at
            var what = [e.spot, e.lane, e.subject].compactMap { $0 }.joined(separator: " ")
            if let from = e.from, let to = e.to { what += " \(from) -> \(to)" }
            if let stay = e.staySeconds { what += " stayed \(minutes(stay))" }
            if let reason = e.reason { what += " (\(reason))" }
            lines.append("\(time)  \(device) #\(e.seq)\(e.replayed == true ? " replayed" : "")  \(padded(e.type, 15)) \(what)")
        case "state" where rest.count == 3 && rest[1] == "level":
            guard let l = WireJSON.decode(LevelStatePayload.self, from: payload) else { return lines }
            entry.levels[rest[2]] = l
            if let levels = levelLine(&entry) { lines.append(levels) }
        default:
            break
        }
        return lines
    }

    /// Marks devices that say they are online but have sent nothing for `staleAfter` (a retained
    /// `online` outlives a device whose broker restarted without its last will, for one).
    mutating func check(at now: ContinuousClock.Instant) -> [String] {
        var lines: [String] = []
        for key in devices.keys.sorted() {
            guard var entry = devices[key], !entry.silent, entry.state != "offline",
                  now - entry.lastHeard >= staleAfter else { continue }
            entry.silent = true
            devices[key] = entry
            let quiet = (now - entry.lastHeard).components.seconds
            lines.append("\(entry.label): stale, nothing heard for \(quiet >= 60 ? "\(quiet / 60)m" : "\(quiet)s"); "
                         + "its states may be old")
        }
        return lines
    }

    /// `levels DEVICE: P1 12/60  P2 ?/48`, when it differs from the device's last one; a level counted with spaces
    /// nobody knows says how many (`P1 2/60 (1 unknown)`: 2 known occupied, 57 known free).
    private func levelLine(_ entry: inout Device) -> String? {
        guard !entry.levels.isEmpty else { return nil }
        let mark = entry.state == "offline" ? " (offline, last known)" : ""
        let line = "levels \(entry.label)\(mark): " + entry.levels.keys.sorted().map { id in
            let s = entry.levels[id]!
            let unknown = s.occupied != nil && s.unknown > 0 ? " (\(s.unknown) unknown)" : ""
            return "\(id) \(s.occupied.map(String.init) ?? "?")/\(s.capacity)\(unknown)"
        }.joined(separator: "  ")
        guard line != entry.lastLevelLine else { return nil }
        entry.lastLevelLine = line
        return line
    }

    /// `42m` for a stay in seconds from the network; `?` for one no garage sees (negative, absurd).
    func minutes(_ seconds: Double) -> String {
        guard seconds >= 0, seconds < 100 * 365 * 86_400 else { return "?" }
        return "\(Int(seconds / 60))m"
    }
}
