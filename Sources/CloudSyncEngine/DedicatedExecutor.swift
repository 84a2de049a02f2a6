import Dispatch

/// A task executor with a thread of its own: jobs run in order on a serial dispatch queue, which libdispatch
/// serves from its overcommit threads, outside the cooperative pool (one thread per core) that runs every other
/// task of the process.
///
/// `serve` runs its on-demand fetches here (``OnDemand``): a player waiting for its first byte must not wait for
/// a cooperative thread, and code elsewhere in the process that blocks those threads (a synchronous wait, a long
/// computation; with two cores, two of them are the whole pool) must not stall the fetch. One thread is enough: the
/// bytes move on the transport's loop thread and durability work on the cache's writer, so a job here only chooses
/// a range, starts a GET or hands over a checkpoint. The one long job is a track's completion when its bytes came
/// out of order: the hash catch-up reads the unhashed rest (SHA-256 about 0.9 ms per MiB, 1.4 with decryption:
/// `openssl speed -evp sha256`, `-evp chacha20-poly1305`), and the remote's other fetches wait behind it.
final class DedicatedExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}
