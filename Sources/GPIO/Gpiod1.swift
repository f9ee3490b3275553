#if !LIBGPIOD2
import SystemIO
import CGPIOD
import Glibc
import ParkWiseCore

// The libgpiod 1.6 backend (the default build; Package.swift defines LIBGPIOD2 for libgpiod 2.x, which compiles
// Gpiod2.swift instead). Every gpiod_* call of this build is in this file, behind four small types:
//   ChipHandle  - an open /dev/gpiochipN: name, label, line info, name lookup, requesting a line
//   LineHandle  - one line requested as input with both-edge events: level, event fd, reading edges
//   EdgeBuffer  - the memory edges are read into (one per reading thread)
//   RawEdge / RawLineInfo - what the rest of the module sees, free of C types
// Gpiod2.swift is the libgpiod 2.x sibling with the same types, selected at build time.
//
// Threading: libgpiod objects are not thread-safe. The owners below are used by one thread at a time:
// the thread calling GPIOBoard.open / GPIOInventory.lines, then only the event thread reads edges
// (with its own EdgeBuffer), and the handles are freed once the event thread has let go of them.

/// One edge as the kernel reported it.
struct RawEdge {
    /// Rising in logical terms: the kernel applies active-low before it names the edge.
    var rising: Bool
    /// The kernel's event timestamp: CLOCK_MONOTONIC nanoseconds on Linux 5.7 and later.
    var nanoseconds: Int64
}

/// One line as `gpioinfo` shows it.
struct RawLineInfo {
    var name: String?
    var consumer: String?
    var isOutput: Bool
    var isUsed: Bool
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
        guard let chip = gpiod_chip_open(path) else { throw GpiodError(errno: .current) }
        return ChipHandle(chip: chip, path: path)
    }

    private init(chip: OpaquePointer, path: String) {
        self.chip = chip
        self.path = path
        name = gpiod_chip_name(chip).map { String(cString: $0) } ?? ""
        label = gpiod_chip_label(chip).map { String(cString: $0) } ?? ""
        lineCount = Int(gpiod_chip_num_lines(chip))
        device = ChipDevices.parentDevice(path: path, chipName: name)
    }

    deinit {
        gpiod_chip_close(chip)
    }

    /// The line's current name, consumer and state, or nil if the kernel would not tell.
    func info(offset: Int) -> RawLineInfo? {
        guard let line = line(at: offset) else { return nil }  // gpiod_chip_get_line refreshes the info
        return RawLineInfo(name: Self.name(of: line), consumer: Self.consumer(of: line),
                           isOutput: gpiod_line_direction(line) == Int32(GPIOD_LINE_DIRECTION_OUTPUT),
                           isUsed: gpiod_line_is_used(line))
    }

    /// The names of all lines, by offset (nil for unnamed lines).
    func lineNames() -> [String?] {
        (0..<lineCount).map { offset in line(at: offset).flatMap(Self.name(of:)) }
    }

    /// The offset of the line with this exact name: `likely` if that line has it (one question to the kernel instead
    /// of one per line before it), else the first that has it.
    /// (A loop over gpiod_chip_get_line rather than gpiod_chip_find_line, so no line bulk of at most 64 is involved.)
    func offset(ofLineNamed wanted: String, likely: Int? = nil) -> Int? {
        if let likely, likely >= 0, likely < lineCount, let line = line(at: likely), Self.name(of: line) == wanted {
            return likely
        }
        for offset in 0..<lineCount {
            if let line = line(at: offset), Self.name(of: line) == wanted { return offset }
        }
        return nil
    }

    /// Requests the line as input with events on both edges; `activeLow` and `bias` go to the kernel.
    func requestBothEdges(offset: Int, consumer: String, activeLow: Bool, bias: Bias) throws(LineRequestError) -> LineHandle {
        guard let line = line(at: offset) else { throw LineRequestError(errno: .current, holder: nil) }
        let holderBefore = Self.consumer(of: line)
        var flags: Int32 = 0
        if activeLow { flags |= Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) }
        switch bias {
        case .pullUp: flags |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)
        case .pullDown: flags |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN)
        case .disabled: flags |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE)
        case .asIs: break
        }
        guard gpiod_line_request_both_edges_events_flags(line, consumer, flags) == 0 else {
            let number = Errno.current
            var holder = holderBefore
            if number == .busy, gpiod_line_update(line) == 0, let now = Self.consumer(of: line) { holder = now }
            throw LineRequestError(errno: number, holder: holder)
        }
        return LineHandle(chip: self, line: line, offset: offset)
    }

    private func line(at offset: Int) -> OpaquePointer? {
        guard offset >= 0, offset < lineCount else { return nil }
        return gpiod_chip_get_line(chip, UInt32(offset))
    }

    private static func name(of line: OpaquePointer) -> String? {
        gpiod_line_name(line).map { String(cString: $0) }
    }

    private static func consumer(of line: OpaquePointer) -> String? {
        guard let text = gpiod_line_consumer(line) else { return nil }
        let consumer = String(cString: text)
        return consumer.isEmpty ? nil : consumer
    }
}

/// A line requested for both-edge events. Releases it on deinit, then lets go of its chip.
final class LineHandle {
    /// Held so the chip stays open as long as the line is requested (the gpiod_line belongs to the chip).
    let chip: ChipHandle
    let offset: Int
    private let line: OpaquePointer

    fileprivate init(chip: ChipHandle, line: OpaquePointer, offset: Int) {
        self.chip = chip
        self.line = line
        self.offset = offset
    }

    deinit {
        gpiod_line_release(line)
    }

    /// The logical level now (active-low applied by the kernel).
    func level() throws(GpiodError) -> Bool {
        let value = gpiod_line_get_value(line)
        guard value >= 0 else { throw GpiodError(errno: .current) }
        return value == 1
    }

    /// The descriptor that becomes readable (POLLIN) when edges are queued.
    var eventFD: Int32 { gpiod_line_event_get_fd(line) }

    /// Reads the queued edges, at most `EdgeBuffer.capacity`, oldest first, and appends them to `edges`.
    /// Blocks if none is queued, so call it only after poll() reported the event fd readable.
    func readEdges(using buffer: EdgeBuffer, into edges: inout [RawEdge]) throws(GpiodError) {
        let count = gpiod_line_event_read_multiple(line, buffer.events, UInt32(EdgeBuffer.capacity))
        guard count >= 0 else { throw GpiodError(errno: .current) }
        for index in 0..<Int(count) {
            let event = buffer.events[index]
            let nanoseconds = Int64(event.ts.tv_sec) * 1_000_000_000 + Int64(event.ts.tv_nsec)
            edges.append(RawEdge(rising: event.event_type == Int32(GPIOD_LINE_EVENT_RISING_EDGE),
                                 nanoseconds: nanoseconds))
        }
    }
}

/// Room for one read of edges. Each reading thread has its own.
final class EdgeBuffer {
    /// libgpiod 1.6 reads at most 16 events per call (and the v1 kernel queue holds 16 per line).
    static let capacity = 16
    fileprivate let events: UnsafeMutablePointer<gpiod_line_event>

    /// Cannot fail here (plain memory); throws for the same signature as the 2.x buffer, a libgpiod object.
    static func make() throws(GpiodError) -> EdgeBuffer {
        EdgeBuffer()
    }

    private init() {
        events = .allocate(capacity: Self.capacity)
        events.initialize(repeating: gpiod_line_event(), count: Self.capacity)
    }

    deinit {
        events.deinitialize(count: Self.capacity)
        events.deallocate()
    }
}
#endif
