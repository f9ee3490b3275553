import SystemIO
import Glibc

/// One GPIO line of the machine, as `gpioinfo` shows it.
public struct GPIOLineInfo: Sendable {
    public var chipName: String
    public var chipLabel: String
    public var offset: Int
    public var name: String?
    public var consumer: String?
    public var isOutput: Bool
    public var isUsed: Bool
    /// The device the chip belongs to in sysfs ("1-0020", "gpio-sim.0"): also usable as the chip in `chip:line`.
    public var chipDevice: String?

    public init(chipName: String, chipLabel: String, offset: Int, name: String?, consumer: String?,
                isOutput: Bool, isUsed: Bool, chipDevice: String? = nil) {
        self.chipName = chipName
        self.chipLabel = chipLabel
        self.offset = offset
        self.name = name
        self.consumer = consumer
        self.isOutput = isOutput
        self.isUsed = isUsed
        self.chipDevice = chipDevice
    }
}

/// Every chip and line of the machine, for the `lines` CLI command.
public enum GPIOInventory {
    /// All lines of all chips, by chip number then offset. Empty on a machine without GPIO chips.
    public static func lines() throws(GPIOError) -> [GPIOLineInfo] {
        var result: [GPIOLineInfo] = []
        for path in ChipDevices.paths() {
            let chip: ChipHandle
            do {
                chip = try ChipHandle.open(path: path)
            } catch {
                // Gone since the listing, or not a GPIO chip after all: nothing to show.
                if [.noEntry, .noDevice, .noSuchDeviceOrAddress, Errno(ENOTTY)].contains(error.errno) { continue }
                throw .cannotOpen(path, errno: error.errno)
            }
            for offset in 0..<chip.lineCount {
                guard let info = chip.info(offset: offset) else { continue }
                result.append(GPIOLineInfo(chipName: chip.name, chipLabel: chip.label, offset: offset, name: info.name,
                                           consumer: info.consumer, isOutput: info.isOutput, isUsed: info.isUsed,
                                           chipDevice: chip.device))
            }
        }
        return result
    }
}
