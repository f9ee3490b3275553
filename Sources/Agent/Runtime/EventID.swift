import Glibc

/// Event ids: random (version 4) UUIDs in lowercase text, as the contract wants, drawn from a pool of random bytes
/// that one read of /dev/urandom refills every 256 ids (Foundation's UUID() opens, reads and closes /dev/urandom for
/// each one: three system calls per event).
struct EventID {
    private var pool = [UInt8](repeating: 0, count: 4096)
    private var used = 4096

    mutating func next() -> String {
        if used + 16 > pool.count { refill() }
        var bytes = pool[used..<(used + 16)].map { $0 }
        used += 16
        bytes[6] = bytes[6] & 0x0F | 0x40   // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80   // RFC 4122 variant
        let hex = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(36)
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private mutating func refill() {
        var filled = 0
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            while filled < pool.count {
                let n = pool.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
                if n > 0 { filled += n } else if n == 0 || errno != EINTR { break }
            }
            close(fd)
        }
        // Without /dev/urandom (a broken chroot), the system generator still gives unique ids.
        var generator = SystemRandomNumberGenerator()
        for i in filled..<pool.count { pool[i] = generator.next() }
        used = 0
    }
}
