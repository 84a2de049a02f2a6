import CloudSyncCache
import CloudSyncCore
import Foundation

/// How one pull runs.
public struct SyncOptions: Sendable {
    /// Files downloaded at once.
    public var jobs: Int
    /// Bytes per ranged GET.
    public var chunkSize: Int64
    /// Concurrent ranged GETs ("segments") per file of at least `segmentThreshold` bytes; 1 = one per file.
    public var segments: Int
    /// Files this big or bigger are fetched in `segments` streams.
    public var segmentThreshold: Int64
    /// What a start set keeps (`pull.head_first`, `--head-first=SIZE`, `pull.head_seconds`): the configured
    /// policy; a pull whose heads do not fit the budget under it analyses under the shorter one it fits (``HeadFit``).
    public var heads: HeadPolicy
    /// What the cache may hold: every pull plans within it (heads of every track first, then whole tracks).
    public var budget: BudgetSettings
    /// Only files equal to or under these paths (relative to the remote's root, or prefixed with the remote's
    /// name; see ``PathSelection``); empty = everything.
    public var paths: [String]
    /// Which listed files this pull considers (the remote's configured filter, the command line's): a file must
    /// pass every one. They apply to the listing before the index, so an excluded file is neither indexed,
    /// fetched nor removed; a cached track that becomes excluded stays as it is.
    public var filters: [PathFilter]
    /// Remove cached tracks whose remote file is gone (default). false (`--no-delete`, `pull.delete = false`)
    /// keeps them, marked as deleted remotely in the index.
    public var delete = true
    /// Plan only: change nothing, fetch nothing.
    public var dryRun: Bool
    /// Wait for another run's pull lock instead of failing with `.locked`.
    public var waitForLock: Bool
    /// The order of work (`pull --order`); nil = the planner's priority.
    public var order: FetchOrder?
    /// Drop the cached bytes of the files `paths` selects before planning, so they are downloaded again
    /// (`pull --refetch PATH…`; ignored in a dry run, which changes nothing).
    public var refetch = false

    public init(jobs: Int = 4, chunkSize: Int64 = 8 << 20, segments: Int = 4, segmentThreshold: Int64 = 64 << 20,
                headBytes: Int64 = 512 << 10, headSeconds: Double = 10, budget: BudgetSettings? = nil,
                paths: [String] = [], filters: [PathFilter] = [], dryRun: Bool = false, waitForLock: Bool = false,
                order: FetchOrder? = nil) {
        self.jobs = max(1, jobs)
        self.chunkSize = max(64 << 10, chunkSize)
        self.segments = max(1, segments)
        self.segmentThreshold = max(1, segmentThreshold)
        heads = HeadPolicy(audioBytes: headBytes, seconds: headSeconds)
        self.budget = budget ?? BudgetSettings(heads: heads)
        self.paths = paths
        self.filters = filters.filter { !$0.isEmpty }
        self.dryRun = dryRun
        self.waitForLock = waitForLock
        self.order = order
    }

    /// The start sets of `remote` in `cache` computed under another policy than `heads`: the next pull derives
    /// them again.
    public static func staleStartSets(in cache: Cache, remote: String, heads: HeadPolicy) throws -> Int {
        try cache.startSetsOfOtherPolicies(remote: remote, policy: heads.key, legacy: StartSets.legacyPolicyKey).count
    }

    /// Whether `file` passes every filter (its modification time against `now`).
    public func keeps(_ file: RemoteFile, now: Date) -> Bool {
        filters.allSatisfy { $0.includes(file.path, size: file.size, modified: file.modified, now: now) }
    }

    /// What the stored change cursor is tied to: a cursor stored under other filters (or none) did not see the
    /// files these filters now let in, so it is not used. nil when no cursor may be stored at all: `min_age`
    /// lets files in as they age, which no change feed reports.
    var cursorScope: String? {
        if filters.isEmpty { return "" }
        if filters.contains(where: { $0.minAge != nil }) { return nil }
        var text = ""
        for filter in filters {
            text += "[\(filter.ignoreCase)|\(filter.minSize ?? -1)|\(filter.maxSize ?? -1)|\(filter.maxAge ?? -1)"
            for rule in filter.rules { text += (rule.include ? "|+" : "|-") + rule.pattern }
            text += "]"
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "filtered-" + String(hash, radix: 16) + ":"
    }
}

/// What a pull decided to do for one remote.
public struct SyncPlan: Sendable {
    public struct Item: Sendable {
        public var file: RemoteFile
        /// Bytes still to download.
        public var missingBytes: Int64
        /// The file was cached before in another version.
        public var changed: Bool
        /// The index did not know the file before this listing.
        public var firstSeen = false
        /// The index held another version of the file (recording the listing drops its cached bytes).
        public var versionChanged = false
        /// A dry run's plan fitted into the budget: only the start set is fetched (`missingBytes` is what it lacks,
        /// estimated where not analysed yet).
        public var headOnly = false
    }

