@testable import AgentKit
import Foundation
import Testing
import TestSupport

/// `status --watch`'s frame, from the status of a real simulated campus (156 spots, 4 lanes, 7 zones).
@Suite(.serialized) struct WatchFrameTests {
    static let campus = packageRoot + "/hardware/examples/campus.yaml"

    /// A simulated campus at mid-morning, running until the status shows cars parked.
    static func campusStatus(broker: Broker? = nil) throws -> (AgentStatus, RunningAgent) {
        let agent = try RunningAgent(temporaryDirectory(), ["--config", campus, "--simulate", "--speed", "60", "--sim-start", "09:00"],
                                     broker: broker)
        #expect(eventually(20) { ((try? agent.status())?.levels.map(\.spotsOccupied).reduce(0, +) ?? 0) >= 5 }, "\(agent.child.stderr)")
        return (try agent.status(), agent)
    }

    static func stripped(_ line: String) -> String {
        line.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
    }

    @Test func theCampusFitsAn80By24Terminal() throws {
        let broker = try Broker()
        let (status, agent) = try WatchFrameTests.campusStatus(broker: broker)
        agent.stop()
        #expect(status.spots.count == 156 && status.lanes.count == 4)
        let lines = WatchFrame.render(status, width: 80, height: 24, colour: false)
        #expect(lines.count <= 24 && lines.allSatisfy { $0.count <= 80 }, "\(lines.joined(separator: "\n"))")
        #expect(!lines.contains { $0.contains("more lines") }, "nothing hidden: \(lines.joined(separator: "\n"))")
        #expect(lines[0].hasPrefix("ParkWise uniandes/campus-main  simulated"))
        #expect(lines.contains { $0.hasPrefix("link connected \(broker.url)") })
        // Every spot shows once, as its state; each level's counts are the ones it reports.
        let grid = lines.filter { $0.hasPrefix("  ") }
        #expect(grid.joined().count(where: { "#.?".contains($0) }) == 156, "\(grid)")
        #expect(grid.joined().count(where: { $0 == "#" }) == status.spots.count(where: { $0.state == "occupied" }))
        for level in status.levels {
            #expect(lines.contains { $0.hasPrefix(level.id) && $0.contains("free \(level.free.map(String.init) ?? "?")") })
        }
        for lane in status.lanes { #expect(lines.contains { $0.hasPrefix(lane.id) }) }
        // In colour, the same text.
        let coloured = WatchFrame.render(status, width: 80, height: 24, colour: true)
        #expect(coloured.contains { $0.contains("\u{1B}[") })
        #expect(coloured.map(WatchFrameTests.stripped) == lines)
    }

    /// Too small a terminal: the header stays, grids and lanes give way, the last line says what is
    /// hidden, no line is wider than the screen; a narrow one wraps each zone without losing a spot.
    @Test func smallTerminalsKeepTheHeaderAndSayWhatIsHidden() throws {
        let (status, agent) = try WatchFrameTests.campusStatus()
        agent.stop()
        for (width, height) in [(80, 12), (40, 10), (20, 5), (80, 3), (1, 1)] {
            let lines = WatchFrame.render(status, width: width, height: height, colour: true).map(WatchFrameTests.stripped)
            #expect(lines.count <= height && lines.allSatisfy { $0.count <= width }, "\(width)x\(height): \(lines)")
            #expect(lines.last?.hasPrefix(width > 1 ? "… " : "…") == true, "\(width)x\(height): \(lines)")
            if height >= 3 { #expect(lines[0].hasPrefix(String("ParkWise uniandes".prefix(width - 1)))) }
        }
        let twelve = WatchFrame.render(status, width: 80, height: 12, colour: false)
        #expect(status.levels.allSatisfy { level in twelve.contains { $0.hasPrefix(level.id) } }, "levels before grids: \(twelve)")
        let narrow = WatchFrame.render(status, width: 16, height: 200, colour: false)
        #expect(narrow.allSatisfy { $0.count <= 16 })
        let cells = narrow.filter { $0.hasPrefix("  ") }.map { $0.dropFirst(4) }.joined()
        #expect(cells.count(where: { "#.?".contains($0) }) == 156, "\(narrow)")
        #expect(WatchFrame.render(status, width: 0, height: 24, colour: false).isEmpty)
    }

    /// `status --watch` redraws until SIGINT and exits 0; piped, it writes plain frames.
    @Test func watchRedrawsUntilInterrupted() throws {
        let dir = temporaryDirectory()
        let agent = try RunningAgent(dir, ["--config", try writeContractGarage(dir), "--replay", try writeTrace(dir, contractTrace)],
                                     broker: nil)
        let watch = try Child(agentBinary, ["status", "--watch", "--socket", agent.socket])
        #expect(eventually(10) { watch.stdout.components(separatedBy: "ParkWise testsite/contract-dev").count >= 3 }, "\(watch.stdout)")
        #expect(!watch.stdout.contains("\u{1B}"), "no escapes into a pipe")
        watch.signal(SIGINT)
        #expect(watch.wait(5) == 0, "\(watch.stderr)")
        agent.stop()
    }
}
