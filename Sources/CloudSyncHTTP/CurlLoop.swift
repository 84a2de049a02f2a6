import CCurl
import CloudSyncCore
import Foundation
import Synchronization

/// `curl_global_init` exactly once per process (Swift initialises static lets once, thread-safely), and with it
/// the allocator setting the transfers need: each allocates and frees a receive buffer (256 KiB, libcurl's), a
/// write batch (128 KiB) and, in a pull, a start-set read. By default glibc returns a freed heap top over 128 KiB
/// to the kernel (`madvise`, flushing the TLB of every core) and maps blocks of 128 KiB and more afresh, so every
/// transfer faulted its buffers in again: 14,000-60,000 minor faults in a pull of 2,000 files of 200 KiB, and
/// 3,200-3,500 with the heap top kept up to 4 MiB and blocks under 1 MiB from the heap (`mallopt(3)`; peak RSS
/// +1.5 MiB). See docs/http.md.
enum CurlGlobal {
    static let initialized: CURLcode = {
        _ = cloudsync_keep_freed_memory()
        return cloudsync_curl_global_init_all()
    }()
}

/// One libcurl multi handle driven by one dedicated thread. Every transfer of a `CurlTransport` runs here,
/// so connections (and HTTP/2 streams) are reused across requests, and no Swift cooperative thread ever
/// waits for the network. Callbacks of all transfers run on this thread, so sinks only move bytes (a `pwrite`,
/// a hash update): anything that can wait — fdatasync, SQLite — would stall every transfer.
final class CurlLoop: @unchecked Sendable {
    /// The multi handle; touched only by the loop thread after `init` (curl_multi_wakeup is thread-safe).
    private let multi: UnsafeMutableRawPointer
    private let limiter: BandwidthLimiter?

    private struct Inbox {
        var incoming: [Exchange] = []
        var cancelled: [Exchange] = []
        var stopping = false
    }
    private let inbox = Mutex(Inbox())

