import CloudSyncCache
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization

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
    /// Within a pull, `heads` becomes the policy the heads fit under (``CacheBudget/fitHeads(removing:)``).
    public internal(set) var options: SyncOptions
    public let logger: Logger
    /// Settable inside the module: ``run()`` wraps it to count what a run that stops with an error did fetch.
    public internal(set) var events: @Sendable (SyncEvent) -> Void
    /// The files `options.paths` selects.
    let selection: PathSelection

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
        selection = PathSelection(options.paths, remote: remote)
    }

    public func run() async throws -> SyncReport {
        let lock = try await cache.pullLock(remote: remote, wait: options.waitForLock) { [logger, remote] holder in
            logger.info("waiting for another pull of remote \(remote)\(holder.isEmpty ? "" : " (pid \(holder))") to finish; Ctrl-C stops waiting")
        }
        defer { lock.release() }
        if options.dryRun { return try await runLocked() }
        // The run is recorded for `cloudsync status`; a failure to record never stops a pull.
        let started = Date()
        recordRun(PullRun(remote: remote, started: started, outcome: .running))
        // What a run that stops with an error (its report is lost) did fetch: counted from its events.
        let finished = FinishedFiles()
        var counting = self
        counting.events = { [events] event in
            finished.note(event)
            events(event)
        }
        do {
            let report = try await counting.runLocked()
            recordRun(PullRun(remote: remote, started: started, ended: Date(), outcome: report.exitCode == .ok ? .ok : .partial,
                              exitCode: report.exitCode.rawValue, fetchedFiles: report.fetchedFiles,
                              fetchedBytes: report.fetchedBytes, failed: report.failed.count,
                              message: report.failed.first.map { "\($0.path): \($0.error)" }
                                  ?? report.unreadableFolders.first.map { "folder '\($0)' could not be read" }))
            return report
        } catch {
            let interrupted = error is CancellationError || Task.isCancelled
            let tally = finished.tally
            recordRun(PullRun(remote: remote, started: started, ended: Date(), outcome: interrupted ? .interrupted : .failed,
                              exitCode: (interrupted ? .interrupted : (error as? any ExitCodeProviding)?.exitCode ?? .partialFailure).rawValue,
                              fetchedFiles: tally.fetchedFiles, fetchedBytes: tally.fetchedBytes, failed: tally.failed.count,
                              message: interrupted ? nil : String(describing: error)))
            throw error
        }
    }

    /// The files of a run finished so far, from its `fileFinished` events.
    private final class FinishedFiles: Sendable {
        private let state = Mutex(FetchTally())
        func note(_ event: SyncEvent) {
            if case .fileFinished(_, let path, let result) = event { state.withLock { $0.record(path, result) } }
        }
        var tally: FetchTally { state.withLock { $0 } }
    }

    private func recordRun(_ run: PullRun) {
        do { try cache.recordPull(run) } catch { logger.debug("could not record the pull for cloudsync status: \(error)") }
    }

    private func runLocked() async throws -> SyncReport {
        var report = SyncReport(remote: remote, provider: providerName)
        if !options.dryRun {
            try cache.reconcilePromotions()
            // Tracks deleted from tracks/ by hand (to free space, by mistake) are fetched again, not left claimed.
            let broken = try cache.forgetBrokenTracks(remote: remote)
            if !broken.isEmpty {
                logger.info("\(remote): \(broken.count == 1 ? "1 complete track was" : "\(broken.count) complete tracks were") missing from "
                    + "tracks/ or had another size; fetching again: \(broken.prefix(5).joined(separator: ", "))\(broken.count > 5 ? ", …" : "")")
            }
        }
        if options.refetch && !options.dryRun && !selection.selectsEverything {
            let dropped = try cache.dropBytes(remote: remote, paths: cache.knownPaths(remote: remote).filter(selection.selects).sorted())
            for busy in dropped.skippedBusy {
                events(.warning(remote: remote, message: "\(busy) is being written by another process, so it is not fetched again"))
            }
        }

        var (plan, cursor) = try await listAndPlan(into: &report)
        // Without delete, tracks whose remote file is gone stay (marked in the index) and are planned as usual.
        var keptDeletions: [String] = []
        if !options.delete && !plan.remove.isEmpty {
            // Said once: tracks an earlier run already kept are not deletions of this run.
            let marked = Set(try cache.entries(remote: remote).filter { $0.deletedRemotely != nil }.map(\.path))
            keptDeletions = plan.remove.filter { !marked.contains($0) }
            report.deleted = keptDeletions.count
            plan.remove = []
        }
        let budget = CacheBudget(cache: cache, settings: options.budget, logger: logger)
        let removing = Set(plan.remove.map { RemotePath(remote: remote, path: $0) })
        if options.dryRun {
            // What the pull would fetch is the plan fitted into the budget, as the pull fits it: over the index as
            // the pull would record the listing.
            let (unrecorded, replaced) = try unrecordedTracks(plan)
            let (cachePlan, tracks) = try budget.plan(removing: removing.union(replaced), extra: unrecorded)
            let schedule = ScheduledFetch(remote: remote, cachePlan, tracks, candidates: Self.candidates(plan))
            schedule.count(plan, into: &report)
            let fitted = schedule.applied(to: plan)
            events(.planned(remote: remote, plan: fitted))
            let reduction = try budget.reduce(to: cachePlan, tracks: tracks, dryRun: true)
            report.budget = BudgetSummary(cachePlan, reduction: reduction)
            report.budget?.limitedByDisk = cachePlan.budget < options.budget.maxSize
            report.plan = DryRunPlan(fitted, reduced: reduction.items)
            events(.budget(remote: remote, summary: report.budget, reduced: reduction.items))
            return report
        }

        // Start sets computed under another policy than the one the heads fit under are derived again before
        // planning; the rest of the pull plans and analyses under it.
        var fitted = self
        fitted.options.heads = try budget.fitHeads(removing: removing)
        return try await fitted.fetchAndSettle(plan, cursor: cursor, keptDeletions: keptDeletions, removing: removing, report: report)
    }

    /// The pull after listing, under the head policy chosen: fetch within the budget, remove deletions, store the
    /// cursor, reach the final plan.
    private func fetchAndSettle(_ plan: SyncPlan, cursor: String?, keptDeletions: [String], removing: Set<RemotePath>,
                                report: SyncReport) async throws -> SyncReport {
        var report = report
        let budget = CacheBudget(cache: cache, settings: options.budget, logger: logger)
        events(.planned(remote: remote, plan: plan))
        var (reduction, heads) = try await fetchWithinBudget(plan, budget: budget, removing: removing, into: &report)
        for path in plan.remove {
            let removal = try cache.remove(remote: remote, path: path)
            events(.removed(remote: remote, path: path, keptPinned: !removal.keptPinned.isEmpty))
        }
        if !keptDeletions.isEmpty {
            try cache.markDeletedRemotely(remote: remote, paths: keptDeletions)
            let count = keptDeletions.count
            events(.warning(remote: remote, message: "\(count) track\(count == 1 ? "" : "s") deleted remotely kept in the cache "
                + "(--no-delete / pull.delete = false); ls shows \(count == 1 ? "it" : "them") as deleted remotely"))
        }
        // A pull restricted to PATHs applies only part of the listing (deletions elsewhere wait), so it must not
        // advance the change feed past changes it did not apply.
        if let cursor, options.paths.isEmpty, let scope = options.cursorScope { try cache.setCursor(scope + cursor, remote: remote) }
        cache.removeLegacyLockFiles()
        // Estimates were replaced by real start sets: reach the plan exactly.
        let (finalPlan, tracks) = try budget.plan(heads: heads)
        let last = try budget.reduceAnalysing(finalPlan, tracks: tracks, heads: heads)
        reduction.items += last.items
        reduction.busy += last.busy
        report.budget = BudgetSummary(finalPlan, reduction: reduction)
        report.budget?.limitedByDisk = finalPlan.budget < options.budget.maxSize
        // Said only when it matters: the disk, not cache.max_size, is what keeps part of the library out.
        if finalPlan.libraryBytes > finalPlan.budget, let message = budget.diskLimit(finalPlan.budget) {
            events(.warning(remote: remote, message: message))
        }
        events(.budget(remote: remote, summary: report.budget, reduced: reduction.items))
        return report
    }

    /// A dry run's files as a pull would record them, for planning (the dry run records nothing): those the
    /// index does not know, and those it holds in another version — with no byte cached, the older version's
    /// complete track still held until the new one replaces it. `replaced`: the index rows of the latter, which
    /// the planning leaves out.
    private func unrecordedTracks(_ plan: SyncPlan) throws -> (tracks: [PlanningTrack], replaced: Set<RemotePath>) {
        var extra: [PlanningTrack] = []
        var replaced: Set<RemotePath> = []
        var next: Int64 = -1
        let now = Date().timeIntervalSince1970
        for item in plan.fetch where item.firstSeen || item.versionChanged {
            var outdated: Int64 = 0
            if item.versionChanged, let entry = try cache.entry(remote: remote, path: item.file.path) {
                outdated = entry.state == .complete ? entry.file.size : entry.outdatedTrackBytes
                replaced.insert(RemotePath(remote: remote, path: item.file.path))
            }
            extra.append(PlanningTrack(id: next, remote: remote, path: item.file.path, size: item.file.size, outdatedBytes: outdated,
                                       startBytes: options.budget.heads.estimate(size: item.file.size, path: item.file.path, mimeType: item.file.mimeType),
                                       startSetKnown: false, added: now, modified: item.file.modified.timeIntervalSince1970))
            next -= 1
        }
        return (extra, replaced)
    }

    /// Lists the remote, plans, fills the report's counts and (unless a dry run) records the listing in the
    /// index. Returns the plan and the cursor to store once the pull succeeded.
    private func listAndPlan(into report: inout SyncReport) async throws -> (SyncPlan, String?) {
        let survey = try await survey(recording: !options.dryRun)
        var plan = survey.plan
        // A move deletes the old path: a pull that keeps deletions keeps the old track and fetches the new one.
        if options.delete { try applyMoves(to: &plan) }
        report.moved = plan.moved.count
        report.listed = survey.present.count
        report.deleted = plan.remove.count
        report.skipped = plan.upToDate
        report.unreadableFolders = survey.unreadableFolders
        report.unmatchedPaths = selection.unmatched(in: survey.present)
        return (plan, survey.cursor)
    }

    /// Finds the files of `plan.fetch` that the cache holds under a path of `plan.remove` (``MovedFiles``), gives
    /// their entries the new path (a dry run only plans it) and takes them out of both lists: a complete one is up
    /// to date, a partial one is fetched from where it stands. A move the cache skips (``Cache/move(remote:_:)``)
    /// leaves both paths planned as they were.
    private func applyMoves(to plan: inout SyncPlan) throws {
        guard !plan.remove.isEmpty else { return }
        let appeared = plan.fetch.filter { !$0.changed && $0.missingBytes == $0.file.size }.map(\.file)
        guard !appeared.isEmpty else { return }
        var gone: [MovedFiles.Gone] = []
        var held: [String: CacheEntryInfo] = [:]
        for path in plan.remove {
            guard let entry = try cache.entry(remote: remote, path: path) else { continue }
            let bytes = entry.presentBytes.addingSaturating(entry.outdatedTrackBytes)
            guard bytes > 0 else { continue }
            gone.append(MovedFiles.Gone(file: entry.file, heldBytes: bytes))
            held[path] = entry
        }
        let moves = MovedFiles.match(gone: gone, appeared: appeared)
        guard !moves.isEmpty else { return }
        let outcomes: [Cache.MovedEntry?]
        if options.dryRun {
            outcomes = moves.map { move in
                held[move.from].map { Cache.MovedEntry(complete: $0.state == .complete, presentBytes: $0.presentBytes) }
            }
        } else {
            do {
                outcomes = try cache.move(remote: remote, moves.map { ($0.from, $0.to) })
            } catch {
                // Nothing was moved (the renames were undone): the files are fetched and the old ones removed.
                events(.warning(remote: remote, message: "\(moves.count) track\(moves.count == 1 ? "" : "s") moved on the remote "
                    + "could not be renamed in the cache, so \(moves.count == 1 ? "it is" : "they are") fetched again: \(error)"))
                return
            }
        }
        var movedFrom: Set<String> = []
        var present: [String: Int64] = [:]
        for (move, outcome) in zip(moves, outcomes) {
            guard let outcome else { continue }
            movedFrom.insert(move.from)
            present[move.to.path] = outcome.presentBytes
            plan.moved.append(TrackMove(from: move.from, to: move.to.path))
        }
        guard !movedFrom.isEmpty else { return }
        plan.remove.removeAll { movedFrom.contains($0) }
        plan.fetch = plan.fetch.compactMap { item in
            guard let bytes = present[item.file.path] else { return item }
            guard bytes < item.file.size else {
                plan.upToDate += 1
                return nil
            }
            var resumed = item
            resumed.missingBytes = item.file.size - bytes
            resumed.firstSeen = false
            return resumed
        }
    }

    /// Lists the remote and records new and changed files in the index, without fetching, removing or
    /// storing the cursor (so a later pull still sees the same changes). Returns the paths of the remote's
    /// audio files.
    public func refreshIndex() async throws -> Set<String> {
        try await survey(recording: true).present
    }

    // MARK: - Listing and plan

    /// A full listing is planned and recorded in groups of this many files (or what came in ``recordingDelay``):
    /// one index transaction per group instead of one per page. A page is a folder on WebDAV, often a dozen files,
    /// and each transaction rewrote the same index pages into the WAL: 2,000 files in 221 folders wrote ~2,000
    /// WAL frames (8 MiB) and two checkpoints between the last PROPFIND and the first download.
    static let recordingGroup = 512
    static let recordingDelay = Duration.milliseconds(500)

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
    /// index in groups (``recordingGroup``), so a pull holds the paths of the listing and the plan, never the
    /// whole listing; a listing cut short has recorded only what the remote said, and removes nothing. A change feed is
    /// collected first (changes are few) and then applied over the index's paths: deletions, moves (a file
    /// keeps its provider id), upserts; incomplete entries it does not mention are planned too.
    func survey(recording: Bool) async throws -> Survey {
        events(.listing(remote: remote))
        var survey = Survey()
        var kind = ListingKind.full
        var changed: [String: RemoteFile] = [:]
        var deletions: [RemoteDeletion] = []
        var skipped: Set<String> = []
        // Listed files the filters exclude: not indexed, and not gone either.
        var excluded: Set<String> = []
        let now = Date()
        let outdated = try cache.outdatedPaths(remote: remote)
        // Only a provider with a change feed is given a cursor, and only its cursor is kept: any other lists fully.
        let feed = provider.capabilities.hasChangeFeed
        // Listed files not yet planned and recorded, the first of them since `pendingSince`.
        var pending: [RemoteFile] = []
        var pendingSince = ContinuousClock.now
        for try await page in provider.listAudio(cursor: feed ? try storedCursor() : nil) {
            kind = page.kind
            if feed, let c = page.cursor { survey.cursor = c }
            skipped.formUnion(page.skippedFolders)
            var upserts = page.upserts
            if !options.filters.isEmpty {
                upserts = upserts.filter { file in
                    if options.keeps(file, now: now) { return true }
                    excluded.insert(file.path)
                    return false
                }
            }
            switch page.kind {
            case .full:
                // A path listed twice keeps its first entry.
                let fresh = upserts.filter { survey.present.insert($0.path).inserted }
                if pending.isEmpty { pendingSince = .now }
                pending += fresh
                if pending.count >= Self.recordingGroup || (!pending.isEmpty && ContinuousClock.now - pendingSince >= Self.recordingDelay) {
                    try plan(pending, recording: recording, outdated: outdated, into: &survey.plan)
                    pending.removeAll(keepingCapacity: true)
                }
            case .changes:
                for file in upserts { changed[file.path] = file }
                deletions += page.deletions
            }
        }
        // A stream also ends when this task is cancelled: a cut-short listing must never count as complete.
        try Task.checkCancellation()
        try plan(pending, recording: recording, outdated: outdated, into: &survey.plan)
        survey.unreadableFolders = skipped.sorted()
        switch kind {
        case .full:
            var gone = try cache.knownPaths(remote: remote).subtracting(survey.present).subtracting(excluded)
            if !skipped.isEmpty {
                // Files under folders the provider could not read this time are kept as they were.
                let kept = gone.filter { path in skipped.contains { Self.isUnder(path, $0) } }
                gone.subtract(kept)
                survey.present.formUnion(kept)
                let names = survey.unreadableFolders.prefix(3).map { $0.isEmpty ? "/" : $0 }
                let more = skipped.count > names.count ? " and \(skipped.count - names.count) more" : ""
                events(.warning(remote: remote, message: "\(skipped.count) folder(s) could not be read, so their new tracks were not fetched; their cached tracks are kept: \(names.joined(separator: ", "))\(more)"))
            }
            survey.plan.remove = gone.filter { selection.selects($0) }.sorted()
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
            try plan(upserts, recording: recording, outdated: outdated, into: &survey.plan)
            // Tracks an earlier pull left incomplete, which this feed does not mention, are fetched too.
            for entry in try cache.incompleteEntries(remote: remote)
            where changed[entry.path] == nil && !gone.contains(entry.path) && selection.selects(entry.path)
                && !excluded.contains(entry.path) && options.keeps(entry.file, now: now) {
                survey.plan.fetch.append(.init(file: entry.file, missingBytes: entry.file.size - entry.presentBytes,
                                               changed: entry.outdatedTrackBytes > 0))
            }
            survey.present = Set(ids.keys)
            survey.plan.remove = gone.filter { selection.selects($0) }.sorted()
            // Every selected file the feed leaves in place and no fetch needs is up to date.
            survey.plan.upToDate = survey.present.count(where: { selection.selects($0) }) - survey.plan.fetch.count
        }
        survey.plan.fetch.sort { $0.file.path < $1.file.path }
        events(.listed(remote: remote, files: survey.present.count, kind: kind))
        return survey
    }

    /// The stored change cursor when it was stored under the same filters (`SyncOptions.cursorScope`), else nil
    /// (a full listing).
    private func storedCursor() throws -> String? {
        guard let stored = try cache.cursor(remote: remote), let scope = options.cursorScope else { return nil }
        if scope.isEmpty { return stored.hasPrefix("filtered-") ? nil : stored }
        return stored.hasPrefix(scope) ? String(stored.dropFirst(scope.count)) : nil
    }

    /// Plans `files` (listed now) against the index and, with `recording`, records them: new and changed files
    /// are added to the index (a changed fingerprint drops cached bytes; the old complete track stays until the
    /// new one is verified).
    /// `outdated`: paths whose older version is still in `tracks/` (``Cache/outdatedPaths(remote:)``), counted as
    /// changed even when an `ls` already recorded the new version.
    private func plan(_ files: [RemoteFile], recording: Bool, outdated: Set<String>, into plan: inout SyncPlan) throws {
        if files.isEmpty { return }
        let statuses = recording ? try cache.upsert(remote: remote, files: files) : try cache.compare(remote: remote, files: files)
        for (file, status) in zip(files, statuses) where selection.selects(file.path) {
            switch status {
            case .same(complete: true, _):
                plan.upToDate += 1
            case .same(complete: false, let present):
                plan.fetch.append(.init(file: file, missingBytes: file.size - present, changed: outdated.contains(file.path)))
            case .changed(let wasComplete):
                plan.fetch.append(.init(file: file, missingBytes: file.size, changed: wasComplete, versionChanged: true))
            case .new:
                plan.fetch.append(.init(file: file, missingBytes: file.size, changed: false, firstSeen: true))
            }
        }
    }

    /// Whether `path` is `folder` or lies under it ("" is the root).
    static func isUnder(_ path: String, _ folder: String) -> Bool {
        PathSelection.isUnder(path, folder)
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

    /// Fetches this remote's share of the cache plan: the plan is made (over every remote), the cache brought
    /// down to it, then the start sets of planned tracks are fetched in priority order, the plan made again with
    /// the real start sets (until no planned head is an estimate), and finally whole tracks in priority order.
    /// Only the tracks `plan` found incomplete and selected are candidates; nothing the plan does not keep is
    /// fetched, and eviction only ever makes room for higher-priority work.
    /// Returns what was reduced and the head policy the pull ended under: shorter than it began when the real
    /// start sets turned out bigger than their estimates and the heads no longer fit (`pull.shorten_heads`).
    private func fetchWithinBudget(_ plan: SyncPlan, budget: CacheBudget, removing: Set<RemotePath>,
                                   into report: inout SyncReport) async throws -> (ReductionReport, HeadPolicy) {
        var reduction = ReductionReport()
        var options = options
        guard !plan.fetch.isEmpty else {
            let (cachePlan, tracks) = try budget.plan(removing: removing, heads: options.heads)
            return (try budget.reduceAnalysing(cachePlan, tracks: tracks, removing: removing, heads: options.heads),
                    options.heads)
        }
        let fetcher = FileFetcher(provider: provider, transport: transport, pacer: pacer, chunkSize: options.chunkSize,
                                  segments: options.segments, segmentThreshold: options.segmentThreshold,
                                  events: events, logger: logger, transferSlots: options.jobs)
        let candidates = Self.candidates(plan)
        // What the rounds came to; the files they ended are not tried again.
        var tally = FetchTally()
        /// This remote's candidates with `target` at least `level`, in priority order: each as its index in `tracks`
        /// and its index in `plan.fetch` (indexes, not copies: a list of the tracks and files themselves took
        /// 44 MiB at 100,000).
        func wanted(_ cachePlan: CachePlan, _ tracks: [PlanningTrack], _ level: TrackTarget,
                    where keep: (PlanningTrack) -> Bool) -> [(track: Int, file: Int)] {
            // This remote's tracks by id, as indexes into `tracks`.
            let mine = Dictionary(tracks.indices.lazy.filter { tracks[$0].remote == remote }.map { (tracks[$0].id, $0) },
                                  uniquingKeysWith: { a, _ in a })
            let selected = cachePlan.order.compactMap { id -> (track: Int, file: Int)? in
                guard let index = mine[id] else { return nil }
                let track = tracks[index]
                guard cachePlan.target(id) >= level, keep(track), !tally.finished.contains(track.path),
                      let candidate = candidates[track.path] else { return nil }
                return (index, candidate)
            }
            guard let order = options.order else { return selected }
            return order.sorted(selected, path: { plan.fetch[$0.file].file.path },
                                size: { plan.fetch[$0.file].file.size },
                                modified: { plan.fetch[$0.file].file.modified.timeIntervalSince1970 },
                                added: { tracks[$0.track].added })
        }

        // Heads, in rounds. A start set never analysed is planned at an estimate about twice its real size, so the
        // cache is never reduced to a plan that holds many estimates (that shrinks tracks, another remote's too,
        // that the real start sets leave room for: Findings 6 in bench/README.md). A round fetches the wanted
        // heads that fit the room the budget has now; only when the next one does not fit is the cache reduced,
        // to a plan counting half of the estimated heads still to fetch (the rest left out until a later round).
        // The room an estimate over-reserved goes to the next round's heads, so what is shrunk for estimates is at
        // most one head's overestimate. Each round tries heads not tried before: the rounds end.
        var tried: Set<String> = []
        var scheduled = false
        var rounds = 0
        // The plan the rounds ended with, when nothing changed the cache after it was made: the tails' plan.
        var unchanged: (CachePlan, [PlanningTrack])?
        var movedUp = false
        while true {
            let (cachePlan, tracks) = try budget.plan(removing: removing, heads: options.heads)
            if !cachePlan.allHeadsFit, budget.settings.shortenHeads, let shorter = try shorterHeads(than: options.heads, budget, removing) {
                // The start sets fetched so far are bigger than estimated: shorter heads for every track, derived
                // from what is cached (the heads fetched hold the shorter ones).
                options.heads = shorter.heads
                try StartSets.rederiveAll(cache: cache, heads: options.heads, logger: logger,
                                          reason: budget.shortening(shorter, because: "the heads fetched so far are bigger than estimated: they do not all fit the budget"))
                tried = []
                continue
            }
            if !scheduled {
                let schedule = ScheduledFetch(remote: remote, cachePlan, tracks, candidates: candidates)
                events(.scheduled(remote: remote, files: schedule.files, headsOnly: schedule.headsOnly, bytes: schedule.bytes))
                schedule.count(plan, into: &report)
                scheduled = true
            }
            let heads = wanted(cachePlan, tracks, .head) { !$0.headPresent && !tried.contains($0.path) }
            if heads.isEmpty {
                if !movedUp, budget.settings.shortenHeads, let longer = try longerHeads(than: options.heads, budget, removing) {
                    // The heads were shortened on estimates and the real ones are smaller: the longer heads fit
                    // after all, so this pull fetches them rather than leaving it to the next one (once: a pull
                    // that finds them too big after all shortens them again above and keeps that).
                    movedUp = true
                    options.heads = longer.heads
                    try StartSets.rederiveAll(cache: cache, heads: options.heads, logger: logger,
                                              reason: "the heads fetched are smaller than estimated: \(longer.heads) fit the budget")
                    tried = []
                    continue
                }
                unchanged = (cachePlan, tracks)
                break
            }
            var room = cachePlan.budget.addingSaturating(-(try cache.heldBytes()))
            var batch: [FetchItem] = []
            for head in heads {
                let track = tracks[head.track]
                let adds = max(0, track.startBytes - track.partialBytes)
                guard adds <= room else { break }
                room -= adds
                batch.append(FetchItem(file: plan.fetch[head.file].file, id: track.id))
            }
            if batch.isEmpty {
                let estimated = heads.filter { !tracks[$0.track].startSetKnown }
                let later = estimated.dropFirst((estimated.count + 1) / 2)
                    .map { RemotePath(remote: remote, path: tracks[$0.track].path) }
                let leftOut = removing.union(later)
                let (roundPlan, roundTracks) = try budget.plan(removing: leftOut, heads: options.heads)
                let reduced = try budget.reduceAnalysing(roundPlan, tracks: roundTracks, removing: leftOut,
                                                        heads: options.heads)
                reduction.items += reduced.items
                reduction.busy += reduced.busy
                batch = wanted(roundPlan, roundTracks, .head) { !$0.headPresent && !tried.contains($0.path) }
                    .map { FetchItem(file: plan.fetch[$0.file].file, id: roundTracks[$0.track].id) }
                if batch.isEmpty { break }
            }
            tried.formUnion(batch.map(\.file.path))
            rounds += 1
            logger.debug("budget: head round \(rounds): \(batch.count) head(s) of \(remote)")
            let policy = options.heads
            tally.add(try await forEach(batch, fetcher: fetcher) { job in
                try await StartSets.fetch(job, fetcher: fetcher, heads: policy, logger: logger)
                if job.writer.missingRanges().isEmpty { return nil }
                return .headCached(fetched: job.fetched)
            })
        }

        // Tails: plan with the real start sets, make room, fetch the planned whole tracks in priority order.
        let (cachePlan, tracks) = try unchanged ?? budget.plan(removing: removing, heads: options.heads)
        let reduced = try budget.reduceAnalysing(cachePlan, tracks: tracks, removing: removing, heads: options.heads)
        reduction.items += reduced.items
        reduction.busy += reduced.busy
        let whole = wanted(cachePlan, tracks, .complete) { !$0.complete }
            .map { FetchItem(file: plan.fetch[$0.file].file, id: tracks[$0.track].id) }
        let policy = options.heads
        tally.add(try await forEach(whole, fetcher: fetcher) { job in
            try await StartSets.fetch(job, fetcher: fetcher, heads: policy, logger: logger)
            try await fetcher.fetch(job, within: 0 ..< job.file.size, checkpointAtEnd: false)
            return nil
        })
        tally.apply(to: &report)
        return (reduction, options.heads)
    }

    /// The plan under a shorter head policy than `heads` that the library's heads fit now (``HeadFit`` over what is
    /// known), or nil when no shorter one does better.
    private func shorterHeads(than heads: HeadPolicy, _ budget: CacheBudget, _ removing: Set<RemotePath>) throws -> CachePlan? {
        let ladder = budget.settings.heads.ladder
        let (choice, _) = try budget.plan(removing: removing)
        guard let now = ladder.firstIndex(of: heads), let then = ladder.firstIndex(of: choice.heads), then > now else { return nil }
        return choice
    }

    /// The plan under a longer head policy than `heads` that ``HeadFit`` chooses over what is known now (the
    /// margin of a move up included), or nil.
    private func longerHeads(than heads: HeadPolicy, _ budget: CacheBudget, _ removing: Set<RemotePath>) throws -> CachePlan? {
        let ladder = budget.settings.heads.ladder
        guard let now = ladder.firstIndex(of: heads), now > 0 else { return nil }
        let (choice, _) = try budget.plan(removing: removing)
        guard let then = ladder.firstIndex(of: choice.heads), then < now else { return nil }
        return choice
    }

    /// Where each file of `plan.fetch` is in it, by path: indexes, not a copy of every `RemoteFile` (31 MiB at
    /// 100,000 tracks).
    static func candidates(_ plan: SyncPlan) -> [String: Int] {
        Dictionary(plan.fetch.indices.map { (plan.fetch[$0].file.path, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// What fetching a file came to: a result, or a file whose commit to the cache is still to run (a verified
    /// file's promotion, or a kept head's last checkpoint: both join the cache's group commit); the worker goes on
    /// to the next file meanwhile, so a batch that waits for more files never holds a transfer back.
    private enum Step: Sendable {
        case finished(FileResult)
        case committing(FileCommit)
    }

    /// A file to fetch and its entry's id in the index (from the plan: opening its writer needs no lookup by path).
    struct FetchItem {
        let file: RemoteFile
        let id: Int64
    }

    /// Runs `work` for each file with `2 × options.jobs` files open at once, of which the fetcher's transfer slots
    /// let at most `options.jobs` download at once (``TransferSlot``): the others' bookkeeping (opening the entry,
    /// analysing a start set, the hand-offs between threads) overlaps those transfers, and the next file's request
    /// waits on the network thread, which starts it the moment a transfer ends. With `jobs` files open each file's
    /// bookkeeping left its connection idle: 2,000 files of 200 KiB transferred on 2.4 connections of 4 on
    /// average. Each of `2 × jobs` worker tasks takes the next file once its last one is fetched (its commit goes
    /// on without it, ``FetchRound``). File k opens once file k − jobs has asked for bytes or ended
    /// (``OpenGate``), so files ask in the run's order as before (strictly with one job). `work` returns nil to go
    /// on to verification and promotion. Errors that must stop the whole remote (auth, disk full, cancellation)
    /// are rethrown after the running files and commits stop; other errors become `.failed` results.
    private func forEach(_ items: [FetchItem], fetcher: FileFetcher,
                         work: @escaping @Sendable (FileJob) async throws -> FileResult?) async throws -> FetchTally {
        let round = FetchRound(files: items.count) { [events, remote] path, result in
            events(.fileFinished(remote: remote, path: path, result: result))
        }
        let gate = OpenGate(lead: options.jobs, files: items.count)
        let workers = min(2 * options.jobs, items.count)
        await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0 ..< workers {
                round.enter()
                group.addTask {
                    // Once no file is being fetched, none can join the waiting group commit: the cache's commits
                    // stop waiting for more (`hurryPromotions`) until the round ends.
                    defer { if round.leave() { cache.hurryPromotions(true) } }
                    while let index = try round.take() {
                        defer { gate.pass(index) }
                        try Task.checkCancellation()
                        await gate.wait(index)
                        let file = items[index].file
                        switch try await fetchOne(file, id: items[index].id, fetcher: fetcher,
                                                  requested: { gate.pass(index) }, work: work) {
                        case .finished(let result): round.finished(file.path, result)
                        case .committing(let commit): round.commit(file.path, commit)
                        }
                    }
                }
            }
            while true {
                do {
                    guard try await group.next() != nil else { break }
                } catch {
                    round.stop(error)
                    group.cancelAll()
                    gate.openAll()
                }
            }
        }
        await round.settled()
        if workers > 0 { cache.hurryPromotions(false) }
        if let fatal = round.fatal { throw fatal }
        return round.tally
    }

    /// One file: open its entry (waiting for another writer without parking a thread), run `work`, then verify
    /// (refetching once after a hash mismatch) and hand back its commit.
    private func fetchOne(_ file: RemoteFile, id: Int64, fetcher: FileFetcher, requested: @escaping @Sendable () -> Void,
                          work: @Sendable (FileJob) async throws -> FileResult?) async throws -> Step {
        for attempt in 1 ... 2 {
            let writer: EntryWriter
            do {
                // Waiting for an entry another writer holds (a `serve` streaming it) counts as asking (``OpenGate``):
                // the files behind this one go ahead.
                writer = try await cache.openWriterWaiting(remote: remote, path: file.path, id: id, busy: requested)
            } catch let error as CacheError {
                if error.stopsRun { throw error }
                return .finished(.failed(message: error.message, exitCode: error.exitCode))
            }
            events(.fileStarted(remote: remote, path: file.path, size: file.size, missing: writer.missingRanges().byteCount))
            let job = FileJob(remote: remote, file: file, writer: writer, capabilities: provider.capabilities,
                              requested: requested)
            do {
                if let partial = try await work(job) {
                    // The kept part's checkpoint joins other files' (one journal commit) with the slot already free.
                    return .committing { done in
                        writer.flush { _ in
                            writer.close()
                            done(.success(partial))
                        }
                    }
                }
                try fetcher.verify(job)
            } catch {
                try? await writer.flush()
                writer.close()
                if let failure = Self.fileFailure(error, retryable: attempt == 1) {
                    return .finished(failure)
                }
                if (error as? CacheError)?.code == .hashMismatch {
                    logger.warning("\(file.path): \(String(describing: error)); fetching it once more")
                    continue
                }
                throw error
            }
            return .committing { done in
                writer.promote { outcome in
                    writer.close()
                    switch outcome {
                    case .success:
                        done(.success(.completed(fetched: job.fetched, verifiedWith: job.expectedHash?.kind)))
                    case .failure(let error):
                        if let failure = Self.fileFailure(error, retryable: false) { return done(.success(failure)) }
                        done(.failure(error))
                    }
                }
            }
        }
        return .finished(.failed(message: "\(file.path): hash mismatch twice", exitCode: .partialFailure))
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
