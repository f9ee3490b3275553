#if LIBGPIOD2
import SystemIO
import CGPIOD
import Glibc
import ParkWiseCore

// The libgpiod 2.x backend (Debian 13, Raspberry Pi OS trixie), compiled instead of Gpiod1.swift when Package.swift
// defines LIBGPIOD2. Every gpiod_* call of that build is in this file, behind the same small types as the 1.6 one:
//   ChipHandle  - an open /dev/gpiochipN: name, label, line info, name lookup, requesting a line
//   LineHandle  - one line requested as input with both-edge events: level, event fd, reading edges
//   EdgeBuffer  - the memory edges are read into (one per reading thread)
//   RawEdge / RawLineInfo - what the rest of the module sees, free of C types
// Every libgpiod object is owned by exactly one Swift object, created by a throwing factory (errno of the failed
// call) and freed in its deinit: a LineHandle releases its request before it lets go of its chip, so requests are
// released before the chip closes. The short-lived ones (chip info, line info, settings, configs) are `CObject`s.
//
// Threading: as with 1.6, libgpiod objects are not thread-safe and each owner is used by one thread at a time
// (see Gpiod1.swift): the opening thread, then only the event thread with its own EdgeBuffer.

/// One edge as the kernel reported it.
struct RawEdge {
    /// Rising in logical terms: the kernel applies active-low before it names the edge.
    var rising: Bool
    /// The kernel's event timestamp: CLOCK_MONOTONIC nanoseconds (requested explicitly with the v2 uAPI).
    var nanoseconds: Int64
}

/// One line as `gpioinfo` shows it.
struct RawLineInfo {
    var name: String?
    var consumer: String?
    var isOutput: Bool
    var isUsed: Bool
}

/// One libgpiod object with its free function: the owner of short-lived handles (chip info, line info, line
/// settings, line and request configs). The pointer is only lent out inside `use`, which keeps the owner (and so
/// the object) alive until the closure returns.
private final class CObject {
    private let pointer: OpaquePointer
    private let free: (OpaquePointer) -> Void

    /// `create`'s result, or the errno it left when it returned NULL.
    static func make(_ create: () -> OpaquePointer?, free: @escaping (OpaquePointer) -> Void) throws(GpiodError) -> CObject {
        Glibc.errno = 0
        guard let pointer = create() else { throw GpiodError(errno: Glibc.errno == 0 ? Errno(ENOMEM) : .current) }
        return CObject(pointer: pointer, free: free)
    }

    private init(pointer: OpaquePointer, free: @escaping (OpaquePointer) -> Void) {
        self.pointer = pointer
        self.free = free
    }

    deinit {
        free(pointer)
    }

    func use<Result, Failure: Error>(_ body: (OpaquePointer) throws(Failure) -> Result) throws(Failure) -> Result {
        defer { withExtendedLifetime(self) {} }
        return try body(pointer)
    }
}

/// A C call's -1 result as a GpiodError.
private func check(_ status: Int32) throws(GpiodError) {
    guard status >= 0 else { throw GpiodError(errno: Glibc.errno == 0 ? Errno(EINVAL) : .current) }
}

/// An open GPIO chip. Closes it on deinit; lines requested from it keep it open (they hold a reference).
final class ChipHandle {
    /// The device path it was opened with, e.g. "/dev/gpiochip0".
    let path: String
    /// The kernel's name, e.g. "gpiochip0".
    let name: String
    /// The driver's label, e.g. "pinctrl-rp1".
    let label: String
    /// The device the chip belongs to in sysfs, e.g. "1-0020" (an MCP23017 at 0x20 on I2C bus 1); nil if unknown.
    let device: String?
    let lineCount: Int
    private let chip: OpaquePointer

    static func open(path: String) throws(GpiodError) -> ChipHandle {
        Glibc.errno = 0
        guard let chip = gpiod_chip_open(path) else { throw GpiodError(errno: Glibc.errno == 0 ? Errno(ENODEV) : .current) }
        // Owned from here on: a failure below closes it again (deinit of the half-made handle is not run, so close here).
        let info: CObject
        do {
            info = try CObject.make({ gpiod_chip_get_info(chip) }, free: { gpiod_chip_info_free($0) })
        } catch {
            gpiod_chip_close(chip)
            throw error
        }
        let (name, label, lineCount) = info.use { info in
            (gpiod_chip_info_get_name(info).map { String(cString: $0) } ?? "",
             gpiod_chip_info_get_label(info).map { String(cString: $0) } ?? "",
             Int(gpiod_chip_info_get_num_lines(info)))
        }
        return ChipHandle(chip: chip, path: path, name: name, label: label, lineCount: lineCount)
    }

