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
    /// Fetches that found the disk full, waiting for a round (``makeRoom()``).
    private let roomWaiters = Mutex<[CheckedContinuation<Bool, Never>]>([])

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
        answerRoomWaiters(false)
    }

    /// A round now, for an on-demand fetch that found the disk full (other programs filled it since the last
    /// round): the cache is brought down to its budget, which a full disk has lowered below what it holds
    /// (`cache.min_free`, at least 16 MiB, stays free), tracks a player has open spared. True when it freed bytes:
    /// the fetch is then tried again, and the player plays on instead of seeing its track cut.
    public func makeRoom() async -> Bool {
        await withCheckedContinuation { continuation in
            roomWaiters.withLock { $0.append(continuation) }
            if stopped.load(ordering: .relaxed) { answerRoomWaiters(false) } else { wake.signal() }
        }
    }

    private func answerRoomWaiters(_ freed: Bool) {
        let waiting = roomWaiters.withLock { waiters in
            defer { waiters = [] }
            return waiters
        }
        for continuation in waiting { continuation.resume(returning: freed) }
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
            let roomWanted = roomWaiters.withLock { !$0.isEmpty }
            guard now != seen || roomWanted else { continue }
            seen = now
            let freed = round()
            if roomWanted { answerRoomWaiters(freed > 0) }
        }
    }

    /// One check, and a reduction when the cache holds more than its budget. Returns the bytes freed.
    @discardableResult
    func round() -> Int64 {
        do {
            // Tracks a player has open are left as they are until it lets go (the next round after its fetches).
            guard let report = try budget.keepWithin(sparing: openTracks.tracks), !report.items.isEmpty else {
                logger.debug("serve: budget round: nothing to reduce")
                return 0
            }
            let limit = try budget.budget()
            logger.info("serve: the cache was over its budget of \(ByteSize.format(limit)): "
                + "\(report.items.count) track(s) reduced, lowest priority first, \(ByteSize.format(report.freedBytes)) freed")
            return report.freedBytes
        } catch {
            logger.warning("serve: keeping the cache within its budget failed: \(error); the next pull or `cloudsync cache evict` does it")
            return 0
        }
    }
}
