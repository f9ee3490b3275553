/// One screen of `parkwise-agent status --watch`: a pure function of the status and the terminal's
/// size. Top to bottom: the agent and its link and outbox; each level with its free, occupied and
/// unknown counts and each zone's spots as a grid (`#` occupied, `.` free, `?` unknown; coloured
/// when the terminal has colour); the lanes with their last passage; inputs not ok. When the
/// terminal is too small, the least needed lines go first (legend, lanes, faulted inputs, grids)
/// and the last line says how many are hidden; every line is cut to the width.
public enum WatchFrame {
    /// Lines of at most `width` characters (escapes aside), at most `height` of them.
    public static func render(_ status: AgentStatus, width: Int, height: Int, colour: Bool) -> [String] {
        guard width > 0, height > 0 else { return [] }
        var lines: [(TextLine, priority: Int)] = []
        func add(_ line: TextLine, _ priority: Int) { lines.append((line, priority)) }

        var title = TextLine("ParkWise \(status.site)/\(status.device)", .bold)
        title.add("  \(status.mode)  up \(StatusWords.duration(status.uptimeSeconds))  \(StatusWords.clockTime(status.now))")
        title.add("  clock \(status.clock)", status.clock == "unsynced" ? .yellow : nil)
        add(title, 0)
        var link = TextLine("link ")
        if status.link.isConnected {
            link.add("connected", .green)
            link.add(" \(status.link.broker ?? "")")
        } else {
            link.add("connecting", .red)
            if let loss = status.link.lastLoss { link.add(" (lost: \(loss))") }
        }
        link.add("  \(StatusWords.plural(status.link.reconnects, "reconnect"))")
        if status.link.idConflict != nil { link.add("  DEVICE ID CONFLICT: another board uses this id", .red) }
        if status.link.publishRefused != nil { link.add("  BROKER REFUSES EVENTS", .red) }
        add(link, 0)
        let outbox = status.outbox
        var out = TextLine("outbox \(outbox.depth)/\(outbox.capacity)", outbox.depth > outbox.capacity / 2 ? .yellow : nil)
        out.add("  oldest \(outbox.oldestAgeSeconds.map { StatusWords.duration($0) } ?? "-")")
        out.add("  seq \(outbox.lastSeq)")
        if outbox.dropsDeclared + outbox.dropsUnannounced > 0 {
            out.add("  dropped \(outbox.dropsDeclared + outbox.dropsUnannounced)", .red)
        }
        if let problem = outbox.problem { out.add("  disk: \(problem)", .red) }
        add(out, 0)

        for level in status.levels {
            add(TextLine(), 5)
            var line = TextLine(StatusWords.padded(level.id, 4), .bold)
            line.add(" free ")
            line.add(level.free.map(String.init) ?? "?", .green)
            line.add("  occupied ")
            line.add(level.occupied.map(String.init) ?? "?", .red)
            line.add("  unknown ")
            line.add("\(level.unknown)", level.unknown > 0 ? .yellow : nil)
            line.add("  of \(level.capacity)  (\(level.source)")
            line.add(level.laneCount.map { ", lanes count \($0))" } ?? ")")
            add(line, 1)
            for row in grid(spots: status.spots.filter { $0.level == level.id }, width: width) { add(row, 2) }
        }

        if !status.lanes.isEmpty {
            add(TextLine(), 5)
            let idWidth = min(12, status.lanes.map(\.id.count).max() ?? 0)
            for lane in status.lanes {
                var line = TextLine(StatusWords.padded(lane.id, idWidth), .bold)
                line.add(" \(lane.from)->\(lane.to)  \(StatusWords.plural(lane.passages, "passage"))")
                if let last = lane.lastPassage {
                    line.add("  last \(StatusWords.clockTime(last.at)) \(last.from)->\(last.to)")
                }
                if lane.faulted { line.add("  FAULTED", .red) }
                add(line, 3)
            }
        }

        let faulted = status.inputs.filter { $0.health != "ok" }
        if !faulted.isEmpty {
            add(TextLine(), 5)
            add(TextLine("\(StatusWords.plural(faulted.count, "input")) not trusted:", .red), 2)
            for input in faulted {
                add(TextLine("  \(input.input) \(input.health) (\(input.feeds))", .yellow), 2)
            }
        }
        var legend = TextLine()
        for state in ["occupied", "free", "unknown"] {
            let (symbol, c) = StatusWords.symbol(state)
            legend.add(symbol, c)
            legend.add(" \(state)  ")
        }
        legend.add("Ctrl-C quits", .dim)
        add(legend, 4)

        return fit(lines, width: width, height: height).map { $0.rendered(colour: colour) }
    }

    /// The zones' grids of one level, as many zones side by side as the width takes; a zone wider
    /// than the screen wraps.
    static func grid(spots: [AgentStatus.Spot], width: Int) -> [TextLine] {
        var zones: [(name: String, spots: [AgentStatus.Spot])] = []
        for spot in spots {
            if let i = zones.firstIndex(where: { $0.name == spot.zone }) { zones[i].spots.append(spot) } else {
                zones.append((spot.zone, [spot]))
            }
        }
        let label = max(1, zones.map(\.name.count).max() ?? 1)
        var rows: [TextLine] = []
        var row = TextLine()
        for zone in zones {
            let cells = zone.spots.map { StatusWords.symbol($0.state) }
            let needed = 2 + label + 1 + cells.count
            if row.width > 0 && row.width + needed > width {
                rows.append(row)
                row = TextLine()
            }
            let room = max(1, width - (2 + label + 1))
            var start = 0
            while start < cells.count {
                if start > 0 {
                    rows.append(row)
                    row = TextLine()
                }
                row.add("  " + StatusWords.padded(start == 0 ? zone.name : "", label) + " ", start == 0 ? .bold : nil)
                let chunk = cells[start..<min(cells.count, start + room)]
                for (symbol, colour) in chunk { row.add(symbol, colour) }
                start += room
            }
        }
        if row.width > 0 { rows.append(row) }
        return rows
    }

    /// Keeps the most needed lines (lowest priority number first, then top to bottom) in their
    /// order; when some do not fit, the last line says so.
    static func fit(_ lines: [(TextLine, priority: Int)], width: Int, height: Int) -> [TextLine] {
        var result: [TextLine]
        if lines.count <= height {
            result = lines.map(\.0)
        } else {
            let room = height - 1
            let kept = Set(lines.indices.sorted { (lines[$0].priority, $0) < (lines[$1].priority, $1) }.prefix(room))
            result = lines.indices.filter(kept.contains).map { lines[$0].0 }
            let hidden = lines.count - result.count - lines.indices.filter { !kept.contains($0) && lines[$0].priority == 5 }.count
            result.append(TextLine(hidden > 0 ? "… \(hidden) more lines: enlarge the terminal" : "", .dim))
        }
        return result.map { $0.cut(to: width) }
    }
}
