/// One thing the installer does during a walk-test: cover a spot's sensor, or drive over a lane's loops a then b.
public struct WalkStep: Sendable, Hashable {
    public enum Kind: String, Sendable, Codable { case spot, lane }

    /// The spot's or the lane's id.
    public var id: String
    public var kind: Kind
    /// Indexes into `AgentConfig.inputs`: the spot's sensor, or the lane's loops a and b.
    public var inputs: [Int]
    /// What to ask of the installer, e.g. "Cover P1-A-03 now — sensor on 1-0020:GPA2".
    public var prompt: String

    /// Every spot and lane of a config, in the order of its inputs (lanes, then spots).
    public static func all(of config: AgentConfig) -> [WalkStep] {
        var steps: [WalkStep] = []
        for (n, lane) in config.lanes.enumerated() {
            steps.append(WalkStep(id: lane.id, kind: .lane, inputs: [2 * n, 2 * n + 1],
                                  prompt: "Drive over lane \(lane.id) from \(lane.from) to \(lane.to) now — "
                                      + "loop a on \(lane.loopA.ref) first, then loop b on \(lane.loopB.ref)"))
        }
        let base = 2 * config.lanes.count
        for (n, spot) in config.spots.enumerated() {
            steps.append(WalkStep(id: spot.id, kind: .spot, inputs: [base + n],
                                  prompt: "Cover \(spot.id) now — sensor on \(spot.input.ref)"))
        }
        return steps
    }
}

/// What a walk-test found for one step: the verdict, and a sentence for the technician with the fix.
public struct WalkResult: Sendable, Hashable, Codable {
    public enum Verdict: String, Sendable, Codable, CaseIterable {
        /// The expected input changed, cleanly.
        case confirmed
        /// Another input changed instead: its wires (or the config's line) are swapped with this one's.
        case swapped
        /// The input reads active at rest and went inactive when acted on: `active_low` is the wrong way round.
        case polarity
        /// Loop b triggered before loop a for the lane's way in.
        case loopsSwapped = "loops_swapped"
        /// Far more edges than a clean change within the input's filter window.
        case bouncy
        /// The installer skipped it.
        case skipped
    }

    /// The step's id (spot or lane).
    public var step: String
    public var verdict: Verdict
    /// The lines the step watched, as the config writes them.
    public var inputs: [String]
    /// Edges counted within the filter window after the first (the most of a lane's two loops).
    public var edges: Int?
    /// `swapped`: the input that changed instead, e.g. "spot P1-A-04", and its line.
    public var other: String?
    public var otherInput: String?
    public var detail: String

    public init(step: String, verdict: Verdict, inputs: [String], edges: Int? = nil, other: String? = nil,
                otherInput: String? = nil, detail: String) {
        self.step = step
        self.verdict = verdict
        self.inputs = inputs
        self.edges = edges
        self.other = other
        self.otherInput = otherInput
        self.detail = detail
    }
}
