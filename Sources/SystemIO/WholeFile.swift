#if canImport(Glibc)
import Glibc
#endif

/// A whole file read with plain system calls (no Foundation, no URL): the bytes, or the errno of the call that failed.
public enum WholeFile {
    public struct Failure: Error, Sendable {
        public let errno: Int32
    }

    public static func read(_ path: String) -> Result<[UInt8], Failure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Failure(errno: errno)) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return n == 0 ? .success(bytes) : .failure(Failure(errno: errno)) }
            bytes.append(contentsOf: chunk[..<n])
        }
    }
}
