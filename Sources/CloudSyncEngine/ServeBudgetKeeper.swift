import CloudSyncCore
import Dispatch
import Foundation
import Synchronization

/// Keeps the cache within its budget while `serve` fills it. serve fetches whatever players ask for, so a library
/// played through it between pulls — or never pulled — would otherwise grow the cache past `cache.max_size` and
/// `cache.min_free` until the disk is full. On a thread of its own (the work is SQLite and file trimming, never
/// on a cooperative or a network thread), once at start and then every `interval` after an on-demand fetch
/// session of any remote ended or a player let go of a track, ``CacheBudget/keepWithin(sparing:)`` brings the
/// cache down to its plan: played tracks first, as in a pull; tracks a player has open now (``OpenTracks``)
/// are left for a later round.
public final class ServeBudgetKeeper: Sendable {
    let budget: CacheBudget
    let sources: [OnDemand]
    let openTracks: OpenTracks
    let interval: Duration
    let logger: Logger
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)

    public init(budget: CacheBudget, sources: [OnDemand], openTracks: OpenTracks, interval: Duration = .seconds(5),
                logger: Logger = .silent) {
        self.budget = budget
        self.sources = sources
        self.openTracks = openTracks
        self.interval = interval
        self.logger = logger
    }

    public func start() {
        startThread(named: "serve-budget") { [self] in run() }
    }

    /// Ends the thread (at once if it waits, after its round if one runs).
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        wake.signal()
    }

    private var endings: Int { sources.reduce(openTracks.closesSoFar) { $0 + $1.endingsSoFar } }

    private func run() {
        var seen = endings
        round()
        let seconds = max(0.01, Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
        while !stopped.load(ordering: .relaxed) {
            _ = wake.wait(timeout: .now() + seconds)
            if stopped.load(ordering: .relaxed) { return }
            let now = endings
            guard now != seen else { continue }
            seen = now
            round()
        }
    }

    /// One check, and a reduction when the cache holds more than its budget.
    func round() {
        do {
            // Tracks a player has open are left as they are until it lets go (the next round after its fetches).
            guard let report = try budget.keepWithin(sparing: openTracks.tracks), !report.items.isEmpty else { return }
            let limit = try budget.budget()
            logger.info("serve: the cache was over its budget of \(ByteSize.format(limit)): "
                + "\(report.items.count) track(s) reduced, lowest priority first, \(ByteSize.format(report.freedBytes)) freed")
        } catch {
            logger.warning("serve: keeping the cache within its budget failed: \(error); the next pull or `cloudsync cache evict` does it")
        }
    }
}
