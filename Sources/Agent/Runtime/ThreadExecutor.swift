import Glibc
import ParkWiseLog

/// A serial executor that runs its jobs on one dedicated POSIX thread. The agent's event loop runs
/// on it because it blocks on purpose: every outbox append and state save waits for fsync, which
/// must never hold up a thread of Swift's cooperative pool.
final class ThreadExecutor: SerialExecutor, @unchecked Sendable {
    // Guarded by `mutex`; the thread waits on `ready` while there is nothing to run.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let ready = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var jobs: [UnownedJob] = []

    /// Starts the thread. It lives as long as the process (one event loop per agent).
    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(ready, nil)
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            Unmanaged<ThreadExecutor>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        precondition(rc == 0, "cannot start the event-loop thread: \(String(cString: strerror(rc)))")
        pthread_detach(thread)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        pthread_mutex_lock(mutex)
        jobs.append(job)
        pthread_cond_signal(ready)
        pthread_mutex_unlock(mutex)
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    private func run() {
        nameThread("pw-loop")
        while true {
            pthread_mutex_lock(mutex)
            while jobs.isEmpty { pthread_cond_wait(ready, mutex) }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            pthread_mutex_unlock(mutex)
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
        }
    }
}
