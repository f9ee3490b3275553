import Uplink

/// `parkwise-agent status` as text: the agent, link, outbox and clock, then every level, lane,
/// spot (as a grid per zone) and input.
public enum StatusText {
    public static func render(_ s: AgentStatus) -> String {
        var out: [String] = []
        out.append("parkwise-agent \(s.version)  \(s.site)/\(s.device)  mode \(s.mode)  boot \(s.boot)  pid \(s.pid)")
        out.append("uptime     \(StatusWords.duration(s.uptimeSeconds)) (since \(s.startedAt))  clock \(s.clock)  log \(s.logLevel)"
                   + (s.configHash.map { "  config \($0)" } ?? ""))
        let link = s.link
        out.append("link       " + (link.isConnected ? "connected to \(link.broker ?? "?") since \(link.connectedSince ?? "?")"
                                                      : "connecting (brokers: \(link.brokers.joined(separator: ", ")))")
                   + ", \(StatusWords.plural(link.reconnects, "reconnect"))" + (link.lastLoss.map { " (last lost: \($0))" } ?? ""))
        if let conflict = link.idConflict { out.append("           DEVICE ID CONFLICT: \(conflict); fix: \(AgentStatus.Link.idConflictFix)") }
        if let refused = link.publishRefused {
            out.append("           BROKER REFUSES EVENTS: \(refused); kept in the outbox; fix: \(UplinkSession.refusalHint)")
        }
        if let dropped = link.oversizedCommands, dropped > 0 {
            out.append("           \(StatusWords.plural(dropped, "command")) dropped unread, over \(CommandHandler.payloadLimit) bytes")
        }
        let o = s.outbox
        out.append("outbox     \(o.depth) of \(o.capacity) pending" + (o.oldestSeq.map { ", oldest seq \($0)" } ?? "")
                   + (o.oldestAgeSeconds.map { " waiting \(StatusWords.duration($0))" } ?? "") + ", last seq \(o.lastSeq)"
                   + ", drops declared \(o.dropsDeclared)" + (o.dropsUnannounced > 0 ? " (\(o.dropsUnannounced) not yet acknowledged)" : "")
                   + "  \(o.path)")
        if let problem = o.problem { out.append("           disk problem: \(problem)") }

        out.append("")
        out.append("levels     capacity  occupied  free  unknown  source   lane count")
        for l in s.levels {
            out.append("  " + StatusWords.padded(l.id, 9) + cell(l.capacity, 10) + cell(l.occupied, 10) + cell(l.free, 6)
                       + cell(l.unknown, 9) + StatusWords.padded(l.source, 9) + (l.laneCount.map(String.init) ?? "-"))
        }
        if !s.lanes.isEmpty {
            out.append("")
            let idWidth = max(9, (s.lanes.map(\.id.count).max() ?? 0) + 1)
            out.append(StatusWords.padded("lanes", idWidth + 2) + "route               loops                passages  last passage")
            for l in s.lanes {
                out.append("  " + StatusWords.padded(l.id, idWidth) + StatusWords.padded("\(l.from) -> \(l.to)", 20)
                           + StatusWords.padded("\(l.loopA) / \(l.loopB)", 21) + cell(l.passages, 10)
                           + (l.lastPassage.map { "\($0.at) \($0.from) -> \($0.to)" } ?? "-") + (l.faulted ? "  FAULTED" : ""))
            }
        }
        if !s.spots.isEmpty {
            out.append("")
            out.append("spots      # occupied  . free  ? unknown")
            for level in s.levels {
                let spots = s.spots.filter { $0.level == level.id }
                guard !spots.isEmpty else { continue }
                out.append("  \(level.id)")
                out += WatchFrame.grid(spots: spots, width: 78).map { "  " + $0.plain }
            }
        }
        out.append("")
        let never = s.inputs.count(where: { $0.changes == 0 })
        out.append("inputs     \(s.inputs.count), \(s.faultedInputs) not ok, \(never) never changed since start")
        out.append("  " + StatusWords.padded("input", 15) + StatusWords.padded("feeds", 24) + "raw  filtered  health   changes  last change")
        for i in s.inputs {
            out.append("  " + StatusWords.padded(i.input, 15) + StatusWords.padded(i.feeds, 24) + StatusWords.padded(i.raw ? "1" : "0", 5)
                       + StatusWords.padded(i.filtered ? "1" : "0", 10) + StatusWords.padded(i.health, 9) + cell(i.changes, 9)
                       + (i.lastChangeAgoSeconds.map { "\(StatusWords.duration($0)) ago" } ?? "never"))
        }
        return out.joined(separator: "\n")
    }

    private static func cell(_ n: Int?, _ width: Int) -> String { StatusWords.padded(n.map(String.init) ?? "-", width) }
}
