import CloudSyncCache
import CloudSyncCore
import Foundation

/// The limits a plan is made within.
public struct BudgetSettings: Sendable {
    /// `cache.max_size`.
    public var maxSize: Int64
    /// `cache.min_free`: the filesystem keeps at least this much free; the budget shrinks to respect it.
    public var minFree: Int64
    /// `cache.max_age`: tracks neither played, read through serve nor added for this long keep only their heads.
    public var maxAge: TimeInterval?
    /// Start-set bytes of a track that has not been analysed yet (its size, name and MIME type are known).
    public var estimate: @Sendable (_ size: Int64, _ path: String, _ mimeType: String?) -> Int64

    public init(maxSize: Int64 = 10 << 30, minFree: Int64 = 1 << 30, maxAge: TimeInterval? = nil,
                estimate: @escaping @Sendable (Int64, String, String?) -> Int64) {
        self.maxSize = max(0, maxSize)
        self.minFree = max(0, minFree)
        self.maxAge = maxAge
        self.estimate = estimate
    }
}

/// What bringing the cache down to a plan did (or, in a dry run, would do).
public struct ReductionReport: Sendable {
    public struct Item: Sendable, Hashable {
        public var remote: String
        public var path: String
        /// Bytes that leave (or would leave) the disk.
        public var bytes: Int64
        /// `"head"`: shrunk to its start set; `"evicted"`: nothing kept.
        public var action: String
    }

    public var items: [Item] = []
    /// Entries another process was writing: left as they are.
    public var busy: [String] = []
    /// Complete tracks whose start set is not known yet: they are analysed (from the local file) before shrinking.
    public var needsAnalysis: [Int64] = []

    public var freedBytes: Int64 { items.reduce(0) { $0.addingSaturating($1.bytes) } }
}

/// Plans the whole cache (every remote that shares it) within its budget and brings it down to the plan:
/// the one place that decides what is kept. Used by `pull` before, between and after its fetch passes, and by
/// `cache evict`.
public struct CacheBudget: Sendable {
    public let cache: Cache
    public let settings: BudgetSettings
    let logger: Logger

    public init(cache: Cache, settings: BudgetSettings, logger: Logger = .silent) {
        self.cache = cache
        self.settings = settings
        self.logger = logger
    }

    /// A plan over the index. `removing` (remote, path) pairs are left out (remote deletions about to be
    /// removed); `extra` tracks are added (a dry run's files that are not indexed yet).
    public func plan(removing: Set<RemotePath> = [], extra: [PlanningTrack] = [], now: Date = Date())
        throws(CacheError) -> (CachePlan, [PlanningTrack]) {
        let rows = try cache.planningRows()
        var tracks: [PlanningTrack] = []
        tracks.reserveCapacity(rows.count + extra.count)
        var held: Int64 = 0
        let ageLimit = settings.maxAge.map { now.timeIntervalSince1970 - $0 }
        for row in rows where !removing.contains(RemotePath(remote: row.remote, path: row.path)) {
            let track = PlanningTrack(
                id: row.id, remote: row.remote, path: row.path, size: row.size, pinned: row.pinned,
                complete: row.state == .complete, partialBytes: row.partialBytes, outdatedBytes: row.outdatedBytes,
                startBytes: row.startBytes ?? settings.estimate(row.size, row.path, row.mimeType),
                startSetKnown: row.startBytes != nil, headPresent: row.headPresent, lastPlayed: row.lastPlayed,
                added: row.added, modified: row.modified,
                mayComplete: ageLimit.map { max(row.lastPlayed, row.lastAccess, row.added) >= $0 } ?? true)
            held = held.addingSaturating(track.heldBytes)
            tracks.append(track)
        }
        for row in rows where removing.contains(RemotePath(remote: row.remote, path: row.path)) {
            held = held.addingSaturating(row.state == .complete ? row.size : row.partialBytes.addingSaturating(row.outdatedBytes))
        }
        tracks += extra
        return (Planner.plan(tracks, budget: try budget(held: held)), tracks)
    }

