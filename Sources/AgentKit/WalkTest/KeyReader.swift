import Glibc
import ParkWiseLog
import SystemIO

/// What the installer can ask for during a walk-test.
enum WalkKey: Sendable {
    case skip, retry, quit

    /// `s`/`skip`, `r`/`retry`, `q`/`quit` (any case); nil for anything else.
    init?(_ word: String) {
        switch word.lowercased() {
        case "s", "skip": self = .skip
        case "r", "retry": self = .retry
        case "q", "quit": self = .quit
        default: return nil
        }
    }
}

/// Reads the installer's keys from stdin on a dedicated thread. On a terminal one key press is enough (the
/// terminal is put in non-canonical mode without echo, signals still work, and `restore()` puts it back); from a
/// pipe (tests, scripts) one word per line. End of input just ends the reading.
final class KeyReader: Sendable {
    let isTerminal: Bool
    private let saved: termios?

    init(onKey: @escaping @Sendable (WalkKey) -> Void) {
        isTerminal = isatty(0) == 1
        var settings = termios()
        if isTerminal, tcgetattr(0, &settings) == 0 {
            saved = settings
            var raw = settings
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            tcsetattr(0, TCSANOW, &raw)
        } else {
            saved = nil
        }
        let terminal = isTerminal
        _ = DedicatedThread {
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while true {
                let n = retryingOnInterrupt { read(0, &byte, 1) }
                if n <= 0 { return }
                if terminal {
                    if let key = WalkKey(String(decoding: [byte], as: UTF8.self)) { onKey(key) }
                } else if byte == UInt8(ascii: "\n") {
                    let word = String(decoding: line, as: UTF8.self).filter { !$0.isWhitespace }
                    if let key = WalkKey(word) { onKey(key) }
                    line.removeAll()
                } else if line.count < 64 {
                    line.append(byte)
                }
            }
        }
    }

    /// The terminal as it was before.
    func restore() {
        guard var saved else { return }
        tcsetattr(0, TCSANOW, &saved)
    }
}
