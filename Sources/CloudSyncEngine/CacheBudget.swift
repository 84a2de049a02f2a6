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
    /// What a head keeps (`pull.head_first`, `pull.head_seconds`).
    public var heads: HeadPolicy
    /// `pull.shorten_heads`: when the heads of the library do not all fit the budget under `heads`, plan them under
    /// the first shorter policy of its ladder they fit (``HeadFit``), so every track keeps one.
    public var shortenHeads: Bool

    public init(maxSize: Int64 = 10 << 30, minFree: Int64 = 1 << 30, maxAge: TimeInterval? = nil,
                heads: HeadPolicy = .standard, shortenHeads: Bool = true) {
        self.maxSize = max(0, maxSize)
        self.minFree = max(0, minFree)
        self.maxAge = maxAge
        self.heads = heads
        self.shortenHeads = shortenHeads
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
        /// Whether the track was complete: false for a head shrunk back to its start set, whose extra bytes were
        /// fetched with it (the first request of a head covers its metadata too, up to 64 KiB more than a small
        /// tag needs) — not worth a line of a pull's output per track.
        public var wasComplete: Bool = true
    }

    public var items: [Item] = []
    /// Entries another process was writing: left as they are.
    public var busy: [String] = []
    /// Complete tracks whose start set is not known yet: they are analysed (from the local file) before shrinking.
    public var needsAnalysis: [Int64] = []

    public var freedBytes: Int64 { items.reduce(0) { $0.addingSaturating($1.bytes) } }
}

