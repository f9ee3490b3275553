import Glibc

// Benchmarks that print figures (never assertions); deploy/dev/bench.sh runs them all.
//   parkwise-bench core [changes] [generate-only]   core throughput
//   parkwise-bench uplink <broker-port> <dir>        outbox append cost, drain of 200, sustained QoS 1
//   parkwise-bench drain <broker-port> <dir>         drain of a full outbox at the capacity limit (20,000)
//   parkwise-bench overflow [events]                 what the full outbox's overflow policy costs per event
//   parkwise-bench sustained <broker-port> <dir>     highest rate without drops, broker acking in 5-20 ms
//   parkwise-bench wire [encodes]                    ns per payload encode: hand-written vs JSONEncoder
//   parkwise-bench delivery [events]                 the delivery ledger's cost per event, live and in an outage
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "uplink":
    guard arguments.count == 3, let port = Int(arguments[1]) else {
        print("usage: parkwise-bench uplink <broker-port> <dir>")
        exit(64)
    }
    await uplinkBench(port: port, directory: arguments[2])
case "drain":
    guard arguments.count == 3, let port = Int(arguments[1]) else {
        print("usage: parkwise-bench drain <broker-port> <dir>")
        exit(64)
    }
    await drainBench(port: port, directory: arguments[2])
case "sustained":
    guard arguments.count == 3, let port = Int(arguments[1]) else {
        print("usage: parkwise-bench sustained <broker-port> <dir>")
        exit(64)
    }
    await sustainedBench(port: port, directory: arguments[2])
case "overflow":
    overflowBench(events: arguments.dropFirst().first.flatMap { Int($0) } ?? 200)
case "delivery":
    deliveryBench(count: arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000_000)
case "wire":
    wireBench(count: arguments.dropFirst().first.flatMap { Int($0) } ?? 200_000)
default:
    let rest = arguments.first == "core" ? Array(arguments.dropFirst()) : arguments
    coreBench(count: rest.first.flatMap { Int($0) } ?? 2_000_000, generateOnly: rest.dropFirst().first == "generate-only")
}
