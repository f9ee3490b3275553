/// Debounce for one input: a new level counts only after it has held for `delayedOn` (rising) or
/// `delayedOff` (falling), timed from the kernel's edge timestamp. A pulse shorter than the delay
/// is dropped entirely; the filtered level always ends at the line's last stable level, and the
/// same level is never reported twice.
struct InputFilter {
    let delayedOn: Duration
    let delayedOff: Duration
    private(set) var stable: Bool
    private(set) var raw: Bool
    /// The edge that starts the pending level, and when it becomes stable.
    private(set) var pendingSince: MonotonicInstant?
    private(set) var deadline: MonotonicInstant?

    init(delayedOn: Duration, delayedOff: Duration, initial: Bool) {
        self.delayedOn = delayedOn
        self.delayedOff = delayedOff
        self.stable = initial
        self.raw = initial
    }

    /// Feeds a raw edge. Returns the edge time when the filtered level changes at once (zero delay).
    mutating func feed(_ active: Bool, at: MonotonicInstant) -> MonotonicInstant? {
        guard active != raw else { return nil }
        raw = active
        if active == stable {
            pendingSince = nil
            deadline = nil
            return nil
        }
        let delay = active ? delayedOn : delayedOff
        if delay == .zero {
            stable = active
            pendingSince = nil
            deadline = nil
            return at
        }
        pendingSince = at
        deadline = at + delay
        return nil
    }

    /// Called when `deadline` has passed: the pending level becomes stable. Returns its edge time.
    mutating func settle() -> MonotonicInstant? {
        guard let since = pendingSince else { return nil }
        stable = raw
        pendingSince = nil
        deadline = nil
        return since
    }
}
