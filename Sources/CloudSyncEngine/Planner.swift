import CloudSyncCore
import Foundation

/// One track as the budget planner sees it: what it costs and how much of it the cache holds now.
public struct PlanningTrack: Sendable, Hashable {
    public var id: Int64
    public var remote: String
    public var path: String
    public var size: Int64
    public var pinned: Bool
    /// The current version is complete in `tracks/`.
    public var complete: Bool
    /// Bytes of the current version present in its partial file (0 when complete).
    public var partialBytes: Int64
    /// Bytes of an older version's track still in `tracks/` (0 when none).
    public var outdatedBytes: Int64
    /// Bytes of the start set (what a player needs to start the track); an estimate when `startSetKnown` is false.
    public var startBytes: Int64
    public var startSetKnown: Bool
    /// The start set is known and present (true when complete).
    public var headPresent: Bool
    /// Seconds since 1970 of the last play through `serve`; 0 when never played.
    public var lastPlayed: Double
    /// Seconds since 1970 when this version was first listed.
    public var added: Double
    /// The remote's modification time, seconds since 1970.
    public var modified: Double
    /// Whether the track may be kept complete (false when unused for longer than `cache.max_age`). Pinned tracks
    /// are always kept complete.
    public var mayComplete: Bool

    public init(id: Int64, remote: String, path: String, size: Int64, pinned: Bool = false, complete: Bool = false,
                partialBytes: Int64 = 0, outdatedBytes: Int64 = 0, startBytes: Int64, startSetKnown: Bool = true,
                headPresent: Bool = false, lastPlayed: Double = 0, added: Double = 0, modified: Double = 0,
                mayComplete: Bool = true) {
        self.id = id
        self.remote = remote
        self.path = path
        self.size = max(0, size)
        self.pinned = pinned
        self.complete = complete
        self.partialBytes = max(0, partialBytes)
        self.outdatedBytes = max(0, outdatedBytes)
        self.startBytes = min(self.size, max(0, startBytes))
        self.startSetKnown = startSetKnown
        self.headPresent = headPresent || complete
        self.lastPlayed = lastPlayed
        self.added = added
        self.modified = modified
        self.mayComplete = mayComplete
    }

    /// Bytes on disk for this track now: the complete track, or the partial's bytes plus an older version.
    public var heldBytes: Int64 { complete ? size : Planner.sum(partialBytes, outdatedBytes) }

    /// A track no bigger than its start set is whole once its head is.
    var headIsWhole: Bool { startBytes >= size }
}

/// What the cache should hold of one track after a pull.
public enum TrackTarget: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Nothing: the heads of the library do not all fit, and this one is past the budget.
    case none
    /// The start set only.
    case head
    /// The whole track.
    case complete

    public static func < (a: TrackTarget, b: TrackTarget) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .none: "none"
        case .head: "head"
        case .complete: "complete"
        }
    }
}

/// The planner's answer: a target per track, and what the cache holds once the targets are reached.
public struct CachePlan: Sendable {
    /// Bytes the cache may hold (`cache.max_size`, lowered to what the disk has above `cache.min_free`).
    public var budget: Int64
    /// The target of every planned track, by id.
    public var targets: [Int64: TrackTarget]
    /// Track ids in priority order, highest first (pinned tracks first).
    public var order: [Int64]
    /// Bytes held once every target is reached.
    public var plannedBytes: Int64
    /// Bytes the whole library would need complete.
    public var libraryBytes: Int64
    /// Pinned tracks alone exceed the budget (they are kept complete all the same).
    public var pinnedOverBudget: Bool
    /// Every track's head fits (else some tracks get no head, in reverse priority order).
    public var allHeadsFit: Bool
    /// The budget every track's head needs (pinned tracks complete): what `cache.max_size` must reach for every
    /// track to start at once. Start sets not analysed yet count at their estimate (about twice the real size).
    public var headsBytes: Int64 = 0
    /// The policy the heads are planned under: `pull.head_first`/`head_seconds`, or the shorter step of its ladder
    /// the heads fit (``HeadFit``).
    public var heads: HeadPolicy = .standard
    /// When `heads` is shorter than configured: the budget every head needs under the configured policy.
    public var fullHeadsBytes: Int64?

