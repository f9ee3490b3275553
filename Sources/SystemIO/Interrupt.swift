#if canImport(Glibc)
import Glibc
#endif

/// Calls `call` again while it fails with EINTR: a signal that interrupted a blocking call (read, write, poll, open,
/// ioctl, recv, send...) is not the call's failure. A call returning a negative value (-1) with errno EINTR is made
/// again; any other result is returned, errno left as the call set it. A call with a timeout (poll) computes the time
/// left inside `call`, so a retry waits no longer than the first call would have.
@inlinable
public func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) -> Result {
    while true {
        let result = call()
        guard result < 0, errno == EINTR else { return result }
    }
}

/// `retryingOnInterrupt` for the calls that return their error number rather than setting errno (clock_nanosleep,
/// pthread_*): made again while they return EINTR; 0 or the other error number is returned.
/// (A name of its own: as an overload of `retryingOnInterrupt`, a trailing closure returning `Int32` — poll's count of
/// ready descriptors — was matched to it, and a poll with 4 descriptors ready was made again for ever.)
@inlinable
public func retryingWhileErrorNumberIsInterrupt(_ call: () -> Int32) -> Int32 {
    while true {
        let result = call()
        guard result == EINTR else { return result }
    }
}
