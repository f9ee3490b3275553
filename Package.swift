// swift-tools-version:6.0
import Foundation
import PackageDescription

// The libgpiod API the GPIO target is compiled for, decided here, at manifest time: 2 compiles
// Sources/GPIO/Gpiod2.swift (libgpiod 2.x: Debian 13, Raspberry Pi OS trixie), 1 compiles Gpiod1.swift
// (libgpiod 1.6: Debian 12, Raspberry Pi OS bookworm). PARKWISE_LIBGPIOD=1|2 overrides; otherwise the major version
// `pkg-config --modversion libgpiod` reports (the same pkg-config lookup CGPIOD links with); 1 if that fails.
let libgpiodMajor: Int = {
    let environment = ProcessInfo.processInfo.environment
    if let forced = environment["PARKWISE_LIBGPIOD"], let major = Int(forced), major == 1 || major == 2 {
        return major
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["pkg-config", "--modversion", "libgpiod"]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        return 1
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
          let version = String(data: data, encoding: .utf8),
          let major = Int(version.trimmingCharacters(in: .whitespacesAndNewlines).prefix(while: { $0.isNumber })),
          major >= 2 else { return 1 }
    return 2
}()

// Module flow (see README "Layout"):
//   board (GPIO) / simulation / replay  ->  Core (filters, garage: pure)  ->  AgentKit (stamper, device state, event loop)
//   ->  Uplink (outbox, sequence ledger) over MQTT (libmosquitto)  ->  broker  ->  BridgeKit (parkwise-bridge)  ->  PostgreSQL
//   ConfigFile (YAML) feeds Core's config reader; Contract is the wire format shared with monitor and bridge;
//   SystemIO (files, fsync) and ServiceSetup (the host's unit, user, credentials, certificates) sit underneath.
let package = Package(
    name: "parkwise-agent",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "parkwise-agent", targets: ["parkwise-agent"]),
        .executable(name: "parkwise-bridge", targets: ["parkwise-bridge"]),
    ],
    targets: [
        // C libraries from Debian, found with pkg-config. Only adapters import them.
        .systemLibrary(name: "CGPIOD", path: "Sources/CGPIOD", pkgConfig: "libgpiod",
                       providers: [.apt(["libgpiod-dev"])]),
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CYAML", path: "Sources/CYAML", pkgConfig: "yaml-0.1",
                       providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CPostgres", path: "Sources/CPostgres", pkgConfig: "libpq",
                       providers: [.apt(["libpq-dev"])]),
        // adjtimex(2): whether NTP has set the clock (a header of the C library, nothing to link).
        .systemLibrary(name: "CTimex", path: "Sources/CTimex"),

        // Pure core: config model and validation, sensor pipeline, garage events. No C, no I/O, no wall clock.
        .target(name: "ParkWiseCore", path: "Sources/Core"),
        // The delivery promise (every seq arrives or is declared; a declared seq never arrives): pure, no I/O, no clock.
        .target(name: "Delivery", path: "Sources/Delivery", exclude: ["README.md"]),
        // The wire contract: topic names and payloads, shared by agent, monitor and backend bridge.
        .target(name: "ParkWiseContract", path: "Sources/Contract"),
        // The system-I/O layer at the bottom: whole files read and replaced durably (fsync), their failures.
        .target(name: "SystemIO", path: "Sources/SystemIO", exclude: ["README.md"]),
        // The figures operators scrape: Prometheus's text format for node-exporter's textfile collector, and when to
        // rewrite the file. Pure: no I/O, no clock.
        .target(name: "Metrics", path: "Sources/Metrics"),
        // One-line key=value logs to stderr.
        .target(name: "ParkWiseLog", path: "Sources/Log"),
        // YAML file -> ConfigNode tree (libyaml), handed to the core's config reader.
        .target(name: "ConfigFile", dependencies: ["ParkWiseCore", "ParkWiseLog", "SystemIO", "CYAML"], path: "Sources/ConfigFile"),
        // Kernel GPIO through libgpiod (1.6 or 2.x, see libgpiodMajor above).
        .target(name: "GPIO", dependencies: ["ParkWiseCore", "ParkWiseLog", "SystemIO", "CGPIOD"], path: "Sources/GPIO",
                swiftSettings: libgpiodMajor == 2 ? [.define("LIBGPIOD2")] : []),
        // Traffic simulator and trace replay: line changes without a board.
        .target(name: "Simulation", dependencies: ["ParkWiseCore"], path: "Sources/Simulation"),
        // The host's service setup: the systemd unit's sandbox and user, broker credentials, TLS certificates.
        .target(name: "ServiceSetup", dependencies: ["ParkWiseContract", "SystemIO"], path: "Sources/ServiceSetup",
                exclude: ["README.md"]),
        // The MQTT client both programs use (libmosquitto): the link's thread, its connection, settings and doctor's
        // broker probes.
        .target(name: "MQTT", dependencies: ["ParkWiseContract", "ParkWiseLog", "SystemIO", "ServiceSetup", "CMosquitto"],
                path: "Sources/MQTT", exclude: ["README.md"]),
        // The agent's outbox and MQTT session: from a stamped event to the broker's PUBACK.
        .target(name: "Uplink", dependencies: ["Delivery", "MQTT", "ParkWiseContract", "ParkWiseLog", "SystemIO", "ServiceSetup"],
                path: "Sources/Uplink", exclude: ["README.md"]),
        // PostgreSQL through libpq: one owner per handle, parameterized statements only.
        .target(name: "Postgres", dependencies: ["CPostgres"], path: "Sources/Postgres"),
        // Command-line conventions shared by the agent and the bridge: specs, help, exit codes, signals.
        .target(name: "ParkWiseCLI", dependencies: ["ParkWiseCore", "ParkWiseLog"], path: "Sources/CLI", exclude: ["README.md"]),
        // What `parkwise-agent` runs, as a library tests import: the commands, the runtime (event loop, stamping,
        // device state), the status (its model, socket, views), doctor and the walk-test.
        .target(name: "AgentKit",
                dependencies: ["ParkWiseCore", "ParkWiseContract", "ParkWiseLog", "ParkWiseCLI", "ConfigFile", "Delivery",
                               "GPIO", "Simulation", "MQTT", "Uplink", "ServiceSetup", "SystemIO", "CTimex"],
                path: "Sources/AgentKit", exclude: ["README.md"]),
        // The agent's executable: signals, then AgentKit's commands.
        .executableTarget(name: "parkwise-agent", dependencies: ["AgentKit", "ParkWiseCLI"], path: "Sources/Agent"),
        // The backend half, as a library tests import: MQTT feed -> ParkWise's PostgreSQL tables.
        .target(name: "BridgeKit",
                dependencies: ["ParkWiseCore", "ParkWiseContract", "ParkWiseLog", "ParkWiseCLI", "ConfigFile", "MQTT",
                               "ServiceSetup", "SystemIO", "Postgres", "Metrics"],
                path: "Sources/BridgeKit", exclude: ["README.md"]),
        // The bridge's executable: signals, then BridgeKit's commands.
        .executableTarget(name: "parkwise-bridge", dependencies: ["BridgeKit", "ParkWiseCLI"], path: "Sources/Bridge"),
        // Release-mode benchmarks: swift run -c release parkwise-bench
        .executableTarget(name: "parkwise-bench",
                          dependencies: ["ParkWiseCore", "Simulation", "ConfigFile", "ParkWiseContract", "MQTT", "Uplink", "Delivery"],
                          path: "Sources/Bench"),

        .testTarget(name: "CoreTests", dependencies: ["ParkWiseCore", "ConfigFile", "Simulation", "ParkWiseContract"],
                    path: "Tests/CoreTests"),
        // The delivery ledger's rules and its promise, checked in-process against a model disk, link and backend.
        .testTarget(name: "MetricsTests", dependencies: ["Metrics"], path: "Tests/MetricsTests"),
        .testTarget(name: "DeliveryTests", dependencies: ["Delivery"], path: "Tests/DeliveryTests"),
        // Test helpers shared by the end-to-end test targets: child processes, a private mosquitto.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "AgentTests", dependencies: ["ParkWiseContract", "Delivery", "MQTT", "Uplink", "ServiceSetup", "SystemIO", "Simulation", "TestSupport", "AgentKit"],
                    path: "Tests/AgentTests"),
        // The bridge against a private PostgreSQL 15, a private mosquitto and the real agent.
        .testTarget(name: "BridgeTests", dependencies: ["TestSupport", "BridgeKit", "Postgres", "ParkWiseContract"], path: "Tests/BridgeTests"),
    ],
    swiftLanguageModes: [.v6]
)
