import CloudSyncCache
import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// One pull of one remote: lock → list → plan → fetch → verify → promote → remove deletions → store cursor
/// → evict. Per-file failures are collected in the report; errors that stop the remote are thrown
/// (`CacheError(.locked)`, listing `ProviderError`s, disk full).
public struct Sync: Sendable {
    public let remote: String
    public let providerName: String
    public let provider: any Provider
    public let transport: any Transport
    public let pacer: Pacer
    public let cache: Cache
    public let options: SyncOptions
    public let logger: Logger
    public let events: @Sendable (SyncEvent) -> Void

    public init(remote: String, providerName: String, provider: any Provider, transport: any Transport, pacer: Pacer,
                cache: Cache, options: SyncOptions, logger: Logger, events: @escaping @Sendable (SyncEvent) -> Void) {
        self.remote = remote
        self.providerName = providerName
        self.provider = provider
        self.transport = transport
        self.pacer = pacer
        self.cache = cache
        self.options = options
        self.logger = logger
        self.events = events
    }

    public func run() async throws -> SyncReport {
        let lock = try cache.pullLock(remote: remote, wait: options.waitForLock)
        defer { lock.release() }
        var report = SyncReport(remote: remote, provider: providerName)

        let (plan, cursor) = try await listAndPlan(into: &report)
        events(.planned(remote: remote, plan: plan))
        if options.dryRun { return report }

        try await fetchAll(plan, into: &report)
        for path in plan.remove {
            let removal = try cache.remove(remote: remote, path: path)
            events(.removed(remote: remote, path: path, keptPinned: !removal.keptPinned.isEmpty))
        }
        // A pull restricted to PATHs applies only part of the listing (deletions elsewhere wait), so it must not
        // advance the change feed past changes it did not apply.
        if let cursor, options.paths.isEmpty { try cache.setCursor(cursor, remote: remote) }
        let eviction = try cache.evict(dryRun: false)
        if !eviction.evicted.isEmpty {
            logger.info("evicted \(eviction.evicted.count) tracks (\(ByteSize.format(eviction.freedBytes))) to stay within the cache limits")
        }
        return report
    }

    /// Lists the remote, plans, fills the report's counts and (unless a dry run) records the listing in the
    /// index. The listing itself is dropped here: for a big library it is the largest thing a pull holds, and
    /// fetching needs only the plan. Returns the plan and the cursor to store once the pull succeeded.
    private func listAndPlan(into report: inout SyncReport) async throws -> (SyncPlan, String?) {
        let listing = try await list()
        report.listed = listing.files.count
        let plan = try makePlan(listing)
        for item in plan.fetch {
            if item.changed { report.changed += 1 } else if item.missingBytes == item.file.size { report.new += 1 }
        }
        report.deleted = plan.remove.count
        report.skipped = plan.upToDate
        if !options.dryRun { try apply(listing) }
        return (plan, listing.cursor)
    }

    /// Lists the remote and records new and changed files in the index, without fetching, removing or
    /// storing the cursor (so a later pull still sees the same changes). Returns the remote's files.
    public func refreshIndex() async throws -> [RemoteFile] {
        let listing = try await list()
        try apply(listing)
        return Array(listing.files.values)
    }

    // MARK: - Listing

    /// The remote's audio files after this listing, and what to store.
    struct Listing {
        var kind: ListingKind = .full
        /// Every audio file now known for the remote, by path (after applying changes to the index state).
        var files: [String: RemoteFile] = [:]
        /// Paths that disappeared (full listing: not listed; changes: reported deleted).
        var gone: Set<String> = []
        var cursor: String?
    }