    /// `cache.max_size`, lowered so the filesystem keeps `cache.min_free` free: what the cache holds now plus
    /// what is free beyond the floor. The floor is at least ``bookkeepingReserve``, also with `min_free = 0`.
    public func budget(held: Int64? = nil) throws(CacheError) -> Int64 {
        let current: Int64
        if let held { current = held } else { current = try cache.heldBytes() }
        let room = current.addingSaturating(try cache.freeDiskBytes()).addingSaturating(-freeFloor)
        return max(0, min(settings.maxSize, room))
    }

    /// What the budget keeps free on the cache's filesystem: `cache.min_free`, at least ``bookkeepingReserve``.
    public var freeFloor: Int64 { max(settings.minFree, Self.bookkeepingReserve) }

    /// Room the cache needs beyond the bytes it budgets, kept free whatever `cache.min_free` says: the index's
    /// write-ahead log grows with each commit until SQLite's checkpoint at 1,000 pages (4 MiB) lets it start over,
    /// and new folders and files' last blocks take whole blocks. A budget of every free byte filled the disk with
    /// a pull's tracks and then failed their group commits (SQLITE_FULL): files fetched, none promoted, and the
    /// next pull the same.
    static let bookkeepingReserve: Int64 = 16 << 20

    /// Brings every track above its target down to it, lowest priority first: complete tracks and partials
    /// beyond their heads shrink to their start sets, tracks without a place lose every byte, older versions
    /// of tracks that will not complete go. Entries being written by another process are skipped. Complete
    /// tracks without a known start set are listed in `needsAnalysis` (and kept) — the caller analyses them
    /// from the local file and reduces again.
    public func reduce(to plan: CachePlan, tracks: [PlanningTrack], dryRun: Bool = false) throws(CacheError) -> ReductionReport {
        var report = ReductionReport()
        // Indexes into `tracks` by id (a dictionary of the tracks themselves took 34 MiB at 100,000).
        let byID = Dictionary(tracks.indices.map { (tracks[$0].id, $0) }, uniquingKeysWith: { a, _ in a })
        for id in plan.order.reversed() {
            guard let index = byID[id] else { continue }
            let track = tracks[index]
            guard track.id >= 0 else { continue }
            let target = plan.target(id)
            switch target {
            case .complete:
                continue
            case .head:
                let extra = track.complete ? track.size - track.startBytes
                    : track.outdatedBytes.addingSaturating(track.headPresent ? max(0, track.partialBytes - track.startBytes) : 0)
                guard extra > 0 else { continue }
                if track.complete && !track.startSetKnown {
                    report.needsAnalysis.append(id)
                    continue
                }
                if !track.complete && !track.headPresent {
                    // Only an older version to drop; the partial is on its way to its head.
                    guard track.outdatedBytes > 0 else { continue }
                }
                try apply(dryRun ? .done(freed: extra) : cache.shrinkToHead(id: id), track, action: "head", into: &report)
            case .none:
                guard track.heldBytes > 0 else { continue }
                try apply(dryRun ? .done(freed: track.heldBytes) : cache.evictEntry(id: id), track, action: "evicted",
                          into: &report)
            }
        }
        if !dryRun, !report.items.isEmpty {
            // Debug only: the commands print every reduced track once (pull's "evicted" lines, cache evict's).
            logger.debug("budget: \(report.items.count) track(s) reduced, \(ByteSize.format(report.freedBytes)) freed")
        }
        return report
    }

    private func apply(_ outcome: ReductionOutcome, _ track: PlanningTrack, action: String,
                       into report: inout ReductionReport) throws(CacheError) {
        switch outcome {
        case .done(let freed):
            report.items.append(.init(remote: track.remote, path: track.path, bytes: freed, action: action))
        case .busy:
            report.busy.append("\(track.remote):\(track.path)")
        case .noHead:
            // The head is not all there (or unknown): nothing can be kept but everything — or nothing.
            if action == "head" { report.needsAnalysis.append(track.id) }
        case .unchanged:
            break
        }
    }
}

/// A track's identity across remotes.
public struct RemotePath: Sendable, Hashable {
    public var remote: String
    public var path: String

    public init(remote: String, path: String) {
        self.remote = remote
        self.path = path
    }
}