/// Plans the whole cache (every remote that shares it) within its budget and brings it down to the plan:
/// the one place that decides what is kept. Used by `pull` before, between and after its fetch passes, by `serve`
/// (``ServeBudgetKeeper``) and by `cache evict`.
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
    /// removed); `extra` tracks are added (a dry run's files that are not indexed yet; their start bytes are
    /// estimated again under the policy chosen). The heads are planned under the policy ``HeadFit`` chooses from
    /// the ladder of `settings.heads` (``CachePlan/heads``), or under `heads` when given (a pull keeps the policy
    /// it chose): a start set recorded under another policy counts at what it would be under that one.
    public func plan(removing: Set<RemotePath> = [], extra: [PlanningTrack] = [], heads given: HeadPolicy? = nil,
                     now: Date = Date()) throws(CacheError) -> (CachePlan, [PlanningTrack]) {
        var rows = try cache.planningRows()
        var held: Int64 = 0
        if !removing.isEmpty {
            for row in rows where removing.contains(RemotePath(remote: row.remote, path: row.path)) {
                held = held.addingSaturating(row.state == .complete ? row.size : row.partialBytes.addingSaturating(row.outdatedBytes))
            }
            rows.removeAll { removing.contains(RemotePath(remote: $0.remote, path: $0.path)) }
        }
        for row in rows {
            held = held.addingSaturating(row.state == .complete ? row.size : row.partialBytes.addingSaturating(row.outdatedBytes))
        }
        let budget = try budget(held: held)
        let fit = HeadEstimates(rows: rows, extra: extra, configured: settings.heads)
        // Each policy's start bytes are computed once (an estimate per track not analysed yet).
        var computed: [HeadPolicy: [Int64]] = [:]
        func starts(_ policy: HeadPolicy) -> [Int64] {
            if let known = computed[policy] { return known }
            let values = fit.startBytes(under: policy)
            computed[policy] = values
            return values
        }
        let heads: HeadPolicy
        if let given {
            heads = given
        } else if settings.shortenHeads {
            let ladder = settings.heads.ladder
            heads = ladder[HeadFit.choose(ladder, budget: budget, current: fit.currentStep(of: ladder)) { fit.headsBytes(starts($0)) }.index]
        } else {
            heads = settings.heads
        }
        let chosen = starts(heads)

        var tracks: [PlanningTrack] = []
        tracks.reserveCapacity(rows.count + extra.count)
        let ageLimit = settings.maxAge.map { now.timeIntervalSince1970 - $0 }
        for (index, row) in rows.enumerated() {
            tracks.append(PlanningTrack(
                id: row.id, remote: row.remote, path: row.path, size: row.size, pinned: row.pinned,
                complete: row.state == .complete, partialBytes: row.partialBytes, outdatedBytes: row.outdatedBytes,
                startBytes: chosen[index], startSetKnown: row.startBytes != nil, headPresent: row.headPresent,
                lastPlayed: row.lastPlayed, added: row.added, modified: row.modified,
                mayComplete: ageLimit.map { max(row.lastPlayed, row.lastAccess, row.added) >= $0 } ?? true))
        }
        for (index, var track) in extra.enumerated() {
            track.startBytes = chosen[rows.count + index]
            tracks.append(track)
        }
        var plan = Planner.plan(tracks, budget: budget)
        plan.heads = heads
        if heads != settings.heads { plan.fullHeadsBytes = fit.headsBytes(starts(settings.heads)) }
        return (plan, tracks)
    }

    /// The head policy to keep the cache under now: the configured one, or (`shortenHeads`) the first shorter step
    /// of its ladder the library's heads fit (``HeadFit``, the choice ``plan(removing:extra:heads:now:)`` makes).
    /// The start sets of every remote recorded under another policy are derived again under it from the cached
    /// bytes (the remotes share the budget, so a plan counting them shorter must find them shorter); when that
    /// changed any, the choice is made again over the exact figures, until it holds (at most once per step).
    /// Entries another process is writing keep theirs until a later call.
    public func fitHeads(removing: Set<RemotePath> = []) throws -> HeadPolicy {
        var (plan, _) = try plan(removing: removing)
        for attempt in 0... {
            // Said when the cached start sets change to shorter heads (a pull's summary says it every time).
            let changed = try StartSets.rederiveAll(cache: cache, heads: plan.heads, logger: logger,
                                                    reason: plan.heads == settings.heads ? nil
                                                        : shortening(plan, because: "the heads of the library do not all fit the budget"))
            guard settings.shortenHeads, changed.derived + changed.forgotten > 0, attempt < settings.heads.ladder.count else { break }
            let (again, _) = try self.plan(removing: removing)
            if again.heads == plan.heads { break }
            plan = again
        }
        return plan.heads
    }

    /// What is said when the heads are shortened to `plan.heads` (the plan that chose them).
    func shortening(_ plan: CachePlan, because reason: String) -> String {
        "\(reason) (\(ByteSize.format(plan.budget))) with \(settings.heads); shortening them to \(plan.heads) so that every "
            + "track keeps one" + (plan.fullHeadsBytes.map { " (a budget of about \(ByteSize.format(HeadFit.budgetKeeping($0))) keeps the longer ones)" } ?? "")
    }

    /// `cache.max_size`, lowered so the filesystem keeps `cache.min_free` free: what the cache holds now plus
    /// what is free beyond the floor. The floor is at least ``bookkeepingReserve``, also with `min_free = 0`.
    public func budget(held: Int64? = nil) throws(CacheError) -> Int64 {
        let current: Int64
        if let held { current = held } else { current = try cache.heldBytes() }
        let room = current.addingSaturating(try cache.freeDiskBytes()).addingSaturating(-freeFloor)
        return max(0, min(settings.maxSize, room))
    }

    /// What to say when the disk, not `cache.max_size`, sets `budget`; nil when it does not.
    public func diskLimit(_ budget: Int64) -> String? {
        guard budget < settings.maxSize else { return nil }
        let minFree = ByteSize.format(settings.minFree)
        let kept = freeFloor > settings.minFree
            ? "\(ByteSize.format(freeFloor)) stays free for the cache's index (cache.min_free is \(minFree)); free some space"
            : "cache.min_free (\(minFree)) stays free; free some space or lower cache.min_free"
        return "the disk of the cache is nearly full: the budget is \(ByteSize.format(budget)) "
            + "instead of cache.max_size (\(ByteSize.format(settings.maxSize))) so that \(kept)"
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
    public func reduce(to plan: CachePlan, tracks: [PlanningTrack], dryRun: Bool = false,
                       sparing: Set<RemotePath> = []) throws(CacheError) -> ReductionReport {
        var report = ReductionReport()
        // Indexes into `tracks` by id (a dictionary of the tracks themselves took 34 MiB at 100,000).
        let byID = Dictionary(tracks.indices.map { (tracks[$0].id, $0) }, uniquingKeysWith: { a, _ in a })
        for id in plan.order.reversed() {
            guard let index = byID[id] else { continue }
            let track = tracks[index]
            guard track.id >= 0 else { continue }
            if !sparing.isEmpty, sparing.contains(RemotePath(remote: track.remote, path: track.path)) { continue }
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

    /// Reduces the cache to `plan` (over `tracks`, planned leaving out `removing`); complete tracks whose start set
    /// is not known are analysed from their local files first, then the cache is planned and reduced again.
    public func reduceAnalysing(_ plan: CachePlan, tracks: [PlanningTrack], removing: Set<RemotePath> = [],
                                heads: HeadPolicy, sparing: Set<RemotePath> = []) throws -> ReductionReport {
        var report = try reduce(to: plan, tracks: tracks, sparing: sparing)
        guard !report.needsAnalysis.isEmpty else { return report }
        let ids = Set(report.needsAnalysis)
        var analysed = 0
        for track in tracks where ids.contains(track.id) {
            do {
                let writer = try cache.openWriter(remote: track.remote, path: track.path, wait: false)
                defer { writer.close() }
                try StartSets.analyseLocally(writer, heads: heads)
                analysed += 1
            } catch {
                logger.info("\(track.remote):\(track.path): could not analyse its start set (\(error)); left as it is")
            }
        }
        guard analysed > 0 else { return report }
        let (again, tracksAgain) = try self.plan(removing: removing, heads: heads)
        let second = try reduce(to: again, tracks: tracksAgain, sparing: sparing)
        report.items += second.items
        report.busy += second.busy
        report.needsAnalysis = second.needsAnalysis
        return report
    }

    /// Brings the cache down to its plan when it holds more than its budget (`cache.max_size`, lowered by
    /// `cache.min_free`): what `serve` calls after it fetched bytes, so a library played between pulls (or never
    /// pulled) does not grow the cache past them. Played tracks rank first, as in a pull's plan; entries being
    /// written (a track serve or a pull is fetching) and the `sparing` ones (tracks a player has open) are left
    /// for a later call. nil when within the budget.
    public func keepWithin(sparing: Set<RemotePath> = []) throws -> ReductionReport? {
        let held = try cache.heldBytes()
        guard held > (try budget(held: held)) else { return nil }
        let (plan, tracks) = try plan()
        return try reduceAnalysing(plan, tracks: tracks, heads: plan.heads, sparing: sparing)
    }

    private func apply(_ outcome: ReductionOutcome, _ track: PlanningTrack, action: String,
                       into report: inout ReductionReport) throws(CacheError) {
        switch outcome {
        case .done(let freed):
            report.items.append(.init(remote: track.remote, path: track.path, bytes: freed, action: action, wasComplete: track.complete))
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

/// The start bytes of planned tracks under any head policy: recorded where the start set was computed under it,
/// else estimated from the recorded one (``HeadPolicy/estimate(size:path:mimeType:known:recorded:duration:)``) or,
/// not analysed yet, from the format.
struct HeadEstimates {
    let rows: [PlanningRow]
    /// Tracks not indexed yet, their start bytes estimated under `configured`.
    let extra: [PlanningTrack]
    let configured: HeadPolicy
    /// Each recorded key's policy (a handful of distinct keys over the whole index).
    private let recorded: [String: HeadPolicy]

    init(rows: [PlanningRow], extra: [PlanningTrack], configured: HeadPolicy) {
        self.rows = rows
        self.extra = extra
        self.configured = configured
        var recorded: [String: HeadPolicy] = [:]
        for row in rows where row.startBytes != nil {
            let key = row.startPolicy ?? StartSets.legacyPolicyKey
            if recorded[key] == nil, let policy = HeadPolicy(key: key) { recorded[key] = policy }
        }
        self.recorded = recorded
    }

    func startBytes(_ row: PlanningRow, under policy: HeadPolicy) -> Int64 {
        guard let known = row.startBytes, let then = recorded[row.startPolicy ?? StartSets.legacyPolicyKey] else {
            return policy.estimate(size: row.size, path: row.path, mimeType: row.mimeType)
        }
        return policy.estimate(size: row.size, path: row.path, mimeType: row.mimeType, known: known, recorded: then,
                               duration: row.duration)
    }

    /// Every track's start bytes under `policy`: `rows` then `extra`, in their order.
    func startBytes(under policy: HeadPolicy) -> [Int64] {
        var values: [Int64] = []
        values.reserveCapacity(rows.count + extra.count)
        for row in rows { values.append(startBytes(row, under: policy)) }
        for track in extra { values.append(startBytes(track, under: policy)) }
        return values
    }

    /// The budget every head needs given each track's start bytes (``startBytes(under:)``): pinned tracks whole.
    func headsBytes(_ starts: [Int64]) -> Int64 {
        var sum: Int64 = 0
        for (index, row) in rows.enumerated() { sum = sum.addingSaturating(row.pinned ? row.size : starts[index]) }
        for (index, track) in extra.enumerated() { sum = sum.addingSaturating(track.pinned ? track.size : starts[rows.count + index]) }
        return sum
    }

    /// The budget every head needs under `policy`.
    func headsBytes(under policy: HeadPolicy) -> Int64 { headsBytes(startBytes(under: policy)) }

    func startBytes(_ track: PlanningTrack, under policy: HeadPolicy) -> Int64 {
        track.startSetKnown || policy == configured ? track.startBytes
            : min(track.size, policy.estimate(size: track.size, path: track.path, mimeType: nil))
    }

    /// The step of `ladder` most recorded start sets were computed under; nil when none was.
    func currentStep(of ladder: [HeadPolicy]) -> Int? {
        var counts = [Int](repeating: 0, count: ladder.count)
        let steps = Dictionary(ladder.enumerated().map { ($1.key, $0) }, uniquingKeysWith: { a, _ in a })
        for row in rows where row.startBytes != nil {
            if let step = steps[row.startPolicy ?? StartSets.legacyPolicyKey] { counts[step] += 1 }
        }
        guard let most = counts.max(), most > 0 else { return nil }
        return counts.firstIndex(of: most)
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
