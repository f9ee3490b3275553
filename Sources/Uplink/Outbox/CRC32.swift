/// CRC-32 (IEEE 802.3, as zlib and Ethernet use it), for the outbox's records.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
        bytes.withContiguousStorageIfAvailable(checksum(of:)) ?? Array(bytes).withUnsafeBufferPointer(checksum(of:))
    }

    /// Over memory in place: the record of every edge is checked, without a bounds check per byte.
    private static func checksum(of bytes: UnsafeBufferPointer<UInt8>) -> UInt32 {
        table.withUnsafeBufferPointer { table in
            var c: UInt32 = 0xFFFF_FFFF
            for byte in bytes { c = table[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
            return c ^ 0xFFFF_FFFF
        }
    }
}
