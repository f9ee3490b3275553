/// Writes JSON into a byte buffer exactly as `JSONEncoder` with `.sortedKeys` writes it, for the payloads sent on
/// every edge (a new `JSONEncoder` and its boxes per payload cost more than the rest of the edge). The caller writes
/// the keys in JSONEncoder's sorted order (plain byte order); `WireWriterTests` checks every byte against JSONEncoder.
public struct WireWriter: ~Copyable {
    /// Where the bytes go: a scratch buffer on the caller's stack (`written`), moved to the heap only if a payload
    /// outgrows it. Every byte written was a call into the runtime with an array (a uniqueness check, a capacity check,
    /// often a growth): per edge some hundred calls, each a lookup of its own under the VM bench's emulated CPU.
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    private var onHeap = false
    /// A value JSON cannot hold (NaN, infinity) was written: JSONEncoder would have thrown.
    public private(set) var failed = false
    private var first = true

    private init(scratch: UnsafeMutableBufferPointer<UInt8>) {
        base = scratch.baseAddress!
        capacity = scratch.count
    }

    deinit { if onHeap { base.deallocate() } }

    /// The bytes `write` writes, in an array of their size; nil if they cannot be JSON (as `failed`).
    public static func written(_ write: (inout WireWriter) -> Void) -> [UInt8]? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 512) { scratch in
            var writer = WireWriter(scratch: scratch)
            write(&writer)
            guard !writer.failed else { return nil }
            return [UInt8](UnsafeBufferPointer(start: writer.base, count: writer.count))
        }
    }

    @inline(__always) private mutating func room(for more: Int) {
        if count + more > capacity { grow(to: count + more) }
    }

    private mutating func grow(to needed: Int) {
        let larger = max(capacity * 2, needed)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: base, count: count)
        if onHeap { base.deallocate() }
        (base, capacity, onHeap) = (moved, larger, true)
    }

    @inline(__always) private mutating func put(_ byte: UInt8) {
        room(for: 1)
        base[count] = byte
        count += 1
    }

    @inline(__always) private mutating func put(_ run: UnsafeBufferPointer<UInt8>) {
        guard let start = run.baseAddress, !run.isEmpty else { return }
        room(for: run.count)
        (base + count).initialize(from: start, count: run.count)
        count += run.count
    }

    private mutating func put(_ text: StaticString) { text.withUTF8Buffer { put($0) } }

    public mutating func open() {
        put(UInt8(ascii: "{"))
        first = true
    }

    public mutating func close() {
        put(UInt8(ascii: "}"))
        first = false
    }

    /// `"name":`, after a comma unless it is the object's first key. Keys are plain ASCII: never escaped.
    public mutating func key(_ name: StaticString) {
        name.withUTF8Buffer { name in
            room(for: name.count + 4)
            if !first {
                base[count] = UInt8(ascii: ",")
                count += 1
            }
            base[count] = UInt8(ascii: "\"")
            if let start = name.baseAddress { (base + count + 1).initialize(from: start, count: name.count) }
            base[count + 1 + name.count] = UInt8(ascii: "\"")
            base[count + 2 + name.count] = UInt8(ascii: ":")
            count += name.count + 3
        }
        first = false
    }

    /// A value already written as JSON (by a `WireWriter` with the same settings), as it is.
    public mutating func raw(_ json: [UInt8]) { json.withUnsafeBufferPointer { put($0) } }

    /// What is being written cannot be JSON (as `failed`).
    public mutating func fail() { failed = true }

    public mutating func null() { put("null") }

    public mutating func bool(_ value: Bool) { put(value ? "true" : "false") }

    public mutating func integer(_ value: Int) {
        if value < 0 { put(UInt8(ascii: "-")) }
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
            put(UnsafeBufferPointer(rebasing: buffer.assumingMemoryBound(to: UInt8.self)[at...]))
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
        text.withUTF8 { put($0) }
    }

    /// A string, escaped as JSONEncoder escapes it: runs of bytes that need no escape (in ids and times, all of them)
    /// are copied whole, found by a plain index loop (an `enumerated()` filter cost some 20 instructions a byte).
    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            put(UInt8(ascii: "\""))
            var start = 0, i = 0
            let end = utf8.count
            while i < end {
                let byte = utf8[i]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    put(UnsafeBufferPointer(rebasing: utf8[start..<i]))
                    escape(byte)
                    start = i + 1
                }
                i += 1
            }
            put(UnsafeBufferPointer(rebasing: utf8[start..<end]))
            put(UInt8(ascii: "\""))
        }
    }

    private mutating func escape(_ byte: UInt8) {
        put(UInt8(ascii: "\\"))
        switch byte {
        case 0x08: put(UInt8(ascii: "b"))
        case 0x0C: put(UInt8(ascii: "f"))
        case 0x0A: put(UInt8(ascii: "n"))
        case 0x0D: put(UInt8(ascii: "r"))
        case 0x09: put(UInt8(ascii: "t"))
        case 0x00..<0x20:
            let low = byte & 0xF
            put("u00")
            put(UInt8(ascii: "0") + (byte >> 4))
            put(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
        default: put(byte)   // " \\
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
