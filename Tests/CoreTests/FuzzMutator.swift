import Glibc
import Simulation

/// Seeded mutations of a text input (a config, a trace): bit flips, hostile tokens inserted, ranges
/// deleted or repeated, numbers replaced by extreme ones. The same seed gives the same inputs.
struct FuzzMutator {
    private var random: SeededRandom
    private let tokens: [[UInt8]]

    init(seed: UInt64, tokens: [String]) {
        random = SeededRandom(seed: seed)
        self.tokens = (tokens + FuzzMutator.extremes).map { Array($0.utf8) }
    }

    /// Numbers and shapes that break parsers: overflow, precision, nesting, encodings.
    static let extremes = ["0", "-1", "-0", "1.5", "99999999999999999999", "9223372036854775807", "9223372036854775808",
                           "18446744073709551615", "1e308", "1e-308", "nan", "inf", "0x10", "106752d", "365d", "366d",
                           "0.000001ms", "\u{0}", "\u{FEFF}", "é", "\u{202E}", "\r\n", "\t",
                           String(repeating: "[", count: 300), String(repeating: "{\"a\": ", count: 300)]

    mutating func mutate(_ text: [UInt8]) -> [UInt8] {
        var bytes = text
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !bytes.isEmpty:
                bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
            case 1:
                bytes.insert(contentsOf: tokens.randomElement(using: &random)!, at: at)
            case 2 where !bytes.isEmpty:
                bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...24, using: &random)))
            case 3 where !bytes.isEmpty:
                let piece = bytes[at..<min(bytes.count, at + Int.random(in: 1...80, using: &random))]
                bytes.insert(contentsOf: piece, at: Int.random(in: 0...bytes.count, using: &random))
            default:
                replaceNumber(in: &bytes, from: at)
            }
        }
        return bytes
    }

    /// The first run of digits from `start` becomes an extreme number.
    private mutating func replaceNumber(in bytes: inout [UInt8], from start: Int) {
        let isDigit = { (b: UInt8) in b >= 48 && b <= 57 }
        guard let first = bytes[start...].firstIndex(where: isDigit) ?? bytes.firstIndex(where: isDigit) else { return }
        let end = bytes[first...].firstIndex(where: { !isDigit($0) }) ?? bytes.count
        bytes.replaceSubrange(first..<end, with: Array(FuzzMutator.extremes[Int.random(in: 0..<11, using: &random)].utf8))
    }
}

/// How many fuzz cases a test runs: a few thousand in the suite; PARKWISE_FUZZ_CASES for a long nightly run.
func fuzzCases(_ standard: Int) -> Int {
    guard let text = getenv("PARKWISE_FUZZ_CASES").map({ String(cString: $0) }), let n = Int(text), n > 0 else { return standard }
    return n
}
