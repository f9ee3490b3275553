/// Signal conditioning for one input, timed from the kernel's edge timestamps.
///
/// - `delayed(on:off:)`: a new level counts only once it has held for `on` (rising) or `off`
///   (falling); a shorter pulse is dropped entirely.
/// - `settle(d)`: a change counts at once, then the input is left to settle for `d`; if it ends
///   the window at another level, that level counts and a new window starts.
///
/// Either way the filtered level always ends at the line's final stable level, a pulse never
/// leaves it stuck, and the same level is never reported twice.
struct InputFilter {
    enum Mode: Equatable { case delayed(on: Duration, off: Duration), settle(Duration) }

    let mode: Mode
    private(set) var stable: Bool
    private(set) var raw: Bool
    /// The edge the pending level started with (delayed mode), or the last edge (settle mode).
    private var edge: MonotonicInstant?
    private(set) var deadline: MonotonicInstant?

    init(mode: Mode, initial: Bool) {
        self.mode = mode
        stable = initial
        raw = initial
    }

    /// Feeds a raw edge. Returns the edge time when the filtered level changes at once.
    mutating func feed(_ active: Bool, at: MonotonicInstant) -> MonotonicInstant? {
        guard active != raw else { return nil }
        raw = active
        switch mode {
        case .settle(let window):
            edge = at
            guard deadline == nil, active != stable else { return nil }
            stable = active
            deadline = at + window
            return at
        case .delayed(let on, let off):
            if active == stable {
                edge = nil
                deadline = nil
                return nil
            }
            let delay = active ? on : off
            if delay == .zero {
                stable = active
                edge = nil
                deadline = nil
                return at
            }
            edge = at
            deadline = at + delay
            return nil
        }
    }

    /// Called when `deadline` has passed. Returns the edge time if the filtered level changes.
    mutating func expire() -> MonotonicInstant? {
        guard let due = deadline else { return nil }
        deadline = nil
        switch mode {
        case .settle(let window):
            guard raw != stable, let edge else { return nil }
            stable = raw
            deadline = due + window
            return edge
        case .delayed:
            guard let since = edge else { return nil }
            stable = raw
            edge = nil
            return since
        }
    }

    /// Records a raw level without filtering it (while the input is faulted).
    mutating func observe(_ active: Bool) {
        raw = active
    }

    /// Takes the raw level as the filtered one (after a fault clears).
    mutating func resync() {
        stable = raw
        edge = nil
        deadline = nil
    }
}
