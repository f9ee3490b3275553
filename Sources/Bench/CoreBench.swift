import ConfigFile
import Glibc
import ParkWiseCore
import Simulation

/// Core throughput: line changes through filters -> lanes/spots -> levels -> events, on one core.
/// `generateOnly` skips the core: valgrind's allocation count of the difference is the core's.
func coreBench(count: Int, generateOnly: Bool) {
let path = "hardware/examples/campus.yaml"

let config: AgentConfig
do { config = try ConfigFile.load(path: path) } catch {
    print(error.description)
    exit(78)
}

// A simulated day of traffic, generated before timing so only the core is measured.
var simulator = TrafficSimulator(config: config, seed: 42, startMinute: 6 * 60)
var changes: [LineChange] = []
changes.reserveCapacity(count)
while changes.count < count, let change = simulator.next() {
    changes.append(change.lineChange(startingAt: .milliseconds(0)))
}


var garage = Garage(config: config)
garage.start(initial: Array(repeating: false, count: garage.inputCount), at: .milliseconds(0))
var events: [GarageEvent] = []
events.reserveCapacity(64)
var produced = 0
var stateUpdates = 0
let start = now()
for change in changes where !generateOnly {
    garage.handle(change, into: &events)
    produced += events.count
    events.removeAll(keepingCapacity: true)
    let changed = garage.takeChanged()   // as the agent does after every batch
    stateUpdates += changed.spots.count + changed.levels.count
}
let seconds = now() - start
let simulatedHours = Double(changes.last?.at.nanoseconds ?? 0) / 3.6e12
print("core: \(changes.count) line changes (\(String(format: simulatedHours)) simulated hours of the campus) "
      + "in \(String(format: seconds)) s = \(Int(Double(changes.count) / seconds)) changes/s, \(produced) events, "
      + "\(stateUpdates) state updates")
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

extension String {
    init(format value: Double) {
        self = String(Double(Int(value * 1000)) / 1000)
    }
}
