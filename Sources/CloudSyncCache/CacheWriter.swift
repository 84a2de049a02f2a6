#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Dispatch
import Foundation
import Synchronization

/// The cache's writer: one serial queue per `Cache` (a libdispatch thread, never the network thread and never a
/// Swift cooperative thread) that runs every slow durability step of the cache's entry writers: the fdatasync
/// and index commit of each checkpoint, and batched promotions (``PromotionBatch``). A transfer only `pwrite`s
/// and asks for a checkpoint; the checkpoint runs here later, so it lags the transfer but never stalls it,
/// and an index held busy by another process delays only this queue.
///
/// Work runs in submission order. Async callers wait on a continuation, so no thread of theirs is parked.
/// Cancellation does not interrupt work that was submitted (a checkpoint is short and must finish).
final class CacheWriter: Sendable {
    private let queue = DispatchQueue(label: "cloudsync-cache-writer")
    /// Promotions waiting for their batch.
    private let waiting = Mutex(PromotionQueue())
    /// Most files in one batch.
    let batchFiles: Int
    /// How long a batch waits for more files after its first.
    let batchDelay: DispatchTimeInterval

    init(batchFiles: Int = 64, batchDelay: Duration = .milliseconds(25)) {
        self.batchFiles = batchFiles
        // Within 0 … 1 hour, so the conversion cannot overflow.
        self.batchDelay = .nanoseconds(Int(max(0, min(batchDelay / .nanoseconds(1), 3_600e9))))
    }

    /// Runs `work` on the writer queue; returns at once.
    func async(_ work: @escaping @Sendable () -> Void) { queue.async(execute: work) }

    // MARK: Flushes together

    struct FlushRequest: Sendable {
        let writer: EntryWriter
        let done: @Sendable (Result<Void, CacheError>) -> Void
    }

    private let flushes = Mutex((requests: [FlushRequest](), scheduled: false))

    /// Runs `writer`'s checkpoint in the next flush batch (what queued while the writer was busy); `done` is
    /// called with its outcome on the writer queue.
    func flush(_ writer: EntryWriter, then done: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        let request = FlushRequest(writer: writer, done: done)
        let schedule = flushes.withLock { f -> Bool in
            f.requests.append(request)
            if f.scheduled { return false }
            f.scheduled = true
            return true
        }
        if schedule { queue.async { self.runFlushes() } }
    }

    private func runFlushes() {
        let batch = flushes.withLock { f -> [FlushRequest] in
            defer { f.requests = []; f.scheduled = false }
            return f.requests
        }
        // The syncs together first, then each checkpoint, whose fdatasync finds little or nothing left to write. The
        // first syncs are only an optimisation: errors (and injected faults, `cache.io`) surface from each
        // checkpoint's own sync.
        let open = batch.filter { !$0.writer.isClosed && !$0.writer.isCompleted && $0.writer.descriptor >= 0 }
        if open.count > 1 { _ = Self.syncTogether(open.map(\.writer.descriptor), io: .system) }
        for request in batch {
            do throws(CacheError) { try request.writer.checkpoint(); request.done(.success(())) } catch { request.done(.failure(error)) }
        }
    }

    // MARK: Group commit

    struct PromotionQueue {
        var requests: [PromotionRequest] = []
        /// A batch is queued on the writer and has not taken its files yet.
        var scheduled = false
        /// Batches run without waiting for more files (``hurry(_:_:)``).
        var hurry = false
    }

    struct PromotionRequest: Sendable {
        let writer: EntryWriter
        let done: @Sendable (Result<Void, CacheError>) -> Void
    }

    /// Queues `writer`'s promotion; `done` is called with its batch's outcome for this file, on the writer queue.
    /// A batch closes `batchDelay` after its first file was queued, or at once when `batchFiles` are waiting; the
    /// files that complete while one batch syncs form the next, so a track appears in `tracks/` within about 25 ms plus two barriers of its
    /// last byte. Without the delay a batch was what queued while the one before ran: ~1.7 small files on ext4
    /// here, each batch a journal commit for its files and another for its folders (2,000 × 200 KiB: 1,695 folder
    /// syncs; with 25 ms, 620, and the pull ~15 % shorter; bench/README.md).
    func promote(_ writer: EntryWriter, in cache: Cache, then done: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        let request = PromotionRequest(writer: writer, done: done)
        let (schedule, full, hurry) = waiting.withLock { w -> (Bool, Bool, Bool) in
            w.requests.append(request)
            if w.scheduled { return (false, w.requests.count == batchFiles, w.hurry) }
            w.scheduled = true
            return (true, false, w.hurry)
        }
        if schedule && !hurry {
            // Weak: a batch hurried out meanwhile leaves this block nothing to do, and holding the cache until the
            // delay passed kept a pull that ended within it from closing its index (SQLite's WAL was left behind).
            queue.asyncAfter(deadline: .now() + batchDelay) { [weak cache] in
                if let cache { self.runBatch(cache) }
            }
        } else if schedule || full {
            queue.async { self.runBatch(cache) }
        }
    }

