/// How many messages the next batch may hold. A site's `statement_timeout` applies to each statement, and a batch
/// writes its messages in a handful of statements whatever its size: one too short for `batch_size` messages would
/// cancel every batch (SQLSTATE 57014) and hold the feed for ever. So a cancelled batch is cut in half, down to one
/// message, and tried again at once; the limit grows back by doubling:
/// - at once after a batch smaller than the limit (the queue held no more: nothing was at stake),
/// - after `growAfter` full batches in a row; a grown limit cancelled again doubles that wait (4, 8 … 64 batches),
///   so a database that stays slow is probed less and less often.
/// Pure: no I/O, no clock.
struct BatchLimit {
    let full: Int
    private(set) var current: Int
    private var fullInARow = 0
    private var growAfter = 4
    /// The last change was a growth: a cancel now says the smaller size was right.
    private var grew = false

    init(full: Int) {
        self.full = max(full, 1)
        current = self.full
    }

    var isCut: Bool { current < full }

    /// A batch of `size` messages was cancelled: cut to half of it. False when one message alone was cancelled
    /// (nothing left to cut).
    mutating func cancelled(size: Int) -> Bool {
        guard size > 1 else { return false }
        if grew { growAfter = min(growAfter * 2, 64) }
        grew = false
        current = max(1, min(current, size) / 2)
        fullInARow = 0
        return true
    }

    /// A batch of `size` messages committed.
    mutating func committed(size: Int) {
        guard isCut else { return }
        if size >= current {
            fullInARow += 1
            guard fullInARow >= growAfter else { return }
        }
        current = min(full, current * 2)
        fullInARow = 0
        grew = true
        if !isCut { growAfter = 4 }
    }
}