    public func target(_ id: Int64) -> TrackTarget { targets[id] ?? .none }

    public var completeCount: Int { targets.values.count { $0 == .complete } }
    public var headOnlyCount: Int { targets.values.count { $0 == .head } }
    public var noneCount: Int { targets.values.count { $0 == .none } }
}

/// Decides, before any byte is fetched, what the cache holds within its budget. Pure: no disk, no network.
///
/// The order (docs/cache.md, "Budget"):
/// 1. pinned tracks, complete (even beyond the budget, which `pinnedOverBudget` then reports);
/// 2. the head (start set) of every other track, in priority order — when the heads do not all fit, the
///    highest-priority prefix that fits gets heads and the rest none, and no track beyond its head is kept
///    complete (except tracks no bigger than their head);
/// 3. complete tracks in priority order while they fit: the longest prefix of the order whose tails fit. A
///    track that may not complete (`mayComplete` false) is skipped, not a stop.
///
/// Priority: most recently played through `serve` first, then most recently added (by day), then the remote's
/// newest modification time, then remote and path. Contracts, checked by property tests: a plan never holds
/// more than the budget (pinned tracks aside); pinned tracks are always complete; more budget never means fewer
/// complete tracks; planning again over the state a plan produces gives the same targets (no work).
public enum Planner {
    public static func plan(_ tracks: [PlanningTrack], budget: Int64) -> CachePlan {
        let budget = max(0, budget)
        let ordered = tracks.sorted(by: higherPriority)
        var targets: [Int64: TrackTarget] = [:]
        targets.reserveCapacity(ordered.count)
        var used: Int64 = 0
        var library: Int64 = 0
        for track in ordered { library = sum(library, track.size) }

        // 1. Pinned tracks, complete.
        for track in ordered where track.pinned {
            targets[track.id] = .complete
            used = sum(used, track.size)
        }
        let pinnedOverBudget = used > budget

        // 2. Heads, in priority order, until the first that does not fit.
        var allHeadsFit = true
        var headed: [PlanningTrack] = []
        headed.reserveCapacity(ordered.count)
        var heads = used
        for track in ordered where !track.pinned {
            heads = sum(heads, track.startBytes)
            if allHeadsFit, sum(used, track.startBytes) <= budget {
                used = sum(used, track.startBytes)
                targets[track.id] = track.headIsWhole ? .complete : .head
                headed.append(track)
            } else {
                allHeadsFit = false
                targets[track.id] = TrackTarget.none
            }
        }

        // 3. Tails, in priority order, while they fit — only once every head has its place.
        if allHeadsFit {
            for track in headed where !track.headIsWhole && track.mayComplete {
                let tail = track.size - track.startBytes
                guard sum(used, tail) <= budget else { break }
                used = sum(used, tail)
                targets[track.id] = .complete
            }
        }
        return CachePlan(budget: budget, targets: targets, order: ordered.map(\.id), plannedBytes: used,
                         libraryBytes: library, pinnedOverBudget: pinnedOverBudget, allHeadsFit: allHeadsFit, headsBytes: heads)
    }

    /// Pinned first; then played most recently, added most recently (by day), modified most recently; then
    /// remote and path.
    public static func higherPriority(_ a: PlanningTrack, _ b: PlanningTrack) -> Bool {
        if a.pinned != b.pinned { return a.pinned }
        if a.lastPlayed != b.lastPlayed { return a.lastPlayed > b.lastPlayed }
        let dayA = (a.added / 86400).rounded(.down), dayB = (b.added / 86400).rounded(.down)
        if dayA != dayB { return dayA > dayB }
        if a.modified != b.modified { return a.modified > b.modified }
        if a.remote != b.remote { return a.remote < b.remote }
        return a.path < b.path
    }

    /// `a + b` for byte counts from the wire and the index: saturates instead of trapping.
    static func sum(_ a: Int64, _ b: Int64) -> Int64 { a.addingSaturating(b) }
}
