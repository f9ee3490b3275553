import Glibc

/// The running kernel must stamp line events with CLOCK_MONOTONIC (Linux 5.7 and later; before, the GPIO
/// character device used the wall clock, and every timer of the garage model would jump with NTP).
enum KernelCheck {
    static let minimum = (major: 5, minor: 7)

    static func requireMonotonicEventClock() throws(GPIOError) {
        guard let release = kernelRelease(), let version = parse(release) else { return }  // unknown: give it a go
        guard version < minimum else { return }
        throw GPIOError(code: .requestFailed,
                        message: "Linux \(release) stamps GPIO events with the wall clock; the agent needs Linux "
                            + "\(minimum.major).\(minimum.minor) or later (monotonic event timestamps). Update the OS image")
    }

    /// "6.1.0-rpi7-rpi-v8" -> (6, 1).
    static func parse(_ release: String) -> (major: Int, minor: Int)? {
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2, release.first?.isNumber == true else { return nil }
        return (numbers[0], numbers[1])
    }

    private static func kernelRelease() -> String? {
        var names = utsname()
        guard uname(&names) == 0 else { return nil }
        return withUnsafeBytes(of: names.release) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }
}