    func list() async throws -> Listing {
        events(.listing(remote: remote))
        let known = Dictionary(try cache.entries(remote: remote).map { ($0.path, $0.file) }, uniquingKeysWith: { $1 })
        var listing = Listing()
        var upserts: [String: RemoteFile] = [:]
        var deletions: [RemoteDeletion] = []
        var skipped: [String] = []
        for try await page in provider.listAudio(cursor: try cache.cursor(remote: remote)) {
            listing.kind = page.kind
            for file in page.upserts { upserts[file.path] = file }
            deletions += page.deletions
            skipped += page.skippedFolders
            if let c = page.cursor { listing.cursor = c }
        }
        // A stream also ends when this task is cancelled: a cut-short listing must never count as complete.
        try Task.checkCancellation()
        switch listing.kind {
        case .full:
            listing.files = upserts
            // Files under folders the provider could not read this time are kept as they were.
            for (path, file) in known where upserts[path] == nil && skipped.contains(where: { Self.isUnder(path, $0) }) {
                listing.files[path] = file
            }
            if !skipped.isEmpty {
                events(.warning(remote: remote, message: "\(skipped.count) folder(s) could not be read; their cached tracks are kept: \(skipped.prefix(3).joined(separator: ", "))"))
            }
            listing.gone = Set(known.keys).subtracting(listing.files.keys)
        case .changes:
            listing.files = known
            for deletion in deletions {
                for path in matching(deletion, in: listing.files) {
                    listing.files[path] = nil
                    listing.gone.insert(path)
                }
            }
            // A moved file keeps its id: its old path is gone. (Index by id once, not a scan per upsert.)
            var pathsByID: [String: [String]] = [:]
            for (path, file) in listing.files { if let id = file.providerID { pathsByID[id, default: []].append(path) } }
            for (path, file) in upserts {
                if let id = file.providerID {
                    for oldPath in pathsByID[id] ?? [] where oldPath != path && listing.files[oldPath]?.providerID == id {
                        listing.files[oldPath] = nil
                        listing.gone.insert(oldPath)
                    }
                }
                listing.files[path] = file
                listing.gone.remove(path)
            }
        }
        events(.listed(remote: remote, files: listing.files.count, kind: listing.kind))
        return listing
    }

    /// Whether `path` is `folder` or lies under it ("" is the root).
    static func isUnder(_ path: String, _ folder: String) -> Bool {
        folder.isEmpty || path == folder || path.hasPrefix(folder + "/")
    }

    private func matching(_ deletion: RemoteDeletion, in files: [String: RemoteFile]) -> [String] {
        switch deletion {
        case .path(let p):
            let fold = provider.capabilities.caseInsensitivePaths
            let prefix = fold ? p.trimmingCharacters(in: CharacterSet(charactersIn: "/")).lowercased()
                : p.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            if prefix.isEmpty { return Array(files.keys) }
            return files.keys.filter { key in
                let k = fold ? key.lowercased() : key
                return k == prefix || k.hasPrefix(prefix + "/")
            }
        case .providerID(let id):
            return files.filter { $0.value.providerID == id }.map(\.key)
        }
    }

    // MARK: - Plan

    func makePlan(_ listing: Listing) throws -> SyncPlan {
        let states = Dictionary(try cache.entries(remote: remote).map { ($0.path, $0) }, uniquingKeysWith: { $1 })
        var plan = SyncPlan()
        for path in listing.files.keys.sorted() {
            guard let file = listing.files[path], options.selects(path) else { continue }
            if let state = states[path], state.file.fingerprint == file.fingerprint {
                if state.state == .complete { plan.upToDate += 1; continue }
                plan.fetch.append(.init(file: file, missingBytes: file.size - state.presentBytes, changed: false))
            } else {
                plan.fetch.append(.init(file: file, missingBytes: file.size, changed: states[path]?.state == .complete))
            }
        }
        plan.remove = listing.gone.filter { options.selects($0) }.sorted()
        return plan
    }

    /// Records the listing in the index: new and changed files (a changed fingerprint drops cached bytes;
    /// the old complete track stays until the new one is verified).
    func apply(_ listing: Listing) throws {
        _ = try cache.upsert(remote: remote, files: listing.files.values)
    }

    // MARK: - Fetch

    private func fetchAll(_ plan: SyncPlan, into report: inout SyncReport) async throws {
        guard !plan.fetch.isEmpty else { return }
        let fetcher = FileFetcher(provider: provider, transport: transport, pacer: pacer, chunkSize: options.chunkSize,
                                  events: events, logger: logger)
        /// Files the first pass finished with: failed, or small enough to complete in it.
        var endedFirstPass: Set<String> = []
        func record(_ path: String, _ result: FileResult) {
            switch result {
            case .completed(let fetched, _):
                report.fetchedFiles += 1
                report.fetchedBytes += fetched
            case .failed(let message, let code):
                report.failed.append(.init(path: path, error: message, exitCode: code))
            case .headCached(let fetched):
                report.fetchedBytes += fetched
            }
        }
        if let head = options.headFirst, head > 0 {
            // Pass 1: the first `head` bytes of every track, so each can start playing.
            try await forEach(plan.fetch, skipping: [], fetcher: fetcher) { job in
                try await fetcher.fetch(job, within: 0 ..< min(head, job.file.size))
                if job.file.size <= head { return nil }
                return .headCached(fetched: job.fetched)
            } collect: { path, result in
                record(path, result)
                if case .headCached = result { return }
                endedFirstPass.insert(path)
            }
        }
        try await forEach(plan.fetch, skipping: endedFirstPass, fetcher: fetcher) { job in
            try await fetcher.fetch(job, within: 0 ..< job.file.size, checkpointAtEnd: false)
            return nil
        } collect: { path, result in
            record(path, result)
        }
        // Completion order depends on the network; the report lists failures in plan (path) order.
        report.failed.sort { $0.path < $1.path }
    }

