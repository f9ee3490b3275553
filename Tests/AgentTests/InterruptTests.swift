import Foundation
import Glibc
import Synchronization
import SystemIO
import Testing

/// Signals caught by `countInterrupt` (installed without SA_RESTART, so a blocking read returns EINTR).
private let interruptsCaught = Atomic<Int>(0)

private func countInterrupt(_: Int32) { interruptsCaught.add(1, ordering: .relaxed) }

@Suite struct InterruptTests {
    /// A read blocked on an empty pipe, interrupted by signals (no SA_RESTART: the kernel returns EINTR each time), is
    /// made again by `retryingOnInterrupt` and returns the byte written after the interruptions.
    @Test func aReadInterruptedBySignalsIsMadeAgain() throws {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = countInterrupt
        action.sa_flags = 0
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        #expect(sigaction(SIGUSR2, &action, &previous) == 0)
        defer { sigaction(SIGUSR2, &previous, nil) }

        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let reader = fds[0]
        let calls = Atomic<Int>(0)
        let thread = Atomic<UInt>(0)
        let result = Mutex<(n: Int, byte: UInt8)?>(nil)
        let reading = Thread {
            // The test process may block signals in its threads: this one takes SIGUSR2.
            var mask = sigset_t()
            sigemptyset(&mask)
            sigaddset(&mask, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &mask, nil)
            thread.store(UInt(pthread_self()), ordering: .releasing)
            var byte: UInt8 = 0
            let n = retryingOnInterrupt { () -> Int in
                calls.add(1, ordering: .relaxed)
                return read(reader, &byte, 1)
            }
            result.withLock { $0 = (n, byte) }
        }
        reading.start()

        // Signal the reader until its read was made again at least twice (each retry follows an EINTR).
        let deadline = Date().addingTimeInterval(10)
        while calls.load(ordering: .relaxed) < 3 && Date() < deadline {
            let target = thread.load(ordering: .acquiring)
            if target != 0 { pthread_kill(pthread_t(target), SIGUSR2) }
            usleep(1_000)
        }
        #expect(calls.load(ordering: .relaxed) >= 3)
        #expect(interruptsCaught.load(ordering: .relaxed) >= 2)
        var byte: UInt8 = 42
        #expect(write(fds[1], &byte, 1) == 1)
        while result.withLock({ $0 }) == nil && Date() < deadline { usleep(1_000) }
        let got = try #require(result.withLock { $0 })
        #expect(got.n == 1 && got.byte == 42)
    }

    /// A failure other than EINTR is returned at once, errno left for the caller.
    @Test func anotherFailureIsReturnedAtOnce() {
        var calls = 0
        var byte: UInt8 = 0
        let n = retryingOnInterrupt { () -> Int in
            calls += 1
            return read(-1, &byte, 1)
        }
        #expect(n == -1 && calls == 1)
        #expect(Errno.current == Errno(EBADF))
    }

    /// A poll that finds 4 descriptors ready returns 4 at once, written as the sources write it (a trailing closure,
    /// its type inferred): 4 is EINTR's number, and an overload for calls that return their error number once took
    /// that closure and made the poll again for ever (the status socket's thread spun with 4 clients ready).
    @Test func aPollWithFourReadyIsNotMadeAgain() {
        var pipes: [[Int32]] = []
        defer { pipes.joined().forEach { close($0) } }
        var fds: [pollfd] = []
        for _ in 0..<4 {
            var ends: [Int32] = [0, 0]
            #expect(pipe(&ends) == 0)
            var byte: UInt8 = 1
            #expect(write(ends[1], &byte, 1) == 1)
            pipes.append(ends)
            fds.append(pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0))
        }
        var calls = 0
        let ready = retryingOnInterrupt {
            calls += 1
            guard calls <= 3 else {   // (a retry loop: ended here, so that the test fails rather than hangs)
                errno = EBADF
                return Int32(-1)
            }
            return poll(&fds, nfds_t(fds.count), 0)
        }
        #expect(ready == 4 && calls == 1, "poll gave \(ready) after \(calls) calls")
    }

    /// Errnos are matched by name: in a switch, and against an error's field.
    @Test func errnoMatchesByName() {
        func kind(_ errno: Errno) -> String {
            switch errno {
            case .noSpace, .quotaExceeded: "full"
            case .permissionDenied, .notPermitted: "permission"
            default: "other"
            }
        }
        #expect(kind(Errno(ENOSPC)) == "full")
        #expect(kind(Errno(EPERM)) == "permission" && Errno(EPERM).isPermission)
        #expect(kind(Errno(EIO)) == "other")
        let failure = FileError("write /x.tmp", errno: .noSpace)
        #expect(failure.errno == .noSpace)
        #expect(failure.message == "write /x.tmp: No space left on device (errno 28)")
        let missing = WholeFile.read("/nonexistent-\(getpid())/file")
        guard case .failure(let error) = missing else { Issue.record("read a missing file"); return }
        #expect(error.errno == .noEntry)
    }
}