    public var fetch: [Item] = []
    /// Paths of cached tracks whose remote files are gone.
    public var remove: [String] = []
    /// Cached files found at another path of the listing (moved or renamed on the server): their entries were
    /// (or, in a dry run, would be) given the new path, and kept their bytes. In path order of `to`.
    public var moved: [TrackMove] = []
    /// Files already complete and unchanged.
    public var upToDate: Int = 0
    /// A dry run's plan fitted into the budget: listed files not complete of which the pull fetches nothing (the
    /// budget keeps them out, or their head is all it keeps and that is cached).
    public var leftOut: Int = 0

    public var fetchBytes: Int64 { fetch.reduce(0) { $0.addingSaturating($1.missingBytes) } }
}

/// A cached file that the listing shows under another path (see `MovedFiles`).
public struct TrackMove: Sendable, Codable, Hashable {
    public var from: String
    public var to: String

    public init(from: String, to: String) {
        self.from = from
        self.to = to
    }
}

/// Progress of a pull, for the command layer to render. Delivered in order per file.
public enum SyncEvent: Sendable {
    case listing(remote: String)
    case listed(remote: String, files: Int, kind: ListingKind)
    case planned(remote: String, plan: SyncPlan)
    /// What this pull will really fetch once the plan is fitted into the cache's budget (a real pull only, sent
    /// once before the first download): `files` whole tracks, the heads only of `headsOnly` more, `bytes` in all
    /// (start sets not analysed yet are estimated). Progress totals come from here, not from `planned`.
    case scheduled(remote: String, files: Int, headsOnly: Int, bytes: Int64)
    case fileStarted(remote: String, path: String, size: Int64, missing: Int64)
    /// `bytes` more bytes of `path` arrived.
    case progress(remote: String, path: String, bytes: Int64)
    case fileFinished(remote: String, path: String, result: FileResult)
    case removed(remote: String, path: String, keptPinned: Bool)
    /// The cache against its budget once this remote's pull planned (and, unless a dry run, applied) it;
    /// `reduced` lists the tracks shrunk to their heads or evicted.
    case budget(remote: String, summary: BudgetSummary?, reduced: [ReductionReport.Item])
    case warning(remote: String, message: String)
}

/// How one file ended.
public enum FileResult: Sendable {
    /// Complete and verified in tracks/; `fetched` bytes were downloaded in this run.
    case completed(fetched: Int64, verifiedWith: HashKind?)
    /// Head-first pass done: the first bytes are cached.
    case headCached(fetched: Int64)
    /// `exitCode` says why: `.unavailable` for a remote that kept failing after retries, `.partialFailure` otherwise.
    case failed(message: String, exitCode: ExitCode)
}

/// The outcome of a pull for one remote; `--json` prints it.
public struct SyncReport: Sendable, Codable {
    public struct Failure: Sendable, Codable {
        public var path: String
        public var error: String
        /// Not printed in JSON: used to choose the process exit code.
        public var exitCode: ExitCode = .partialFailure

        enum CodingKeys: String, CodingKey { case path, error }
    }

    public var remote: String
    public var provider: String
    public var listed = 0
    /// Files the index did not know before this listing, or knew with no byte cached and this pull fetches (a
    /// track an earlier pull's budget left out, or one it did not reach, is not new again on every pull).
    public var new = 0
    /// Files partly cached before this pull (an interrupted download, a head kept under the budget) that it
    /// goes on to fetch; neither new nor changed.
    public var resumed = 0
    public var changed = 0
    public var deleted = 0
    /// Cached files found moved or renamed on the remote and renamed in the cache instead of fetched again.
    public var moved = 0
    public var fetchedFiles = 0
    public var fetchedBytes: Int64 = 0
    public var skipped = 0
    public var failed: [Failure] = []
    /// Folders (relative to the root, "" = the root) the provider could not read in this listing (403, malformed
    /// answer, over the size cap or the API deadline, too deep): their new tracks were not seen, their known ones
    /// are kept. Sorted.
    public var unreadableFolders: [String] = []
    /// PATH arguments that matched no file of this listing, each with the closest existing path.
    public var unmatchedPaths: [PathSelection.Unmatched] = []
    /// The error that stopped the whole remote (listing failed, lock held), if any. Not in JSON when nil.
    public var fatal: String?
    /// Bytes fetched for start sets (heads), included in `fetchedBytes`.
    public var headBytes: Int64 = 0
    /// Tracks whose start set became present in this run (and are not complete).
    public var headsCached = 0
    /// What the cache holds after the pull, over every remote that shares it (nil for a run that did not plan).
    public var budget: BudgetSummary?
    /// A dry run's plan (nil for a real pull).
    public var plan: DryRunPlan?