    /// Promotions queued and not yet taken by a batch.
    var waitingCount: Int { waiting.withLock { $0.requests.count } }

    /// While `on`, no batch waits for more files: the waiting one runs now, and each next one as soon as its first
    /// file is queued. For a caller that knows no more files are coming for a while (a pull whose files are all
    /// fetched); waiting would only delay the last tracks.
    func hurry(_ on: Bool, _ cache: Cache) {
        let run = waiting.withLock { w -> Bool in
            w.hurry = on
            return on && !w.requests.isEmpty
        }
        if run { queue.async { self.runBatch(cache) } }
    }

    /// Promotes the queued files (at most `batchFiles`) as one batch, on the writer queue.
    private func runBatch(_ cache: Cache) {
        let batch = waiting.withLock { w -> [PromotionRequest] in
            let taken = Array(w.requests.prefix(batchFiles))
            w.requests.removeFirst(taken.count)
            // More than one batch waited: the rest follows right after this one.
            if w.requests.isEmpty { w.scheduled = false } else { queue.async { self.runBatch(cache) } }
            return taken
        }
        guard !batch.isEmpty else { return }
        let outcomes = PromotionBatch(cache: cache, writers: batch.map(\.writer)).run()
        for (request, outcome) in zip(batch, outcomes) { request.done(outcome) }
    }

    /// Makes every descriptor's file durable and waits for all: first every file's pages are written out
    /// (``FileIO/writeOut``: all started, then each waited for), then `fdatasync` is issued on every descriptor
    /// at once, from up to 16 threads, and the filesystem commits its journal once for the lot. Without the
    /// write-out each fdatasync waited for its own data first, and every file whose data landed during a commit
    /// needed the next one: ext4 (journaled, 64 × 200 KiB) committed 8–9 times per batch instead of once (a pull
    /// of 2,000 small files: 369 journal commits, curl + `sync -f` 2; bench/README.md). One by one the fdatasyncs
    /// took 560 ms, together 71 ms, `syncfs` 61 ms, but that would also flush every other program's writes.
    /// Returns, per descriptor, the errno of a failed write-out or sync.
    static func syncTogether(_ fds: [Int32], io: FileIO) -> [Errno?] {
        if fds.isEmpty { return [] }
        if fds.count == 1 {
            do throws(Errno) { try io.fdatasync(fds[0]); return [nil] } catch { return [error] }
        }
        var failed = [Errno?](repeating: nil, count: fds.count)
        for wait in [false, true] {
            for (i, fd) in fds.enumerated() where failed[i] == nil {
                do throws(Errno) {
                    try io.writeOut(fd, wait)
                } catch {
                    // A call that does not apply to this file, or that a sandbox forbids (seccomp: EPERM, ENOSYS),
                    // fails before any write: fdatasync alone then. Any other error is the file's (the kernel
                    // reports a write error once, to the first caller).
                    if ![EINVAL, ENOSYS, EOPNOTSUPP, ESPIPE, EPERM].contains(error.rawValue) { failed[i] = error }
                }
            }
        }
        let skipped = failed
        let results = Mutex(failed)
        SyncThreads.shared.run(fds.count) { i in
            guard skipped[i] == nil else { return }
            do throws(Errno) { try io.fdatasync(fds[i]) } catch { results.withLock { $0[i] = error } }
        }
        return results.withLock { $0 }
    }
}

/// Threads for blocking calls issued side by side (the syncs of a batch): started as a batch first needs them,
/// at most 16, then kept parked for the process's life. A thread per sync and batch cost a clone, a stack and
/// a name each time: ~1,000 threads for a pull of 2,000 small files.
final class SyncThreads: @unchecked Sendable {
    static let shared = SyncThreads()
    static let limit = 16

    /// Guards everything below; idle threads wait on it until work is queued.
    private let condition = NSCondition()
    private var queued: [@Sendable () -> Void] = []
    private var threads = 0
    private var idle = 0

