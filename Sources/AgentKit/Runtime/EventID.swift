import Glibc
import SystemIO

/// Event ids: random (version 4) UUIDs in lowercase text, as the contract wants, drawn from a pool of random bytes
/// that one read of /dev/urandom refills every 256 ids (Foundation's UUID() opens, reads and closes /dev/urandom for
/// each one: three system calls per event).
struct EventID {
    private var pool = [UInt8](repeating: 0, count: 4096)
    private var used = 4096

    mutating func next() -> String {
        if used + 16 > pool.count { refill() }
        let start = used
        used += 16
        pool[start + 6] = pool[start + 6] & 0x0F | 0x40   // version 4
        pool[start + 8] = pool[start + 8] & 0x3F | 0x80   // RFC 4122 variant
        return pool.withUnsafeBufferPointer { random in
            String(unsafeUninitializedCapacity: 36) { text in
                var at = 0
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        text[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    let byte = random[start + i]
                    text[at] = EventID.hex(byte >> 4)
                    text[at + 1] = EventID.hex(byte & 0x0F)
                    at += 2
                }
                return at
            }
        }
    }

    private static func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 48 + nibble : 87 + nibble }

    private mutating func refill() {
        var filled = 0
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            while filled < pool.count {
                let n = retryingOnInterrupt { pool.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) } }
                guard n > 0 else { break }
                filled += n
            }
            close(fd)
        }
        // Without /dev/urandom (a broken chroot), the system generator still gives unique ids.
        var generator = SystemRandomNumberGenerator()
        for i in filled..<pool.count { pool[i] = generator.next() }
        used = 0
    }
}
