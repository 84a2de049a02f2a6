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
        cache.removeIdleLockFiles()
        let eviction = try cache.evict(dryRun: false)
        if !eviction.evicted.isEmpty {
            logger.info("evicted \(eviction.evicted.count) tracks (\(ByteSize.format(eviction.freedBytes))) to stay within the cache limits")
        }
        return report
    }

    /// Lists the remote, plans, fills the report's counts and (unless a dry run) records the listing in the
    /// index. Returns the plan and the cursor to store once the pull succeeded.
    private func listAndPlan(into report: inout SyncReport) async throws -> (SyncPlan, String?) {
        let survey = try await survey(recording: !options.dryRun)
        let plan = survey.plan
        report.listed = survey.present.count
        for item in plan.fetch {
            if item.changed { report.changed += 1 } else if item.missingBytes == item.file.size { report.new += 1 }
        }
        report.deleted = plan.remove.count
        report.skipped = plan.upToDate
        report.unreadableFolders = survey.unreadableFolders
        return (plan, survey.cursor)
    }

    /// Lists the remote and records new and changed files in the index, without fetching, removing or
    /// storing the cursor (so a later pull still sees the same changes). Returns the paths of the remote's
    /// audio files.
    public func refreshIndex() async throws -> Set<String> {
        try await survey(recording: true).present
    }

    // MARK: - Listing and plan

    /// What one listing produced.
    struct Survey {
        var plan = SyncPlan()
        /// Paths of every audio file the remote has now (kept files under unreadable folders included).
        var present: Set<String> = []
        var cursor: String?
        /// Folders the provider could not read (`ListingPage.skippedFolders`), sorted, each once.
        var unreadableFolders: [String] = []
    }

    /// Lists the remote and plans the pull. A full listing is planned and (with `recording`) recorded in the
    /// index page by page, so a pull holds the paths of the listing and the plan, never the whole listing; a
    /// listing cut short has recorded only what the remote said, and removes nothing. A change feed is
    /// collected first (changes are few) and then applied over the index's paths: deletions, moves (a file
    /// keeps its provider id), upserts; incomplete entries it does not mention are planned too.
    func survey(recording: Bool) async throws -> Survey {
        events(.listing(remote: remote))
        var survey = Survey()
        var kind = ListingKind.full
        var changed: [String: RemoteFile] = [:]
        var deletions: [RemoteDeletion] = []
        var skipped: Set<String> = []
        for try await page in provider.listAudio(cursor: try cache.cursor(remote: remote)) {
            kind = page.kind
            if let c = page.cursor { survey.cursor = c }
            skipped.formUnion(page.skippedFolders)
            switch page.kind {
            case .full:
                // A path listed twice keeps its first entry.
                let fresh = page.upserts.filter { survey.present.insert($0.path).inserted }
                try plan(fresh, recording: recording, into: &survey.plan)
            case .changes:
                for file in page.upserts { changed[file.path] = file }
                deletions += page.deletions
            }
        }
        // A stream also ends when this task is cancelled: a cut-short listing must never count as complete.
        try Task.checkCancellation()
        survey.unreadableFolders = skipped.sorted()
        switch kind {
        case .full:
            var gone = try cache.knownPaths(remote: remote).subtracting(survey.present)
            if !skipped.isEmpty {
                // Files under folders the provider could not read this time are kept as they were.
                let kept = gone.filter { path in skipped.contains { Self.isUnder(path, $0) } }
                gone.subtract(kept)
                survey.present.formUnion(kept)
                let names = survey.unreadableFolders.prefix(3).map { $0.isEmpty ? "/" : $0 }
                let more = skipped.count > names.count ? " and \(skipped.count - names.count) more" : ""
                events(.warning(remote: remote, message: "\(skipped.count) folder(s) could not be read, so their new tracks were not fetched; their cached tracks are kept: \(names.joined(separator: ", "))\(more)"))
            }
            survey.plan.remove = gone.filter { options.selects($0) }.sorted()
        case .changes:
            var ids = try cache.providerIDs(remote: remote)
            var gone: Set<String> = []
            for deletion in deletions {
                for path in matching(deletion, in: ids) {
                    ids[path] = nil
                    gone.insert(path)
                }
            }
            // A moved file keeps its id: its old path is gone. (Index by id once, not a scan per upsert.)
            var pathsByID: [String: [String]] = [:]
            for (path, id) in ids { if let id { pathsByID[id, default: []].append(path) } }
            for (path, file) in changed {
                if let id = file.providerID {
                    for oldPath in pathsByID[id] ?? [] where oldPath != path && ids[oldPath] == .some(.some(id)) {
                        ids[oldPath] = nil
                        gone.insert(oldPath)
                    }
                }
                ids[path] = .some(file.providerID)
                gone.remove(path)
            }
            let upserts = Array(changed.values)
            try plan(upserts, recording: recording, into: &survey.plan)
            // Tracks an earlier pull left incomplete, which this feed does not mention, are fetched too.
            for entry in try cache.incompleteEntries(remote: remote)
            where changed[entry.path] == nil && !gone.contains(entry.path) && options.selects(entry.path) {
                survey.plan.fetch.append(.init(file: entry.file, missingBytes: entry.file.size - entry.presentBytes, changed: false))
            }
            survey.present = Set(ids.keys)
            survey.plan.remove = gone.filter { options.selects($0) }.sorted()
            // Every selected file the feed leaves in place and no fetch needs is up to date.
            survey.plan.upToDate = survey.present.count(where: { options.selects($0) }) - survey.plan.fetch.count
        }
        survey.plan.fetch.sort { $0.file.path < $1.file.path }
        events(.listed(remote: remote, files: survey.present.count, kind: kind))
        return survey
    }

    /// Plans `files` (listed now) against the index and, with `recording`, records them: new and changed files
    /// are added to the index (a changed fingerprint drops cached bytes; the old complete track stays until the
    /// new one is verified).
    private func plan(_ files: [RemoteFile], recording: Bool, into plan: inout SyncPlan) throws {
        if files.isEmpty { return }
        let statuses = recording ? try cache.upsert(remote: remote, files: files) : try cache.compare(remote: remote, files: files)
        for (file, status) in zip(files, statuses) where options.selects(file.path) {
            switch status {
            case .same(complete: true, _):
                plan.upToDate += 1
            case .same(complete: false, let present):
                plan.fetch.append(.init(file: file, missingBytes: file.size - present, changed: false))
            case .changed(let wasComplete):
                plan.fetch.append(.init(file: file, missingBytes: file.size, changed: wasComplete))
            case .new:
                plan.fetch.append(.init(file: file, missingBytes: file.size, changed: false))
            }
        }
    }

    /// Whether `path` is `folder` or lies under it ("" is the root).
    static func isUnder(_ path: String, _ folder: String) -> Bool {
        folder.isEmpty || path == folder || path.hasPrefix(folder + "/")
    }

    /// Paths among `ids` (path → provider id) that `deletion` removes.
    private func matching(_ deletion: RemoteDeletion, in ids: [String: String?]) -> [String] {
        switch deletion {
        case .path(let p):
            let fold = provider.capabilities.caseInsensitivePaths
            let prefix = fold ? p.trimmingCharacters(in: CharacterSet(charactersIn: "/")).lowercased()
                : p.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            if prefix.isEmpty { return Array(ids.keys) }
            return ids.keys.filter { key in
                let k = fold ? key.lowercased() : key
                return k == prefix || k.hasPrefix(prefix + "/")
            }
        case .providerID(let id):
            return ids.filter { $0.value == .some(id) }.map(\.key)
        }
    }

    // MARK: - Fetch

    private func fetchAll(_ plan: SyncPlan, into report: inout SyncReport) async throws {
        guard !plan.fetch.isEmpty else { return }
        let fetcher = FileFetcher(provider: provider, transport: transport, pacer: pacer, chunkSize: options.chunkSize,
                                  segments: options.segments, segmentThreshold: options.segmentThreshold,
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
        await withThrowingTaskGroup(of: (String, FileResult).self) { group in
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
            // Only a remote that stayed unavailable (retries spent) counts towards exit 5; a wrong answer about this
            // one file (a redirect to file:, a bad Content-Range) is a partial failure like any other.
            return .failed(message: providerError.message,
                           exitCode: providerError.isRetryable ? .unavailable : .partialFailure)
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
