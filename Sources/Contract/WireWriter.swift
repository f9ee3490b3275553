/// Writes JSON into a byte buffer exactly as `JSONEncoder` with `.sortedKeys` writes it, for the payloads sent on
/// every edge (a new `JSONEncoder` and its boxes per payload cost more than the rest of the edge). The caller writes
/// the keys in JSONEncoder's sorted order (plain byte order); `WireWriterTests` checks every byte against JSONEncoder.
public struct WireWriter {
    public private(set) var bytes: [UInt8] = []
    /// A value JSON cannot hold (NaN, infinity) was written: JSONEncoder would have thrown.
    public private(set) var failed = false
    private var first = true

    public init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    public mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        first = true
    }

    public mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        first = false
    }

    /// `"name":`, after a comma unless it is the object's first key. Keys are plain ASCII: never escaped.
    public mutating func key(_ name: StaticString) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A value already written as JSON (by a `WireWriter` with the same settings), as it is.
    public mutating func raw(_ json: [UInt8]) { bytes.append(contentsOf: json) }

    /// What is being written cannot be JSON (as `failed`).
    public mutating func fail() { failed = true }

    public mutating func null() { bytes.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")]) }

    public mutating func bool(_ value: Bool) {
        if value {
            bytes.append(contentsOf: [UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"), UInt8(ascii: "e")])
        } else {
            bytes.append(contentsOf: [UInt8(ascii: "f"), UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "e")])
        }
    }

    public mutating func integer(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        unsigned(UInt64(value.magnitude))
    }

    public mutating func unsigned(_ value: UInt64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 20 digits at most, written backwards on the stack
        withUnsafeMutableBytes(of: &digits) { buffer in
            var n = value, at = buffer.count
            repeat {
                at -= 1
                buffer[at] = UInt8(ascii: "0") &+ UInt8(n % 10)
                n /= 10
            } while n != 0
            bytes.append(contentsOf: buffer[at...])
        }
    }

    /// As JSONEncoder: the shortest form that reads back the same (`description`), without a trailing `.0`.
    public mutating func double(_ value: Double) {
        guard value.isFinite else {
            failed = true
            return
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// A string, escaped as JSONEncoder escapes it: runs of bytes that need no escape (in ids and times, all of them)
    /// are copied whole, found by a plain index loop (an `enumerated()` filter cost some 20 instructions a byte).
    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            bytes.append(UInt8(ascii: "\""))
            var start = 0, i = 0
            let end = utf8.count
            while i < end {
                let byte = utf8[i]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                    escape(byte)
                    start = i + 1
                }
                i += 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<end]))
            bytes.append(UInt8(ascii: "\""))
        }
    }

    private mutating func escape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x00..<0x20:
            let low = byte & 0xF
            bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), UInt8(ascii: "0") + (byte >> 4),
                                      low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10])
        default: bytes.append(byte)   // " \\
        }
    }

    // Optional values: `orNull` writes null as JSONEncoder's `encode(_:forKey:)` does; `ifPresent` leaves the key
    // out as the synthesized `encodeIfPresent` does.
    public mutating func string(_ name: StaticString, _ value: String) { key(name); string(value) }
    public mutating func string(_ name: StaticString, ifPresent value: String?) { if let value { string(name, value) } }
    public mutating func string(_ name: StaticString, orNull value: String?) {
        key(name)
        if let value { string(value) } else { null() }
    }
    public mutating func integer(_ name: StaticString, _ value: Int) { key(name); integer(value) }
    public mutating func integer(_ name: StaticString, ifPresent value: Int?) { if let value { integer(name, value) } }
    public mutating func integer(_ name: StaticString, orNull value: Int?) {
        key(name)
        if let value { integer(value) } else { null() }
    }
    public mutating func unsigned(_ name: StaticString, _ value: UInt64) { key(name); unsigned(value) }
    public mutating func unsigned(_ name: StaticString, ifPresent value: UInt64?) { if let value { unsigned(name, value) } }
    public mutating func bool(_ name: StaticString, _ value: Bool) { key(name); bool(value) }
    public mutating func bool(_ name: StaticString, ifPresent value: Bool?) { if let value { bool(name, value) } }
    public mutating func double(_ name: StaticString, ifPresent value: Double?) { if let value { key(name); double(value) } }
}