    /// Runs `body(0)` … `body(count - 1)` on up to `limit` of the threads at once; returns when all have returned.
    func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        if count <= 1 {
            // Nothing to issue side by side: no hand-off to another thread.
            if count == 1 { body(0) }
            return
        }
        let group = DispatchGroup()
        let next = Atomic<Int>(0)
        let workers = min(Self.limit, count)
        condition.lock()
        for _ in 0 ..< workers {
            group.enter()
            queued.append {
                while true {
                    let i = next.add(1, ordering: .relaxed).oldValue
                    guard i < count else { break }
                    body(i)
                }
                group.leave()
            }
        }
        let missing = min(Self.limit - threads, max(0, workers - idle))
        threads += missing
        condition.broadcast()
        condition.unlock()
        for _ in 0 ..< missing {
            startThread(named: "cloudsync-sync") { [self] in work() }
        }
        group.wait()
    }

    private func work() {
        condition.lock()
        while true {
            while queued.isEmpty {
                idle += 1
                condition.wait()
                idle -= 1
            }
            let job = queued.removeFirst()
            condition.unlock()
            job()
            condition.lock()
        }
    }
}

/// One group commit: every file's fdatasync issued together, then each file's mtime and rename into `tracks/`
/// and its index update in one transaction, then one sync per folder touched. A file whose entry changed (its
/// generation moved on) or whose sync or rename failed fails alone; a failed commit renames every file of the
/// batch back, so `tracks/` never holds a file the index does not know (a kill between rename and commit is
/// repaired by ``Cache/reconcilePromotions()``, which the mtime set before the rename makes safe).
struct PromotionBatch {
    let cache: Cache
    let writers: [EntryWriter]

    func run() -> [Result<Void, CacheError>] {
        var outcomes = [Result<Void, CacheError>?](repeating: nil, count: writers.count)
        var ready: [Int] = []
        for (i, writer) in writers.enumerated() {
            if writer.isCompleted { outcomes[i] = .success(()) } else if writer.isClosed {
                outcomes[i] = .failure(CacheError(.invalidArgument, "\(writer.remote):\(writer.path) was closed before its promotion", path: writer.path))
            } else {
                ready.append(i)
            }
        }
        // 1. The durability barrier: every file's bytes on disk before any rename.
        let syncErrors = CacheWriter.syncTogether(ready.map { writers[$0].descriptor }, io: cache.io)
        var synced: [Int] = []
        for (i, error) in zip(ready, syncErrors) {
            if let error {
                outcomes[i] = .failure(CacheError.system("fdatasync", errno: error.rawValue, path: writers[i].partialDisplay,
                                                         needing: writers[i].size, cacheRoot: cache.rootPath))
            } else if let failure = writers[i].setRemoteModificationTime() {
                outcomes[i] = .failure(failure)
            } else {
                synced.append(i)
            }
        }
        // 2. Renames and one index transaction.
        var folders: [String: Int32] = [:]
        defer { for fd in folders.values { Glibc.close(fd) } }
        var renamed: [(index: Int, parent: Int32, leaf: String)] = []
        // Each file's start set and validator go in its update (taken before the index is locked).
        var unsaved: [Int: EntryWriter.UnsavedColumns] = [:]
        for i in synced { unsaved[i] = writers[i].unsavedColumns() }
        do throws(CacheError) {
            try cache.withDatabase { db throws(CacheError) in
                try db.withTransaction { () throws(CacheError) in
                    for i in synced {
                        do throws(CacheError) {
                            let (parent, leaf) = try writers[i].renameIntoTracks(db: db, folders: &folders,
                                                                                 unsaved: unsaved[i] ?? EntryWriter.UnsavedColumns())
                            renamed.append((i, parent, leaf))
                        } catch {
                            outcomes[i] = .failure(error)
                        }
                    }
                }
            }
        } catch {
            for r in renamed { writers[r.index].renameBack(from: r.parent, leaf: r.leaf) }
            for r in renamed { outcomes[r.index] = .failure(error) }
            renamed = []
        }
        // 3. One sync per folder touched, all issued at once: ext4 commits its journal for each directory fsync
        // (a directory's entries are journaled data), so one after another they cost a commit each while the
        // pull's other threads keep the journal busy; together they share one. Then the writers learn that they
        // are complete.
        let touched = folders.filter { folder in renamed.contains { $0.parent == folder.value } }.sorted { $0.key < $1.key }
        let failedFolders = Mutex<[String]>([])
        SyncThreads.shared.run(touched.count) { i in
            if fsync(touched[i].value) != 0 { failedFolders.withLock { $0.append(touched[i].key) } }
        }
        for folder in failedFolders.withLock({ $0 }).sorted() {
            cache.logger.warning("fsync of the folder tracks/\(folder) failed")
        }
        for r in renamed {
            writers[r.index].markCompleted(saved: unsaved[r.index] ?? EntryWriter.UnsavedColumns())
            outcomes[r.index] = .success(())
        }
        for i in ready where !writers[i].isCompleted { writers[i].promotionFailed() }
        return outcomes.map { $0 ?? .success(()) }
    }
}
