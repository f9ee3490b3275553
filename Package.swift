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
//   board / simulation / replay  ->  Core (pure garage model)  ->  Uplink (outbox + MQTT)  ->  broker
//   ConfigFile (YAML) feeds Core's config reader; Contract is the wire format shared with monitor and bridge.
let package = Package(
    name: "parkwise-agent",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "parkwise-agent", targets: ["parkwise-agent"]),
    ],
    targets: [
        // C libraries from Debian, found with pkg-config. Only adapters import them.
        .systemLibrary(name: "CGPIOD", path: "Sources/CGPIOD", pkgConfig: "libgpiod",
                       providers: [.apt(["libgpiod-dev"])]),
        .systemLibrary(name: "CMosquitto", path: "Sources/CMosquitto", pkgConfig: "libmosquitto",
                       providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CYAML", path: "Sources/CYAML", pkgConfig: "yaml-0.1",
                       providers: [.apt(["libyaml-dev"])]),
        // adjtimex(2): whether NTP has set the clock (a header of the C library, nothing to link).
        .systemLibrary(name: "CTimex", path: "Sources/CTimex"),

        // Pure core: config model and validation, sensor pipeline, garage events. No C, no I/O, no wall clock.
        .target(name: "ParkWiseCore", path: "Sources/Core"),
        // The wire contract: topic names and payloads, shared by agent, monitor and backend bridge.
        .target(name: "ParkWiseContract", path: "Sources/Contract"),
        // One-line key=value logs to stderr.
        .target(name: "ParkWiseLog", path: "Sources/Log"),
        // YAML file -> ConfigNode tree (libyaml), handed to the core's config reader.
        .target(name: "ConfigFile", dependencies: ["ParkWiseCore", "CYAML"], path: "Sources/ConfigFile"),
        // Kernel GPIO through libgpiod (1.6 or 2.x, see libgpiodMajor above).
        .target(name: "GPIO", dependencies: ["ParkWiseCore", "ParkWiseLog", "CGPIOD"], path: "Sources/GPIO",
                swiftSettings: libgpiodMajor == 2 ? [.define("LIBGPIOD2")] : []),
        // Traffic simulator and trace replay: line changes without a board.
        .target(name: "Simulation", dependencies: ["ParkWiseCore"], path: "Sources/Simulation"),
        // Outbox and MQTT session (libmosquitto).
        .target(name: "Uplink", dependencies: ["ParkWiseContract", "ParkWiseLog", "CMosquitto"], path: "Sources/Uplink"),
        // Composition root and CLI.
        .executableTarget(name: "parkwise-agent",
                          dependencies: ["ParkWiseCore", "ParkWiseContract", "ParkWiseLog", "ConfigFile",
                                         "GPIO", "Simulation", "Uplink", "CTimex"],
                          path: "Sources/Agent"),
        // Release-mode benchmarks: swift run -c release parkwise-bench
        .executableTarget(name: "parkwise-bench",
                          dependencies: ["ParkWiseCore", "Simulation", "ConfigFile", "ParkWiseContract", "Uplink"],
                          path: "Sources/Bench"),

        .testTarget(name: "CoreTests", dependencies: ["ParkWiseCore", "ConfigFile", "Simulation", "ParkWiseContract"],
                    path: "Tests/CoreTests"),
        .testTarget(name: "AgentTests", dependencies: ["ParkWiseContract", "Uplink"], path: "Tests/AgentTests"),
    ],
    swiftLanguageModes: [.v6]
)
