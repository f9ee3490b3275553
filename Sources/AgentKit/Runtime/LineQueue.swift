import ParkWiseCore
import Synchronization

/// The line changes between the source (the GPIO event thread, the simulator, a trace) and the event loop:
/// bounded, so a chattering input or a burst faster than the loop can store events never grows the process.
/// The loop takes everything waiting at once (one batch, one disk sync). When `bound` changes are waiting, later
/// ones are shed: only the last change of each input is kept, and handed over after the waiting ones, so every
/// input still ends at its true level; the loop declares how many were shed (an `input.shed` event).
final class LineQueue: Sendable {
    struct Batch {
        /// In the order they happened.
        var changes: [LineChange] = []
        /// Line changes shed (coalesced into the last change of their input, which is in `changes`).
        var shed = 0
        /// The inputs some of whose changes were shed.
        var shedInputs: Set<Int> = []
    }

    private struct State {
        var waiting: [LineChange] = []
        /// Per input, its last change since the queue filled up.
        var last: [Int: LineChange] = [:]
        var shed = 0
        var shedInputs: Set<Int> = []
        /// The loop has been told that changes are waiting, and has not taken them yet.
        var told = false
    }

    let bound: Int
    private let state = Mutex(State())
    private let tell: @Sendable () -> Void

    /// `tell` wakes the loop: called once for changes waiting, not again until the loop takes them.
    init(bound: Int, tell: @escaping @Sendable () -> Void) {
        self.bound = max(1, bound)
        self.tell = tell
    }

    func push(_ changes: [LineChange]) {
        let wake = state.withLock { s -> Bool in
            for change in changes {
                if s.waiting.count < bound {
                    s.waiting.append(change)
                } else {
                    if s.last.updateValue(change.superseding(s.last[change.input]), forKey: change.input) != nil {
                        s.shed += 1
                        s.shedInputs.insert(change.input)
                    }
                }
            }
            guard !s.told, !changes.isEmpty else { return false }
            s.told = true
            return true
        }
        if wake { tell() }
    }

    /// Everything waiting, and how many changes were shed since the last take.
    func take() -> Batch {
        state.withLock { s in
            let batch = Batch(changes: s.waiting + s.last.values.sorted { $0.at < $1.at }, shed: s.shed,
                              shedInputs: s.shedInputs)
            s.waiting.removeAll(keepingCapacity: s.waiting.count <= 1024)
            s.last.removeAll()
            s.shed = 0
            s.shedInputs.removeAll()
            s.told = false
            return batch
        }
    }
}