    // Loop-thread-only state.
    private var active: [UnsafeMutableRawPointer: Exchange] = [:]
    /// Transfers paused by the bandwidth limiter, to resume when the bucket is out of debt.
    var paused: [Exchange] = []
    /// Transfers paused because their sink took no more bytes (``ByteSink/acceptsBytes()``), asked again every
    /// 2 ms.
    var held: [Exchange] = []
    /// File slots (``TransferSlot``): active transfers per file holding one.
    private var slotHolders: [ObjectIdentifier: Int] = [:]
    /// Downloads waiting for a slot: of files that held one lately, then of new files, each in arrival order.
    private var waitingAgain: [Exchange] = []
    private var waitingNew: [Exchange] = []
    /// Files whose last transfer ended lately, oldest first (at most ``latelyKept``).
    private var lately: [ObjectIdentifier] = []
    private static let latelyKept = 256

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
        startThread(named: "cloudsync-curl") { [self] in run() }
    }

    /// Starts `exchange` on the loop thread and waits for its end without blocking a cooperative thread.
    /// Task cancellation removes the transfer from the multi handle and throws `CancellationError`.
    func perform(_ exchange: Exchange) async throws -> ExchangeResult {
        try Task.checkCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<ExchangeResult, any Error>) in
                exchange.continuation = c
                inbox.withLock { $0.incoming.append(exchange) }
                curl_multi_wakeup(multi)
                exchange.slot?.queued?()
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

    private func run() {
        while true {
            let (incoming, cancelled, stopping) = inbox.withLock { box in
                defer { box.incoming = []; box.cancelled = [] }
                return (box.incoming, box.cancelled, box.stopping)
            }
            for exchange in incoming {
                if exchange.cancelled.load(ordering: .relaxed) || stopping {
                    exchange.complete(with: .failure(CancellationError()))
                } else if let slot = exchange.slot, !mayStart(slot) {
                    if lately.contains(slot.file) { waitingAgain.append(exchange) } else { waitingNew.append(exchange) }
                } else {
                    start(exchange)
                }
            }
            // A cancelled download still writes what it gathered (kept by the file's next checkpoint).
            for exchange in cancelled {
                if let waiting = dropWaiting(exchange) {
                    waiting.complete(with: .failure(CancellationError()))
                    continue
                }
                exchange.finishBody()
                remove(exchange, result: .failure(CancellationError()))
            }
            if stopping {
                for exchange in waitingAgain + waitingNew { exchange.complete(with: .failure(CancellationError())) }
                waitingAgain = []
                waitingNew = []
                for exchange in Array(active.values) {
                    exchange.finishBody()
                    remove(exchange, result: .failure(CancellationError()))
                }
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
            if !held.isEmpty {
                let waiting = held
                held = []
                for exchange in waiting where active[exchange.easy] != nil {
                    // Resuming may deliver at once, and hold the transfer again.
                    if exchange.sinkAcceptsBytes { _ = cloudsync_curl_unpause(exchange.easy) } else { held.append(exchange) }
                }
                if !held.isEmpty { timeout = min(timeout, 2) }
            }
            if inbox.withLock({ !$0.incoming.isEmpty || !$0.cancelled.isEmpty }) { timeout = 0 }
            _ = curl_multi_poll(multi, nil, 0, timeout, nil)
        }
        curl_multi_cleanup(multi)
    }

    private func start(_ exchange: Exchange) {
        let rc = curl_multi_add_handle(multi, exchange.easy)
        if rc != CURLM_OK {
            exchange.complete(with: .failure(ProviderError(.transient,
                "could not start a transfer to \(exchange.hostDescription): \(String(cString: curl_multi_strerror(rc)))")))
            return
        }
        exchange.loop = self
        active[exchange.easy] = exchange
        if let slot = exchange.slot { slotHolders[slot.file, default: 0] += 1 }
    }

    private func remove(_ exchange: Exchange, result: Result<ExchangeResult, any Error>) {
        guard active.removeValue(forKey: exchange.easy) != nil else { return }
        _ = curl_multi_remove_handle(multi, exchange.easy)
        paused.removeAll { $0 === exchange }
        held.removeAll { $0 === exchange }
        exchange.loop = nil
        if let slot = exchange.slot { release(slot) }
        exchange.complete(with: result)
    }

    // MARK: File slots

    private func mayStart(_ slot: TransferSlot) -> Bool {
        slotHolders[slot.file] != nil || slotHolders.count < slot.files
    }

    /// One transfer of `slot`'s file ended: the file lets its slot go with its last, and the waiting downloads
    /// that may start now start (before the loop polls again).
    private func release(_ slot: TransferSlot) {
        guard let count = slotHolders[slot.file] else { return }
        if count > 1 {
            slotHolders[slot.file] = count - 1
            return
        }
        slotHolders[slot.file] = nil
        lately.removeAll { $0 == slot.file }
        lately.append(slot.file)
        if lately.count > Self.latelyKept { lately.removeFirst() }
        waitingAgain = startWhatMay(waitingAgain)
        waitingNew = startWhatMay(waitingNew)
    }

    /// Starts, in order, every download of `queue` that may start; returns the others. One whose remote was
    /// paused while it waited fails with ``TransferSlot/Deferred`` instead (its pacer asks again after the pause).
    private func startWhatMay(_ queue: [Exchange]) -> [Exchange] {
        var still: [Exchange] = []
        for waiting in queue {
            if let slot = waiting.slot, !mayStart(slot) {
                still.append(waiting)
            } else if waiting.slot?.startsNow?() == false {
                waiting.complete(with: .failure(TransferSlot.Deferred()))
            } else {
                start(waiting)
            }
        }
        return still
    }

    /// Takes `exchange` out of the slot queues; nil when it was not waiting.
    private func dropWaiting(_ exchange: Exchange) -> Exchange? {
        if let i = waitingAgain.firstIndex(where: { $0 === exchange }) { return waitingAgain.remove(at: i) }
        if let i = waitingNew.firstIndex(where: { $0 === exchange }) { return waitingNew.remove(at: i) }
        return nil
    }
}