    private init(chip: OpaquePointer, path: String, name: String, label: String, lineCount: Int) {
        self.chip = chip
        self.path = path
        self.name = name
        self.label = label
        self.lineCount = lineCount
        device = ChipDevices.parentDevice(path: path, chipName: name)
    }

    deinit {
        gpiod_chip_close(chip)
    }

    /// The line's current name, consumer and state, or nil if the kernel would not tell.
    func info(offset: Int) -> RawLineInfo? {
        guard let info = lineInfo(at: offset) else { return nil }  // a fresh snapshot from the kernel each time
        return info.use { info in
            RawLineInfo(name: Self.name(of: info), consumer: Self.consumer(of: info),
                        isOutput: gpiod_line_info_get_direction(info) == GPIOD_LINE_DIRECTION_OUTPUT,
                        isUsed: gpiod_line_info_is_used(info))
        }
    }

    /// The names of all lines, by offset (nil for unnamed lines).
    func lineNames() -> [String?] {
        (0..<lineCount).map { offset in lineInfo(at: offset)?.use(Self.name(of:)) }
    }

    /// The offset of the line with this exact name: `likely` if that line has it (one question to the kernel instead
    /// of libgpiod's scan of every line before it), else the first that has it.
    func offset(ofLineNamed wanted: String, likely: Int? = nil) -> Int? {
        if let likely, likely >= 0, likely < lineCount, lineInfo(at: likely)?.use(Self.name(of:)) == wanted {
            return likely
        }
        let offset = gpiod_chip_get_line_offset_from_name(chip, wanted)  // -1 with ENOENT when no line has it
        return offset >= 0 && Int(offset) < lineCount ? Int(offset) : nil
    }

    /// Requests the line as input with events on both edges; `activeLow` and `bias` go to the kernel.
    func requestBothEdges(offset: Int, consumer: String, activeLow: Bool, bias: Bias) throws(LineRequestError) -> LineHandle {
        guard offset >= 0, offset < lineCount else { throw LineRequestError(errno: Errno(EINVAL), holder: nil) }
        let holderBefore = lineInfo(at: offset)?.use(Self.consumer(of:))
        do {
            let settings = try CObject.make({ gpiod_line_settings_new() }, free: { gpiod_line_settings_free($0) })
            try settings.use { settings throws(GpiodError) in
                try check(gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_INPUT))
                try check(gpiod_line_settings_set_edge_detection(settings, GPIOD_LINE_EDGE_BOTH))
                try check(gpiod_line_settings_set_event_clock(settings, GPIOD_LINE_CLOCK_MONOTONIC))
                let cBias: gpiod_line_bias
                switch bias {
                case .pullUp: cBias = GPIOD_LINE_BIAS_PULL_UP
                case .pullDown: cBias = GPIOD_LINE_BIAS_PULL_DOWN
                case .disabled: cBias = GPIOD_LINE_BIAS_DISABLED
                case .asIs: cBias = GPIOD_LINE_BIAS_AS_IS
                }
                try check(gpiod_line_settings_set_bias(settings, cBias))
                gpiod_line_settings_set_active_low(settings, activeLow)
            }
            let lineConfig = try CObject.make({ gpiod_line_config_new() }, free: { gpiod_line_config_free($0) })
            try lineConfig.use { config throws(GpiodError) in
                try settings.use { settings throws(GpiodError) in
                    var cOffset = UInt32(offset)
                    try check(gpiod_line_config_add_line_settings(config, &cOffset, 1, settings))
                }
            }
            let requestConfig = try CObject.make({ gpiod_request_config_new() }, free: { gpiod_request_config_free($0) })
            requestConfig.use { gpiod_request_config_set_consumer($0, consumer) }
            let request = try requestConfig.use { requestConfig throws(GpiodError) in
                try lineConfig.use { lineConfig throws(GpiodError) in
                    Glibc.errno = 0
                    guard let request = gpiod_chip_request_lines(chip, requestConfig, lineConfig) else {
                        throw GpiodError(errno: Glibc.errno == 0 ? Errno(EIO) : .current)
                    }
                    return request
                }
            }
            return LineHandle(chip: self, request: request, offset: offset)
        } catch {
            var holder = holderBefore
            if error.errno == .busy, let now = lineInfo(at: offset)?.use(Self.consumer(of:)) { holder = now }
            throw LineRequestError(errno: error.errno, holder: holder)
        }
    }

    private func lineInfo(at offset: Int) -> CObject? {
        guard offset >= 0, offset < lineCount else { return nil }
        return try? CObject.make({ gpiod_chip_get_line_info(chip, UInt32(offset)) }, free: { gpiod_line_info_free($0) })
    }

    private static func name(of info: OpaquePointer) -> String? {
        guard let text = gpiod_line_info_get_name(info) else { return nil }
        let name = String(cString: text)
        return name.isEmpty ? nil : name
    }

    private static func consumer(of info: OpaquePointer) -> String? {
        guard let text = gpiod_line_info_get_consumer(info) else { return nil }
        let consumer = String(cString: text)
        return consumer.isEmpty ? nil : consumer
    }
}

