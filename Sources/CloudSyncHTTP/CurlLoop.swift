import CCurl
import CloudSyncCore
import Foundation
import Synchronization

/// `curl_global_init` exactly once per process (Swift initialises static lets once, thread-safely).
enum CurlGlobal {
    static let initialized: CURLcode = cloudsync_curl_global_init_all()
}

/// One libcurl multi handle driven by one dedicated thread. Every transfer of a `CurlTransport` runs here,
/// so connections (and HTTP/2 streams) are reused across requests, and no Swift cooperative thread ever
/// waits for the network. Callbacks of all transfers run on this thread.
final class CurlLoop: TaskExecutor, @unchecked Sendable {
    /// The multi handle; touched only by the loop thread after `init` (curl_multi_wakeup is thread-safe).
    private let multi: UnsafeMutableRawPointer
    private let limiter: BandwidthLimiter?

    private struct Inbox {
        var incoming: [Exchange] = []
        var cancelled: [Exchange] = []
        /// Task jobs enqueued on this loop as a `TaskExecutor`.
        var jobs: [UnownedJob] = []
        var stopping = false
        /// The thread has left its loop: jobs go to the global executor instead.
        var stopped = false
    }
    private let inbox = Mutex(Inbox())

    /// `pthread_self()` of the loop thread, 0 until it starts.
    private let loopThread = Atomic<UInt>(0)

    // Loop-thread-only state.
    private var active: [UnsafeMutableRawPointer: Exchange] = [:]
    /// Transfers paused by the bandwidth limiter, to resume when the bucket is out of debt.
    var paused: [Exchange] = []

    init(limiter: BandwidthLimiter?) throws {
        let rc = CurlGlobal.initialized
        guard rc == CURLE_OK else {
            throw ProviderError(.configuration, "libcurl failed to initialise (\(String(cString: curl_easy_strerror(rc)))); check the libcurl installation")
        }
        guard let multi = curl_multi_init() else {
            throw ProviderError(.configuration, "curl_multi_init failed (out of memory?)")
        }
        self.multi = multi
        self.limiter = limiter
        _ = cloudsync_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        let thread = Thread { [self] in
            loopThread.store(UInt(pthread_self()), ordering: .releasing)
            run()
        }
        thread.name = "cloudsync-curl"
        thread.start()
    }

    /// Starts `exchange` on the loop thread and waits for its end without blocking a cooperative thread.
    /// Task cancellation removes the transfer from the multi handle and throws `CancellationError`.
    func perform(_ exchange: Exchange) async throws -> ExchangeResult {
        try Task.checkCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<ExchangeResult, any Error>) in
                exchange.continuation = c
                inbox.withLock { $0.incoming.append(exchange) }
                wakeUnlessOnLoop()
            }
        } onCancel: {
            exchange.cancelled.store(true, ordering: .relaxed)
            inbox.withLock { $0.cancelled.append(exchange) }
            curl_multi_wakeup(multi)
        }
    }

    /// Ends the loop: running transfers fail with `CancellationError`; the thread then frees the multi handle.
    func shutdown() {
        inbox.withLock { $0.stopping = true }
        curl_multi_wakeup(multi)
    }

    /// Whether the caller runs on the loop thread.
    var onLoopThread: Bool { loopThread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// The loop thread looks at its inbox before it polls again; any other thread must interrupt the poll.
    private func wakeUnlessOnLoop() {
        if !onLoopThread { curl_multi_wakeup(multi) }
    }

    private func run() {
        while true {
            runPendingJobs()
            let (incoming, cancelled, stopping) = inbox.withLock { box in
                defer { box.incoming = []; box.cancelled = [] }
                return (box.incoming, box.cancelled, box.stopping)
            }
            for exchange in incoming {
                if exchange.cancelled.load(ordering: .relaxed) || stopping {
                    exchange.complete(with: .failure(CancellationError()))
                    continue
                }
                let rc = curl_multi_add_handle(multi, exchange.easy)
                if rc != CURLM_OK {
                    exchange.complete(with: .failure(ProviderError(.transient,
                        "could not start a transfer to \(exchange.hostDescription): \(String(cString: curl_multi_strerror(rc)))")))
                    continue
                }
                exchange.loop = self
                active[exchange.easy] = exchange
            }
            for exchange in cancelled { remove(exchange, result: .failure(CancellationError())) }
            if stopping {
                for exchange in Array(active.values) { remove(exchange, result: .failure(CancellationError())) }
                let orphans = inbox.withLock { box in
                    box.stopped = true
                    defer { box.jobs = [] }
                    return box.jobs
                }
                for job in orphans { globalConcurrentExecutor.enqueue(job) }
                break
            }

            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                      let exchange = active[easy] else { continue }
                remove(exchange, result: exchange.result(for: message.pointee.data.result))
            }

            var timeout: Int32 = 1000
            if !paused.isEmpty, let limiter {
                let wait = limiter.delayUntilAdmitting()
                if wait <= 0 {
                    let resuming = paused
                    paused = []
                    for exchange in resuming where active[exchange.easy] != nil {
                        _ = cloudsync_curl_unpause(exchange.easy)
                    }
                    timeout = 0
                } else {
                    timeout = Int32(min(1000, wait * 1000 + 1))
                }
            }
            if inbox.withLock({ !$0.jobs.isEmpty || !$0.incoming.isEmpty || !$0.cancelled.isEmpty }) { timeout = 0 }
            _ = curl_multi_poll(multi, nil, 0, timeout, nil)
        }
        curl_multi_cleanup(multi)
    }

    // MARK: TaskExecutor

    /// Runs a task's job on the loop thread, between network events. A task that prefers this executor
    /// (`withTaskExecutorPreference`) resumes here after each transfer and starts the next one without a
    /// thread switch. Jobs must not block: they delay every transfer.
    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let accepted = inbox.withLock { box -> Bool in
            guard !box.stopped else { return false }
            box.jobs.append(unowned)
            return true
        }
        if accepted { wakeUnlessOnLoop() } else { globalConcurrentExecutor.enqueue(unowned) }
    }

    /// Runs task jobs until none is left, so that transfers they start are added in the same turn.
    private func runPendingJobs() {
        while true {
            let jobs = inbox.withLock { box in
                defer { box.jobs = [] }
                return box.jobs
            }
            if jobs.isEmpty { return }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }

    private func remove(_ exchange: Exchange, result: Result<ExchangeResult, any Error>) {
        guard active.removeValue(forKey: exchange.easy) != nil else { return }
        _ = curl_multi_remove_handle(multi, exchange.easy)
        paused.removeAll { $0 === exchange }
        exchange.loop = nil
        exchange.complete(with: result)
    }
}