    /// Runs `work` for each file with at most `options.jobs` at once. `work` returns nil to go on to
    /// verification and promotion. Errors that must stop the whole remote (auth, disk full, cancellation) are
    /// rethrown after the running files stop; other errors become `.failed` results.
    private func forEach(_ items: [SyncPlan.Item], skipping skipped: Set<String>, fetcher: FileFetcher,
                         work: @escaping @Sendable (FileJob) async throws -> FileResult?,
                         collect: (String, FileResult) -> Void) async throws {
        var fatal: (any Error)?
        try await withThrowingTaskGroup(of: (String, FileResult).self) { group in
            var next = 0
            func launch() {
                while next < items.count, skipped.contains(items[next].file.path) { next += 1 }
                guard next < items.count, fatal == nil else { return }
                let file = items[next].file
                next += 1
                group.addTask {
                    let result = try await fetchOne(file, fetcher: fetcher, work: work)
                    events(.fileFinished(remote: remote, path: file.path, result: result))
                    return (file.path, result)
                }
            }
            for _ in 0 ..< options.jobs { launch() }
            while true {
                do {
                    guard let (path, result) = try await group.next() else { break }
                    collect(path, result)
                } catch {
                    if fatal == nil { fatal = error }
                    group.cancelAll()
                }
                launch()
            }
        }
        if let fatal { throw fatal }
    }

    /// One file: open its entry, run `work`, then verify and promote (refetching once after a hash mismatch).
    private func fetchOne(_ file: RemoteFile, fetcher: FileFetcher,
                          work: @Sendable (FileJob) async throws -> FileResult?) async throws -> FileResult {
        for attempt in 1 ... 2 {
            let writer: EntryWriter
            do {
                writer = try cache.openWriter(remote: remote, path: file.path, wait: true)
            } catch {
                if error.stopsRun { throw error }
                return .failed(message: error.message, exitCode: error.exitCode)
            }
            defer { writer.close() }
            events(.fileStarted(remote: remote, path: file.path, size: file.size, missing: writer.missingRanges().byteCount))
            let job = FileJob(remote: remote, file: file, writer: writer)
            do {
                if let partial = try await work(job) { return partial }
                try await fetcher.complete(job)
                return .completed(fetched: job.fetched, verifiedWith: job.expectedHash?.kind)
            } catch {
                try? writer.checkpoint()
                if let failure = Self.fileFailure(error, retryable: attempt == 1) {
                    return failure
                }
                if (error as? CacheError)?.code == .hashMismatch {
                    logger.warning("\(file.path): \(String(describing: error)); fetching it once more")
                    continue
                }
                throw error
            }
        }
        return .failed(message: "\(file.path): hash mismatch twice", exitCode: .partialFailure)
    }

    /// The per-file result for `error`, or nil when it must be rethrown (it stops the run) or, for a first
    /// hash mismatch, retried.
    private static func fileFailure(_ error: any Error, retryable: Bool) -> FileResult? {
        if let cacheError = error as? CacheError {
            if cacheError.stopsRun || (cacheError.code == .hashMismatch && retryable) { return nil }
            return .failed(message: cacheError.message, exitCode: cacheError.exitCode)
        }
        if let providerError = error as? ProviderError, !providerError.stopsRun {
            return .failed(message: providerError.message, exitCode: providerError.exitCode)
        }
        return nil
    }
}

extension ProviderError {
    /// Errors after which no other file of the remote can succeed either.
    var stopsRun: Bool { code == .unauthorized || code == .tokenExpired || code == .configuration }
}

extension CacheError {
    /// Errors after which no other file can be written either (disk full, broken index).
    var stopsRun: Bool { code == .diskFull || code == .io || code == .corrupt }
}