    enum CodingKeys: String, CodingKey {
        case remote, provider, listed, new, resumed, changed, deleted, moved, skipped, failed, fatal, budget, plan
        case fetchedFiles = "fetched_files"
        case fetchedBytes = "fetched_bytes"
        case headBytes = "head_bytes"
        case headsCached = "heads_cached"
        case unreadableFolders = "unreadable_folders"
        case unmatchedPaths = "unmatched_paths"
    }

    public init(remote: String, provider: String) {
        self.remote = remote
        self.provider = provider
    }

    /// 0 when nothing failed; 5 when every file failed because the remote stayed unavailable; else 1 (a file
    /// failed, or a folder could not be read, so its new tracks were not fetched).
    public var exitCode: ExitCode {
        if failed.isEmpty { return unreadableFolders.isEmpty ? .ok : .partialFailure }
        if fetchedFiles == 0, failed.allSatisfy({ $0.exitCode == .unavailable }) { return .unavailable }
        return .partialFailure
    }
}

/// The cache against its budget after a plan was applied (or, in a dry run, would be): over every remote.
public struct BudgetSummary: Sendable, Codable, Hashable {
    /// Bytes the cache may hold.
    public var budget: Int64
    /// Bytes the cache holds once the plan is reached.
    public var plannedBytes: Int64
    /// Bytes the whole library would need complete.
    public var libraryBytes: Int64
    public var complete: Int
    public var headOnly: Int
    /// Tracks with no byte kept (their heads did not fit).
    public var none: Int
    /// The budget every track's head needs (``CachePlan/headsBytes``; estimated where not analysed yet).
    public var headsBytes: Int64 = 0
    /// The policy the heads are kept under (``CachePlan/heads``).
    public var heads: HeadsUsed
    /// When the heads were shortened to fit (`pull.shorten_heads`): the budget the configured heads would need.
    public var fullHeadsBytes: Int64?
    /// Tracks reduced to make room (or to respect a lowered budget), and the bytes that left the disk.
    public var reduced: Int
    public var freedBytes: Int64
    public var pinnedOverBudget: Bool
    /// The budget is below `cache.max_size` because the disk must keep `cache.min_free` free.
    public var limitedByDisk: Bool = false

    enum CodingKeys: String, CodingKey {
        case budget, complete, none, reduced
        case limitedByDisk = "limited_by_disk"
        case plannedBytes = "planned_bytes"
        case libraryBytes = "library_bytes"
        case headOnly = "head_only"
        case headsBytes = "heads_bytes"
        case heads
        case fullHeadsBytes = "full_heads_bytes"
        case freedBytes = "freed_bytes"
        case pinnedOverBudget = "pinned_over_budget"
    }

    /// Every key, `full_heads_bytes` as null when the heads were not shortened: the shape does not vary.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(budget, forKey: .budget)
        try c.encode(plannedBytes, forKey: .plannedBytes)
        try c.encode(libraryBytes, forKey: .libraryBytes)
        try c.encode(complete, forKey: .complete)
        try c.encode(headOnly, forKey: .headOnly)
        try c.encode(none, forKey: .none)
        try c.encode(headsBytes, forKey: .headsBytes)
        try c.encode(heads, forKey: .heads)
        try c.encode(fullHeadsBytes, forKey: .fullHeadsBytes)
        try c.encode(reduced, forKey: .reduced)
        try c.encode(freedBytes, forKey: .freedBytes)
        try c.encode(pinnedOverBudget, forKey: .pinnedOverBudget)
        try c.encode(limitedByDisk, forKey: .limitedByDisk)
    }

