/// A bridge's share of the devices when several split a feed (`partition: k/N`): a device belongs to bridge k when its
/// `site/device` hashes to k − 1 modulo N. The hash is FNV-1a over the key's UTF-8 bytes: the same on every host and in
/// every release, so each device has one bridge whichever starts first.
struct Partition: Sendable, Equatable, CustomStringConvertible {
    let index: Int
    let count: Int

    /// `k/N` with 1 ≤ k ≤ N ≤ 64; nil otherwise.
    init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]), (1...64).contains(n), (1...n).contains(k)
        else { return nil }
        (index, count) = (k, n)
    }

    var description: String { "\(index)/\(count)" }

    func contains(_ key: DeviceKey) -> Bool {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.description.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return Int(hash % UInt64(count)) == index - 1
    }
}