/// A line requested for both-edge events. Releases the request on deinit, then lets go of its chip.
final class LineHandle {
    /// Held so the chip stays open as long as the line is requested (released after the request, in deinit order).
    let chip: ChipHandle
    let offset: Int
    private let request: OpaquePointer

    fileprivate init(chip: ChipHandle, request: OpaquePointer, offset: Int) {
        self.chip = chip
        self.request = request
        self.offset = offset
    }

    deinit {
        gpiod_line_request_release(request)
        // `chip` is released after this body: the request goes before its chip can close.
    }

    /// The logical level now (active-low applied by the kernel).
    func level() throws(GpiodError) -> Bool {
        let value = gpiod_line_request_get_value(request, UInt32(offset))
        guard value != GPIOD_LINE_VALUE_ERROR else { throw GpiodError(errno: Glibc.errno == 0 ? Errno(EIO) : .current) }
        return value == GPIOD_LINE_VALUE_ACTIVE
    }

    /// The descriptor that becomes readable (POLLIN) when edges are queued.
    var eventFD: Int32 { gpiod_line_request_get_fd(request) }

    /// Reads the queued edges, at most `EdgeBuffer.capacity`, oldest first, and appends them to `edges`.
    /// Blocks if none is queued, so call it only after poll() reported the event fd readable.
    func readEdges(using buffer: EdgeBuffer, into edges: inout [RawEdge]) throws(GpiodError) {
        let count = gpiod_line_request_read_edge_events(request, buffer.buffer, EdgeBuffer.capacity)
        guard count >= 0 else { throw GpiodError(errno: .current) }
        for index in 0..<Int(count) {
            guard let event = gpiod_edge_event_buffer_get_event(buffer.buffer, UInt(index)) else { continue }
            // One line per request, so the event's line offset is always `offset`.
            edges.append(RawEdge(rising: gpiod_edge_event_get_event_type(event) == GPIOD_EDGE_EVENT_RISING_EDGE,
                                 nanoseconds: Int64(truncatingIfNeeded: gpiod_edge_event_get_timestamp_ns(event))))
        }
    }
}

/// Room for one read of edges. Each reading thread has its own.
final class EdgeBuffer {
    /// As with 1.6: the kernel queues 16 events per requested line by default, so one read takes them all.
    static let capacity = 16
    fileprivate let buffer: OpaquePointer

    static func make() throws(GpiodError) -> EdgeBuffer {
        Glibc.errno = 0
        guard let buffer = gpiod_edge_event_buffer_new(capacity) else {
            throw GpiodError(errno: Glibc.errno == 0 ? Errno(ENOMEM) : .current)
        }
        return EdgeBuffer(buffer: buffer)
    }

    private init(buffer: OpaquePointer) {
        self.buffer = buffer
    }

    deinit {
        gpiod_edge_event_buffer_free(buffer)
    }
}
#endif