    public init(_ plan: CachePlan, reduction: ReductionReport?) {
        budget = plan.budget
        plannedBytes = plan.plannedBytes
        libraryBytes = plan.libraryBytes
        complete = plan.completeCount
        headOnly = plan.headOnlyCount
        none = plan.noneCount
        headsBytes = plan.headsBytes
        heads = HeadsUsed(plan.heads)
        fullHeadsBytes = plan.fullHeadsBytes
        reduced = reduction?.items.count ?? 0
        freedBytes = reduction?.freedBytes ?? 0
        pinnedOverBudget = plan.pinnedOverBudget
    }

    /// The library is bigger than what the cache may hold.
    public var libraryExceedsBudget: Bool { libraryBytes > budget }

    /// A ``HeadPolicy`` in JSON: `{"first": bytes, "seconds": s, "tail": bytes}`.
    public struct HeadsUsed: Sendable, Codable, Hashable {
        public var first: Int64
        public var seconds: Double
        public var tail: Int64

        public init(_ policy: HeadPolicy) {
            first = policy.audioBytes
            seconds = policy.seconds
            tail = policy.tailBytes
        }

        public var policy: HeadPolicy { HeadPolicy(audioBytes: first, seconds: seconds, tailBytes: tail) }
    }
}

/// What `pull --dry-run` would do for one remote: `--json` prints it.
public struct DryRunPlan: Sendable, Codable, Hashable {
    public struct Fetch: Sendable, Codable, Hashable {
        public var path: String
        /// The file's size, and the bytes still to download.
        public var size: Int64
        public var bytes: Int64
        /// Cached before in another version.
        public var changed: Bool
        /// Only the start set would be fetched (the budget keeps the rest out); `bytes` is what it lacks.
        public var head: Bool
    }

    /// A cached track the budget would shrink to its head (`action` "head") or evict ("evicted"); any remote.
    public struct Reduce: Sendable, Codable, Hashable {
        public var remote: String
        public var path: String
        public var action: String
        /// Bytes that would leave the disk.
        public var bytes: Int64
    }

    public var fetch: [Fetch]
    /// Cached tracks whose remote files are gone.
    public var remove: [String]
    /// Cached tracks that would take their new path on the remote instead of being fetched again.
    public var move: [TrackMove]
    public var reduce: [Reduce]
    public var upToDate: Int
    /// Listed files not complete of which nothing would be fetched: the budget keeps them out (or keeps only their
    /// head, which is cached).
    public var leftOut: Int

    enum CodingKeys: String, CodingKey {
        case fetch, remove, move, reduce
        case upToDate = "up_to_date"
        case leftOut = "left_out"
        case fetchBytes = "fetch_bytes"
        case removeCount = "remove_count"
        case fetchCount = "fetch_count"
        case moveCount = "move_count"
    }

    /// Bytes to download in all.
    public var fetchBytes: Int64 { fetch.reduce(0) { $0.addingSaturating($1.bytes) } }

    public init(_ plan: SyncPlan, reduced: [ReductionReport.Item]) {
        fetch = plan.fetch.map { Fetch(path: $0.file.path, size: $0.file.size, bytes: $0.missingBytes, changed: $0.changed,
                                       head: $0.headOnly) }
        remove = plan.remove
        move = plan.moved
        reduce = reduced.map { Reduce(remote: $0.remote, path: $0.path, action: $0.action, bytes: $0.bytes) }
        upToDate = plan.upToDate
        leftOut = plan.leftOut
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        fetch = try c.decode([Fetch].self, forKey: .fetch)
        remove = try c.decode([String].self, forKey: .remove)
        move = try c.decodeIfPresent([TrackMove].self, forKey: .move) ?? []
        reduce = try c.decode([Reduce].self, forKey: .reduce)
        upToDate = try c.decode(Int.self, forKey: .upToDate)
        leftOut = try c.decodeIfPresent(Int.self, forKey: .leftOut) ?? 0
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(fetch, forKey: .fetch)
        try c.encode(remove, forKey: .remove)
        try c.encode(move, forKey: .move)
        try c.encode(reduce, forKey: .reduce)
        try c.encode(upToDate, forKey: .upToDate)
        try c.encode(leftOut, forKey: .leftOut)
        try c.encode(fetchBytes, forKey: .fetchBytes)
        try c.encode(fetch.count, forKey: .fetchCount)
        try c.encode(remove.count, forKey: .removeCount)
        try c.encode(move.count, forKey: .moveCount)
    }
}
