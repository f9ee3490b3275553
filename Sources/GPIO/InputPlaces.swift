import ParkWiseCore

/// Where a config's inputs are on this machine, without requesting them: for `parkwise-agent lines`.
public enum InputPlaces {
    /// `"gpiochip0:17"` -> the input's owner ("lane P2-ramp loop a"), and a line for each input that
    /// cannot be found (or for the whole board when it has no chips).
    public static func resolve(_ inputs: [InputConfig], board: BoardChoice) -> (places: [String: String], problems: [String]) {
        let resolver: LineResolver
        do { resolver = try LineResolver(board: board) } catch { return ([:], [error.message]) }
        var places: [String: String] = [:]
        var problems: [String] = []
        for input in inputs {
            do {
                let line = try resolver.resolve(input)
                places["\(line.chip.name):\(line.offset)"] = input.owner
            } catch {
                problems.append(error.message)
            }
        }
        return (places, problems)
    }
}
