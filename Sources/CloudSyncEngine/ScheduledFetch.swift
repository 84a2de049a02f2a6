/// What the budget lets one pull fetch of its listing's plan (pure): for each file of the plan the cache plan
/// keeps complete, the bytes it lacks; for each one it keeps as a head whose start set is not cached yet, the part
/// of the start set it lacks (an estimate where the start set was never analysed). Every other file of the plan is
/// left out: the budget keeps nothing of it, or only its head, which is cached.
///
/// A pull's progress totals and summary counts come from here, and a dry run's listing, so what `--dry-run`
/// says it would fetch is what the pull fetches.
struct ScheduledFetch: Sendable, Hashable {
    enum Part: Sendable, Hashable {
        case whole
        case head
    }

    struct Item: Sendable, Hashable {
        /// Index into the plan's `fetch`.
        var file: Int
        var part: Part
        var bytes: Int64
    }

    /// In the order of the plan's `fetch`.
    private(set) var items: [Item] = []

    /// `candidates`: the plan's files of `remote` by path, as indexes into its `fetch`; `tracks`: what `cachePlan`
    /// was made from (every remote of the cache).
    init(remote: String, _ cachePlan: CachePlan, _ tracks: [PlanningTrack], candidates: [String: Int]) {
        for track in tracks where track.remote == remote && !track.complete {
            guard let file = candidates[track.path] else { continue }
            switch cachePlan.target(track.id) {
            case .complete:
                items.append(Item(file: file, part: .whole, bytes: max(0, track.size - track.partialBytes)))
            case .head where !track.headPresent:
                items.append(Item(file: file, part: .head, bytes: max(0, min(track.size, track.startBytes) - track.partialBytes)))
            case .head, .none:
                break
            }
        }
        items.sort { $0.file < $1.file }
    }

    var files: Int { items.count(where: { $0.part == .whole }) }
    var headsOnly: Int { items.count(where: { $0.part == .head }) }
    var bytes: Int64 { items.reduce(0) { $0.addingSaturating($1.bytes) } }

    /// Counts `plan`'s files into `report`: changed ones (another version cached or indexed); new ones (unknown to
    /// the index before this listing, or scheduled with no byte cached); resumed ones (scheduled, partly cached).
    func count(_ plan: SyncPlan, into report: inout SyncReport) {
        var scheduled = Set<Int>(minimumCapacity: items.count)
        for item in items { scheduled.insert(item.file) }
        for (index, item) in plan.fetch.enumerated() {
            if item.changed || item.versionChanged {
                report.changed += 1
            } else if item.missingBytes >= item.file.size {
                if item.firstSeen || scheduled.contains(index) { report.new += 1 }
            } else if scheduled.contains(index) {
                report.resumed += 1
            }
        }
    }

    /// `plan` as this schedule fetches it (a dry run's): only the scheduled files, each with the bytes it would
    /// fetch and whether only its head; the rest counted in `leftOut`.
    func applied(to plan: SyncPlan) -> SyncPlan {
        var fitted = plan
        fitted.fetch = items.map { item in
            var fetch = plan.fetch[item.file]
            fetch.missingBytes = item.bytes
            fetch.headOnly = item.part == .head
            return fetch
        }
        fitted.leftOut = plan.fetch.count - items.count
        return fitted
    }
}
