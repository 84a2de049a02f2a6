#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization

/// How `serve` fetches missing bytes.
public struct OnDemandOptions: Sendable {
    /// Largest ranged GET (read-ahead comes in GETs of at most this size). Bytes reach the player as they land
    /// whatever the size; a GET of read-ahead is cancelled when a newer request needs other bytes.
    public var chunkSize: Int64
    /// The smallest fetch: a request's missing bytes are fetched rounded up to this (within the hole), so a
    /// seek costs one small GET, never a chunk; a read at the end of a hole (a tag at the end) costs its bytes.
    public var blockSize: Int64
    /// Most bytes fetched ahead of a client that reads sequentially. The window starts at one block and
    /// doubles with what the client consumes, so a reader that stops early (a tag scan) costs little.
    public var readAhead: Int64
    /// How often a stream waiting on another process's writer re-reads the index (its checkpoints).
    public var indexPollInterval: Duration
    /// How often such a stream tries to take the entry's writer lock itself (the other writer may have moved on).
    public var takeoverInterval: Duration
    /// After the cloud could not be reached, the first background probe comes after this; each failed probe
    /// doubles the wait up to ``maxProbeInterval``. A client that asks for missing bytes probes at once, but no
    /// sooner than this after the last probe began (``TrackStream/awaitReachable(within:)``).
    public var probeInterval: Duration
    public var maxProbeInterval: Duration

    public init(chunkSize: Int64 = 2 << 20, blockSize: Int64 = 64 << 10, readAhead: Int64? = nil,
                indexPollInterval: Duration = .milliseconds(50), takeoverInterval: Duration = .seconds(1),
                probeInterval: Duration = .seconds(1), maxProbeInterval: Duration = .seconds(30)) {
        self.chunkSize = max(16 << 10, chunkSize)
        self.blockSize = min(self.chunkSize, max(4 << 10, blockSize))
        self.readAhead = max(self.blockSize, readAhead ?? 2 * self.chunkSize)
        self.indexPollInterval = indexPollInterval
        self.takeoverInterval = takeoverInterval
        self.probeInterval = max(.milliseconds(10), probeInterval)
        self.maxProbeInterval = max(self.probeInterval, maxProbeInterval)
    }
}

/// The remote's cloud cannot be reached (refused connection, DNS failure, no route): missing bytes are not
/// waited for. `retryAfter` is when the next background probe is due, in whole seconds (at least 1).
public struct RemoteOffline: Error, Sendable, CustomStringConvertible {
    public let remote: String
    public let retryAfter: Int
    public let reason: String

    public var description: String {
        "the cloud of remote '\(remote)' cannot be reached (\(reason)); only cached bytes are served, try again in \(retryAfter) s"
    }
}

/// Fills holes of one remote's tracks on demand, for `serve`: the Linux counterpart of AVAssetResourceLoader.
///
/// Contracts:
/// - A stream's wanted bytes are fetched at once by a task of their own: serve's fetches never wait in a queue
///   (only the remote's `Pacer` can delay them, on 429/Retry-After), and never wait for a cooperative thread:
///   every task of an `OnDemand` runs on its ``DedicatedExecutor``.
/// - Within a process, one fetch session per entry: two clients of the same missing track share it, so each
///   byte is downloaded once. Across processes the entry's writer lock decides: while another process (a
///   `pull`) holds it, streams see that writer's checkpointed bytes (``CacheLimits/checkpointBytes``) and
///   retry taking the lock every ``OnDemandOptions/takeoverInterval``.
/// - The client first: the newest request's missing bytes (rounded up to a block) are fetched before any
///   read-ahead, and a GET of read-ahead in flight is cancelled for them. Nothing is fetched for a request
///   while the bytes it reads are present; read-ahead only follows a client that reads on into missing bytes.
/// - Offline: when a fetch fails because the cloud cannot be reached (``isUnreachable(_:)``), the remote is
///   marked offline: streams throw ``RemoteOffline`` at once for missing bytes, and a probe (a 1-byte ranged
///   GET) clears the mark when the cloud answers again. Probes run in the background with a growing back-off,
///   and at once when a client asks for missing bytes (at most one per ``OnDemandOptions/probeInterval``), so a
///   player is served as soon as the network is back, not at the back-off's next turn.
/// - A session holds the entry's writer lock only while it has bytes to fetch; a track whose last byte arrives
///   this way is verified and promoted into `tracks/` like a pulled one.
/// - Closing a stream (the player disconnected) cancels its read-ahead; the GET in flight is cancelled when no
///   other stream wants the entry.
public final class OnDemand: Sendable {
    public let remote: String
    let cache: Cache
    let provider: any Provider
    let transport: any Transport
    let fetcher: FileFetcher
    let options: OnDemandOptions
    let logger: Logger
    private let sessions = Mutex<[String: FetchSession]>([:])
    /// Paths whose retired session's writer is closing (its lock is released when that ends): a new session for
    /// one waits for it rather than take it for another process's writer.
    private let closing = Mutex<[String: Int]>([:])
    /// Writers of retired sessions closed so far (any path).
    private let retiredWritersClosed = Atomic<Int>(0)
    /// Makes room in the cache when a fetch found the disk full (``whenTheDiskIsFull(_:)``).
    private let roomMaker = Mutex<(@Sendable () async -> Bool)?>(nil)
    private let nextID = Atomic<UInt64>(1)
    private let offline = Mutex<Offline?>(nil)
    /// Runs every task of this object (fetch sessions, their GETs, the offline probe): see ``DedicatedExecutor``.
    let executor: DedicatedExecutor

    private struct Offline {
        var reason: String
        /// When the last probe began (the failure that marked the remote offline counts as one): a client's
        /// demand probes again no sooner than ``OnDemandOptions/probeInterval`` after it.
        var lastProbe: ContinuousClock.Instant
        var probing = false
        /// Finished probes, all failed: a waiter watches its own finish.
        var probes = 0
        /// The background probe loop.
        var loop: Task<Void, Never>?
    }

    /// The transport reports a cloud that cannot be reached as `.unreachable`; give the pacer few
    /// `unreachableRetries` so serve fails fast.
    public init(remote: String, provider: any Provider, transport: any Transport, pacer: Pacer, cache: Cache,
                options: OnDemandOptions = OnDemandOptions(), logger: Logger = .silent) {
        self.remote = remote
        self.cache = cache
        self.provider = provider
        self.options = options
        self.logger = logger
        self.transport = transport
        executor = DedicatedExecutor(label: "cloudsync.serve.\(remote)")
        // One stream per entry: a player reads in order, and a seek re-prioritises at once.
        // A player waits for these bytes: each of libcurl's pieces reaches the entry as it arrives.
        fetcher = FileFetcher(provider: provider, transport: transport, pacer: pacer, chunkSize: options.chunkSize,
                              segments: 1, segmentThreshold: .max, events: { _ in }, logger: logger, executor: executor,
                              writeBatchBytes: 0)
    }

    deinit {
        offline.withLock { $0?.loop?.cancel() }
    }

    /// Opens `path` (relative to the remote's root, as indexed) for streaming. Touches its last access time.
    /// Throws `CacheError(.notFound)` for a path the index does not know.
    public func open(path: String) throws -> TrackStream {
        let reader = try cache.openReader(remote: remote, path: path)
        return TrackStream(owner: self, reader: reader, id: nextID.add(1, ordering: .relaxed).oldValue)
    }

    /// How many times each path's fetch met another version of it on the server than the one being fetched
    /// (its bytes were then dropped and the new version fetched): a stream that served bytes before such a
    /// change must not go on with the new version's (``TrackStream/available(from:limit:)``).
    private let versions = Mutex<[String: Int]>([:])

    func noteNewVersion(of path: String) {
        versions.withLock { $0[path, default: 0] += 1 }
        logger.info("serve: \(remote):\(path) changed on the remote during a fetch: its cached bytes were dropped and the new version is fetched; responses under way end")
    }

    func versionChanges(of path: String) -> Int { versions.withLock { $0[path] ?? 0 } }

    /// Entries with a fetch session now (for tests and the index page).
    public var activeSessions: Int { sessions.withLock { $0.count } }

    /// Whether the cloud is considered unreachable now.
    public var isOffline: Bool { offline.withLock { $0 != nil } }

    /// The error for missing bytes while offline, or nil when online. `retryAfter`: when a request probes again.
    func offlineError() -> RemoteOffline? {
        offline.withLock { state in
            guard let state else { return nil }
            let wait = state.lastProbe + options.probeInterval - .now
            let seconds = max(1, Int((Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18).rounded(.up)))
            return RemoteOffline(remote: remote, retryAfter: seconds, reason: state.reason)
        }
    }

    /// Whether `error` means the cloud cannot be reached at all (DNS, refused, no route, connect timeout: the
    /// transport's `.unreachable`).
    public static func isUnreachable(_ error: any Error) -> Bool {
        (error as? ProviderError)?.code == .unreachable
    }

    /// Marks the remote offline after `error` while fetching `file`, and starts the background probe.
    func markOffline(after error: any Error, file: RemoteFile) {
        let reason = (error as? ProviderError)?.message ?? String(describing: error)
        let started = offline.withLock { state -> Bool in
            if state != nil { return false }
            state = Offline(reason: reason, lastProbe: .now)
            return true
        }
        guard started else { return }
        logger.warning("serve: \(remote): the cloud cannot be reached (\(reason)); answering from the cache only until it is back")
        // The task holds this object only while a probe runs, so an OnDemand that goes away ends it.
        let loop = Task(executorPreference: executor) { [weak self, options] in
            var pause = options.probeInterval
            while !Task.isCancelled {
                do { try await Task.sleep(for: pause) } catch { return }
                guard let self, self.isOffline else { return }
                // A probe a client started meanwhile is as good as this one.
                guard self.beginProbe(demanded: false) != nil else { continue }
                if await self.probe(file) { return }
                pause = min(options.maxProbeInterval, pause * 2)
            }
        }
        offline.withLock { $0?.loop = loop }
    }

    /// Claims the next probe: its number, or nil when online, a probe runs, or (`demanded`) one began less than
    /// ``OnDemandOptions/probeInterval`` ago.
    private func beginProbe(demanded: Bool) -> Int? {
        offline.withLock { state -> Int? in
            guard var s = state, !s.probing else { return nil }
            let now = ContinuousClock.now
            if demanded, now - s.lastProbe < options.probeInterval { return nil }
            s.probing = true
            s.lastProbe = now
            state = s
            return s.probes + 1
        }
    }

    /// For a client that wants missing bytes of `file` while offline: probes the cloud now (see ``beginProbe``)
    /// and waits up to `timeout` for the answer. True when the cloud answers (again); false when it still cannot
    /// be reached, the probe takes longer, or no probe is due (one failed less than a probe interval ago, or
    /// another client's is under way: its answer ends the offline mark for this one too).
    func awaitReachable(_ file: RemoteFile, within timeout: Duration) -> Bool {
        guard isOffline else { return true }
        guard let ticket = beginProbe(demanded: true) else { return !isOffline }
        Task(executorPreference: executor) { [weak self] in _ = await self?.probe(file) }
        let deadline = ContinuousClock.now + timeout
        while true {
            let (online, failed) = offline.withLock { s in (s == nil, (s?.probes ?? 0) >= ticket) }
            if online { return true }
            if failed || ContinuousClock.now >= deadline { return false }
            usleep(2_000)
        }
    }

    /// One probe, claimed by ``beginProbe(demanded:)``: a 1-byte ranged GET of `file`. Any answer from the host
    /// (an HTTP error, a malformed reply included) means the cloud is reachable: the offline mark is cleared
    /// (ending the background loop) and true returned.
    private func probe(_ file: RemoteFile) async -> Bool {
        do {
            let download = try await provider.resolveDownload(for: file)
            var request = HTTPRequest(method: download.method, url: download.url, keepsAuthAcrossHosts: download.sendsAuthOnRedirect)
            for h in download.headers { request.headers.add(h.name, h.value) }
            _ = try await transport.download(request, range: 0 ... 0, ifRange: nil, whenRangeIgnored: .stop, into: DiscardingSink())
        } catch where Self.isUnreachable(error) || error is CancellationError {
            offline.withLock { state in
                state?.probing = false
                state?.probes += 1
            }
            return false
        } catch {}
        let loop = offline.withLock { state -> Task<Void, Never>? in
            defer { state = nil }
            return state?.loop
        }
        loop?.cancel()
        logger.info("serve: \(remote): the cloud answers again")
        return true
    }

    /// What a fetch session does when its writes find the disk full: `makeRoom` (``ServeBudgetKeeper/makeRoom()``)
    /// brings the cache down to its budget and says whether it freed bytes; the session then tries once more.
    /// Unset, the fetch fails (the player's response ends, 507 for a request not begun).
    public func whenTheDiskIsFull(_ makeRoom: @escaping @Sendable () async -> Bool) {
        roomMaker.withLock { $0 = makeRoom }
    }

    /// Asks for room after a full disk; false when nobody makes any or nothing was freed.
    func makeRoom() async -> Bool {
        guard let maker = roomMaker.withLock({ $0 }) else { return false }
        return await maker()
    }

    /// The open session of `path` with `demand` registered, a new one, or nil when another process holds the
    /// entry's writer lock. A session of this process that retired a moment ago (its window was fetched, and
    /// the client read on into the next hole) is waited for while its writer lets go — milliseconds, whereas
    /// taking it for another process's writer would hold the client up for a takeover interval — but 200 ms at
    /// most: a close that takes longer (its last checkpoint waiting on a busy index) is treated like another
    /// process's writer, whose checkpoints the stream polls meanwhile: this blocks a connection thread.
    func session(for path: String, file: RemoteFile, demand: Demand) throws -> FetchSession? {
        let deadline = ContinuousClock.now + .milliseconds(200)
        while true {
            let closedBefore = retiredWritersClosed.load(ordering: .acquiring)
            if let session = try newOrExistingSession(for: path, file: file, demand: demand) { return session }
            // Busy. Ours if a retired session of the path is letting go now, or one let go since the attempt began:
            // try again.
            let ours = closing.withLock { $0[path] != nil } || retiredWritersClosed.load(ordering: .acquiring) != closedBefore
            guard ours, ContinuousClock.now < deadline else { return nil }
            usleep(500)
        }
    }

    private func newOrExistingSession(for path: String, file: RemoteFile, demand: Demand) throws -> FetchSession? {
        try sessions.withLock { (map: inout [String: FetchSession]) throws -> FetchSession? in
            if let existing = map[path], existing.add(demand) { return existing }
            let writer: EntryWriter
            do {
                writer = try cache.openWriter(remote: remote, path: path, wait: false)
            } catch let error as CacheError where error.code == .busy {
                return nil
            }
            guard writer.size == file.size else {
                writer.close()
                throw CacheError(.changed, "\(remote):\(path) changed on the remote; ask again for the new version.", path: path)
            }
            let session = FetchSession(owner: self, job: FileJob(remote: remote, file: file, writer: writer,
                                                                capabilities: provider.capabilities,
                                                                newVersion: { [weak self] in self?.noteNewVersion(of: path) }))
            _ = session.add(demand)
            map[path] = session
            logger.debug("serve: fetching \(remote):\(path) on demand")
            return session
        }
    }

    /// Removes `session` and releases its writer lock if it has nothing left to fetch.
    func retireIfIdle(_ session: FetchSession) {
        let path = session.job.file.path
        let retired = sessions.withLock { map -> Bool in
            guard session.markClosedIfIdle() else { return false }
            if map[path] === session { map[path] = nil }
            closing.withLock { $0[path, default: 0] += 1 }
            return true
        }
        if retired {
            session.job.writer.close()
            retiredWritersClosed.add(1, ordering: .releasing)
            closing.withLock { counts in
                let left = (counts[path] ?? 1) - 1
                counts[path] = left > 0 ? left : nil
            }
            endings.add(1, ordering: .relaxed)
        }
    }

    /// Fetch sessions ended so far: it moves when this object may have added bytes to the cache
    /// (``ServeBudgetKeeper``).
    public var endingsSoFar: Int { endings.load(ordering: .relaxed) }
    private let endings = Atomic<Int>(0)
}

/// Throws away what a probe receives.
struct DiscardingSink: ByteSink {
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {}
}

/// `a + b`, or `Int64.max` when that overflows: byte offsets from requests and the index are clamped, never
/// trapped on.
@inline(__always)
package func saturatingAdd(_ a: Int64, _ b: Int64) -> Int64 {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? (b > 0 ? .max : .min) : sum
}

/// The bytes one client wants.
struct Demand: Sendable, Equatable {
    var id: UInt64
    /// The next byte the client needs (what it has consumed so far).
    var position: Int64
    /// The end of what the client asked for (its request's end).
    var requestEnd: Int64
    /// How far beyond `position` bytes are fetched ahead: at least a block, growing while the client consumes.
    var window: Int64
    /// The request continued the previous one where it ended: read-ahead may pass `requestEnd`.
    var sequential: Bool
    /// Later demands are served first (a seek beats the previous position). Set by the session.
    var sequence: UInt64 = 0
}

/// One GET chosen by ``FetchSession/nextFetch``: `range`, of which `[range.lowerBound, neededEnd)` is what a
/// client waits for now (empty for pure read-ahead). Only the rest can be pre-empted by a newer request.
struct Fetch: Sendable, Equatable {
    var range: Range<Int64>
    var neededEnd: Int64
}

/// One entry being fetched for `serve`: its writer, its job, the demands of the streams reading it, and the
/// one task that fetches their missing bytes, one ranged GET at a time.
final class FetchSession: Sendable {
    let job: FileJob
    private let owner: OnDemand

    private struct State {
        var demands: [UInt64: Demand] = [:]
        var task: Task<Void, Never>?
        /// The GET running now, what it fetches and why.
        var fetch: Task<Void, any Error>?
        var inFlight: Fetch?
        /// The GET in flight was cancelled for a newer need: the loop goes on.
        var preempted = false
        var failure: (any Error & Sendable)?
        var closed = false
        var mismatches = 0
        /// Completions that found bytes dropped after the verification (``recordDrop()``).
        var drops = 0
        /// The cache was asked for room after a full disk (once per session).
        var roomAsked = false
        var sequence: UInt64 = 0
    }

    private let state = Mutex(State())

    init(owner: OnDemand, job: FileJob) {
        self.owner = owner
        self.job = job
    }

    /// The error that ended fetching (every stream of this session sees it), if any.
    var failure: (any Error)? { state.withLock { $0.failure } }
    var isClosed: Bool { state.withLock { $0.closed } }
    /// Open with no fetch running: what its streams want is present (or the cloud is offline, or it failed).
    var isIdle: Bool { state.withLock { !$0.closed && $0.task == nil } }

    /// Adds or moves `demand`; starts fetching if bytes it wants are missing, and cancels read-ahead in flight
    /// when this demand needs other bytes now. False when the session is closed.
    func add(_ demand: Demand) -> Bool {
        let options = owner.options
        return state.withLock { s in
            guard !s.closed else { return false }
            s.sequence += 1
            var d = demand
            d.sequence = s.sequence
            s.demands[d.id] = d
            if s.task == nil {
                if s.failure == nil, !owner.isOffline,
                   Self.nextFetch(s.demands.values, missing: job.writer.missingRanges(), size: job.file.size,
                                  block: options.blockSize, chunk: options.chunkSize) != nil {
                    startLocked(&s)
                }
            } else if let flight = s.inFlight, !s.preempted,
                      Self.preempts(d, inFlight: flight, missing: job.writer.missingRanges(), block: options.blockSize) {
                s.preempted = true
                s.fetch?.cancel()
            }
            return true
        }
    }

    /// Drops the demand of stream `id`. With no demand left, the GET in flight is cancelled.
    func remove(_ id: UInt64) {
        let idle = state.withLock { s -> Bool in
            s.demands[id] = nil
            guard s.demands.isEmpty else { return false }
            if s.task != nil {
                s.fetch?.cancel()
                return false
            }
            return true
        }
        if idle { owner.retireIfIdle(self) }
    }

    /// Marks the session closed when it has no task running. Called under the owner's map lock.
    func markClosedIfIdle() -> Bool {
        state.withLock { s in
            guard !s.closed, s.task == nil else { return false }
            s.closed = true
            return true
        }
    }

    private func startLocked(_ s: inout State) {
        s.preempted = false
        s.task = Task(executorPreference: owner.executor) { await self.run() }
    }

    /// Fetches what ``nextFetch`` chooses, one GET at a time, until no demand misses bytes; completes
    /// (verifies and promotes) the file when its last byte arrives.
    private func run() async {
        let options = owner.options
        while true {
            let pick: Fetch? = state.withLock { s in
                s.preempted = false
                guard !s.demands.isEmpty, !owner.isOffline else { return nil }
                let next = Self.nextFetch(s.demands.values, missing: job.writer.missingRanges(), size: job.file.size,
                                          block: options.blockSize, chunk: options.chunkSize)
                s.inFlight = next
                return next
            }
            guard let pick else { break }
            let fetch = Task(executorPreference: owner.executor) { [owner, job] in try await owner.fetcher.fetch(job, within: pick.range, checkpointAtEnd: false) }
            let cancelledAlready = state.withLock { s -> Bool in
                s.fetch = fetch
                return s.preempted || s.demands.isEmpty
            }
            if cancelledAlready { fetch.cancel() }
            let result = await fetch.result
            let preempted = state.withLock { s -> Bool in
                s.fetch = nil
                s.inFlight = nil
                return s.preempted && !s.demands.isEmpty
            }
            do {
                try result.get()
                try job.writer.checkpointIfDue()
                if job.file.size > 0 ? job.writer.missingRanges().isEmpty : true {
                    try await completeFile()
                    break
                }
            } catch {
                if error is CancellationError || fetch.isCancelled {
                    if preempted { continue }
                    // The clients left (their demands gone) just as the last bytes arrived: the file is whole, so
                    // it is completed all the same — else no one would (a request finds every byte present and
                    // fetches nothing), and it stayed partial until the next pull.
                    if job.file.size > 0, job.writer.missingRanges().isEmpty {
                        do {
                            try await completeFile()
                        } catch {
                            owner.logger.info("serve: completing \(owner.remote):\(job.file.path) failed: \(error); the next pull completes it")
                            try? await job.writer.flush()
                        }
                        break
                    }
                    try? await job.writer.flush()
                    break
                }
                // A write found the disk full (a completion that did is left to fail: its bytes are all there).
                if (error as? CacheError)?.code == .diskFull, !job.writer.missingRanges().isEmpty,
                   state.withLock({ s in defer { s.roomAsked = true }; return !s.roomAsked }) {
                    owner.logger.warning("serve: \(owner.remote):\(job.file.path): the disk is full; making room in the cache")
                    if await owner.makeRoom() {
                        // A checkpoint queued while the disk was full failed too; its error, thrown once by the
                        // next write, is stale now. A flush (after any checkpoint still queued: one writer queue)
                        // commits the bytes with the room made, then the stale error is taken here.
                        try? await job.writer.flush()
                        _ = try? job.writer.checkpointIfDue()
                        owner.logger.info("serve: \(owner.remote):\(job.file.path): room made; fetching on")
                        continue
                    }
                }
                if (error as? CacheError)?.code == .hashMismatch, recordMismatch() {
                    owner.logger.warning("serve: \(owner.remote):\(job.file.path): \(error); fetching it once more")
                    _ = try? job.restart(etag: nil)
                    continue
                }
                if (error as? CacheError)?.code == .incomplete, !job.writer.missingRanges().isEmpty, recordDrop() {
                    // A block that failed its check was dropped after the file was verified (a client read it
                    // meanwhile): fetch it again, then complete.
                    continue
                }
                try? await job.writer.flush()
                if OnDemand.isUnreachable(error) {
                    owner.markOffline(after: error, file: job.file)
                    break
                }
                // Info: a request waiting for these bytes gets the error and the server logs it with its status
                // (a warning for a 502); read-ahead nobody waits for is not worth a warning.
                owner.logger.info("serve: fetching \(owner.remote):\(job.file.path) failed: \(error)")
                // The cache's and the provider's own errors are kept as they are (the server answers them with
                // their own statuses: 507 for a full disk, 404 for a file gone from the cloud).
                let failure: any Error & Sendable
                if let cacheError = error as? CacheError {
                    failure = cacheError
                } else if let providerError = error as? ProviderError {
                    failure = providerError
                } else {
                    failure = SessionFailure(error)
                }
                state.withLock { $0.failure = failure }
                break
            }
        }
        // Restart when a stream asked for more while this task was ending.
        let restart = state.withLock { s -> Bool in
            s.task = nil
            let wanted = !s.demands.isEmpty && s.failure == nil && !s.closed && !owner.isOffline
                && Self.nextFetch(s.demands.values, missing: job.writer.missingRanges(), size: job.file.size,
                                  block: options.blockSize, chunk: options.chunkSize) != nil
            if wanted { startLocked(&s) }
            return wanted
        }
        if !restart { owner.retireIfIdle(self) }
    }

    private func completeFile() async throws {
        try await owner.fetcher.complete(job)
        owner.logger.info("serve: \(owner.remote):\(job.file.path) is complete\(job.expectedHash.map { " (\($0.kind.rawValue) verified)" } ?? "") and in tracks/")
    }

    /// Counts a completion that found bytes dropped after the verification; true for the first few.
    private func recordDrop() -> Bool {
        state.withLock { s in
            s.drops += 1
            return s.drops <= 3
        }
    }

    private func recordMismatch() -> Bool {
        state.withLock { s in
            s.mismatches += 1
            return s.mismatches == 1
        }
    }

    /// What to fetch next for `demands` (newest first) over the `missing` bytes of a file of `size` bytes:
    ///
    /// 1. The byte a client needs now (its `position` is missing, within its request): one GET from there, to
    ///    the end of the hole but at most `block` — past the request's end when it is shorter (a seek asks for
    ///    little, then reads on), never over present bytes, never before `position` (the bytes a client waits
    ///    for come first: a 128-byte tail read is one GET of 128 bytes). That block is what the client waits
    ///    for (`neededEnd`); a client that has been reading on (its window grew) gets the rest of its window in
    ///    the same GET, up to `chunk`.
    /// 2. Read-ahead: the first missing bytes of `[position, position + window)` — up to the request's end, or
    ///    beyond it for a client that reads sequentially — at most `chunk`.
    ///
    /// Nil when no demand misses a byte.
    static func nextFetch(_ demands: some Sequence<Demand>, missing: ByteRanges, size: Int64, block: Int64,
                          chunk: Int64) -> Fetch? {
        let ordered = demands.sorted { $0.sequence > $1.sequence }
        for d in ordered where d.position >= 0 && d.position < min(d.requestEnd, size) {
            guard let hole = missing.ranges.first(where: { $0.contains(d.position) }) else { continue }
            let needed = min(hole.upperBound, saturatingAdd(d.position, block))
            let upper = min(hole.upperBound, saturatingAdd(d.position, max(block, min(d.window, chunk))))
            return Fetch(range: d.position ..< upper, neededEnd: needed)
        }
        for d in ordered where d.position >= 0 {
            let limit = min(size, d.sequential ? size : d.requestEnd)
            let end = min(limit, saturatingAdd(d.position, d.window))
            guard d.position < end else { continue }
            let window = d.position ..< end
            if let gap = missing.ranges.first(where: { $0.overlaps(window) })?.clamped(to: window) {
                let range = gap.lowerBound ..< min(gap.upperBound, saturatingAdd(gap.lowerBound, chunk))
                return Fetch(range: range, neededEnd: range.lowerBound)
            }
        }
        return nil
    }

    /// Whether `demand` needs a byte that the GET in flight will not bring within one block once its needed part
    /// has arrived: then that GET is cancelled so the byte comes next. The needed part of a GET (what a client
    /// waits for) is never cancelled for another client.
    static func preempts(_ demand: Demand, inFlight: Fetch, missing: ByteRanges, block: Int64) -> Bool {
        guard demand.position >= 0, demand.position < demand.requestEnd,
              missing.ranges.contains(where: { $0.contains(demand.position) }) else { return false }
        // Where the GET in flight has got to: its first byte still missing.
        let range = inFlight.range
        let arriving = missing.ranges.first { $0.overlaps(range) }.map { max($0.lowerBound, range.lowerBound) } ?? range.upperBound
        if arriving < inFlight.neededEnd { return false }
        return !(arriving ..< min(range.upperBound, saturatingAdd(arriving, block))).contains(demand.position)
    }
}

/// Wraps a non-Sendable error so every stream of a session can rethrow it.
struct SessionFailure: Error, Sendable, CustomStringConvertible, ExitCodeProviding {
    let description: String
    let exitCode: ExitCode

    init(_ error: any Error) {
        description = String(describing: error)
        exitCode = (error as? any ExitCodeProviding)?.exitCode ?? .partialFailure
    }
}

/// One client's view of one track, for `serve`: which bytes are ready, reading them, and declaring which
/// bytes it wants next. Thread-safe; meant for one connection (its demand is one request at a time).
///
/// A stream starts out reading the cache alone: nothing is fetched while the bytes it reads are present. When
/// the client needs a missing byte (at the start of a request, or reading on into a hole) the stream joins the
/// entry's fetch session; from then on its window of read-ahead grows with what it consumes (doubling, from
/// one block up to ``OnDemandOptions/readAhead``) and restarts at one block on a seek.
public final class TrackStream: Sendable {
    /// The version being served (size, modified, revision, MIME type).
    public var file: RemoteFile { reader.file }
    public let remote: String

    private let owner: OnDemand
    private let reader: EntryReader
    private let id: UInt64

    private struct State {
        var session: FetchSession?
        /// Our own descriptor on the session's partial file: bytes the session wrote are readable before its
        /// checkpoint. Its inode becomes the track on promotion, so it stays valid.
        var partialFD: Int32 = -1
        var demand: Demand?
        /// Where the client's current run of consecutive reads began (read-ahead grows with its length).
        var runStart: Int64 = 0
        var indexView = ByteRanges()
        var indexReadAt: ContinuousClock.Instant?
        /// When the last attach found the entry written by another process: the next try waits for
        /// ``OnDemandOptions/takeoverInterval``. Nil when it got a session (one that retired once its window was
        /// fetched is replaced at once when the client reads on into a hole).
        var lastTakeover: ContinuousClock.Instant?
        var closed = false
        /// ``OnDemand/versionChanges(of:)`` when the current request began: a change since means the bytes
        /// from here on are another version's than those already sent.
        var version = 0
    }

    private let state: Mutex<State>

    init(owner: OnDemand, reader: EntryReader, id: UInt64) {
        self.owner = owner
        self.reader = reader
        self.id = id
        remote = owner.remote
        var initial = State()
        initial.version = owner.versionChanges(of: reader.file.path)
        state = Mutex(initial)
    }

    /// Throws `.changed` when the file's version changed on the server since the current request began.
    private func checkSameVersion() throws {
        let began = state.withLock { $0.version }
        guard owner.versionChanges(of: file.path) == began else {
            throw CacheError(.changed, "\(remote):\(file.path) changed on the remote while it was being sent; "
                + "ask again for the new version (the next pull lists it)", path: file.path)
        }
    }

    deinit { close() }

    /// Declares that the client asks for `range` now. If its first byte is missing it is fetched at once (or
    /// awaited from another process's writer); a request that starts on present bytes fetches nothing until
    /// the client reads on into missing ones. Throws ``RemoteOffline`` when that byte is missing and the cloud
    /// cannot be reached, and `.changed` if the remote file changed.
    public func want(_ range: Range<Int64>) throws {
        let size = file.size
        let lower = min(max(0, range.lowerBound), size)
        let upper = min(max(lower, range.upperBound), size)
        let version = owner.versionChanges(of: file.path)
        let (demand, session, staleFD) = state.withLock { s -> (Demand, FetchSession?, Int32) in
            // A new request is one version from its start: the one the cache holds or fetches now.
            s.version = version
            // A new request tries again after a failed fetch: the failed session is forgotten.
            var staleFD: Int32 = -1
            if let old = s.session, old.isClosed, old.failure != nil {
                s.session = nil
                staleFD = s.partialFD
                s.partialFD = -1
            }
            // A request that starts where the previous one stopped continues the client's run.
            let continues = s.demand.map { $0.position == lower && lower > s.runStart } ?? false
            if !continues { s.runStart = lower }
            var d = Demand(id: id, position: lower, requestEnd: upper, window: 0, sequential: continues)
            d.window = window(for: d, runStart: s.runStart)
            s.demand = d
            return (d, s.session, staleFD)
        }
        if staleFD >= 0 { Glibc.close(staleFD) }
        guard lower < upper else { return }
        if let session, !session.isClosed {
            if session.job.writer.presentRanges().contains(lower) {
                _ = session.add(demand)
                return
            }
        } else if try present().contains(lower) {
            return
        }
        if let offline = owner.offlineError() { throw offline }
        try attachSession(demand)
    }

    /// After ``RemoteOffline``: probes the cloud now for this track and waits up to `timeout` for its answer —
    /// true when the cloud answers again (ask again: the missing bytes are fetched), false when it still cannot be
    /// reached or no probe is due yet (``OnDemand/awaitReachable(_:within:)``). Blocks the calling thread.
    public func awaitReachable(within timeout: Duration) -> Bool {
        owner.awaitReachable(file, within: timeout)
    }

    /// Records that bytes before `offset` were sent: the fetch window moves (and grows) with the client.
    public func consumed(upTo offset: Int64) {
        let (session, demand) = state.withLock { s -> (FetchSession?, Demand?) in
            guard var d = s.demand, offset > d.position else { return (nil, nil) }
            d.position = min(offset, file.size)
            d.window = window(for: d, runStart: s.runStart)
            s.demand = d
            return (s.session, d)
        }
        if let session, let demand, !session.isClosed { _ = session.add(demand) }
    }

    /// The bytes from `offset` (up to `limit`) that can be read now: the present prefix of `offset..<limit`,
    /// empty when the byte at `offset` is not there yet (its fetch is then under way). Throws the error that
    /// stopped fetching this track (network, auth, changed file), and ``RemoteOffline`` when the byte is missing
    /// and the cloud cannot be reached, so a waiting client is not left hanging.
    public func available(from offset: Int64, limit: Int64) throws -> Range<Int64> {
        let wanted = offset ..< max(offset, min(limit, file.size))
        if wanted.isEmpty { return wanted }
        try checkSameVersion()
        let (session, takeoverDue) = state.withLock { s -> (FetchSession?, Bool) in
            let due = s.lastTakeover.map { ContinuousClock.now - $0 >= owner.options.takeoverInterval } ?? true
            return (s.session, due)
        }
        // A retired session's writer no longer speaks for the entry (a reader may have dropped bytes since):
        // the index does.
        if let session, !session.isClosed {
            let fromWriter = session.job.writer.presentRanges().presentPrefix(of: wanted)
            if !fromWriter.isEmpty { return fromWriter }
            if let failure = session.failure { throw failure }
        }
        let fromIndex = try present().presentPrefix(of: wanted)
        if !fromIndex.isEmpty { return fromIndex }
        // A session retires as soon as it fails: its error still ends this request. (Attaching again here would
        // repeat the failing fetch every takeover interval — a file gone from the cloud, a full disk — until the
        // server's first-byte timeout.) The client's next request tries afresh (``want(_:)``).
        if let failure = session?.failure { throw failure }
        if let offline = owner.offlineError() { throw offline }
        // Nothing yet: make sure someone fetches it (the client read on into a hole, a session that retired,
        // or another process's writer that let go).
        let demand = state.withLock { s -> Demand in
            var d = s.demand ?? Demand(id: id, position: offset, requestEnd: wanted.upperBound, window: 0, sequential: false)
            if d.position != offset || d.requestEnd < wanted.upperBound {
                d.position = offset
                d.requestEnd = max(d.requestEnd, wanted.upperBound)
            }
            d.window = window(for: d, runStart: s.runStart)
            s.demand = d
            return d
        }
        if let session, !session.isClosed {
            _ = session.add(demand)
        } else if takeoverDue {
            try attachSession(demand)
        }
        return offset ..< offset
    }

    /// Reads `range`, which ``available(from:limit:)`` reported. Throws `.incomplete` if it is not present.
    public func read(_ range: Range<Int64>) throws -> Data {
        do {
            let data = try readPresent(range)
            // After the read: a new version's bytes are written only after its change is counted.
            try checkSameVersion()
            return data
        } catch let error as CacheError where error.code == .damaged || error.code == .incomplete {
            // A damaged block was dropped from the index (or will be, once a writer holding the entry lets go), or
            // another reader dropped it first: stop trusting the view of it held here, so the next `want` or
            // `available` asks the index again.
            state.withLock { $0.indexReadAt = nil }
            throw error
        }
    }

    private func readPresent(_ range: Range<Int64>) throws -> Data {
        let (current, fd) = state.withLock { ($0.session, $0.partialFD) }
        // A retired session's writer no longer speaks for the entry: the reader (the index) does.
        let session = current.flatMap { $0.isClosed ? nil : $0 }
        if let session, session.job.writer.isSealed, session.job.writer.presentRanges().containsAll(range) {
            // Encrypted: the writer opens the blocks (pending ones included) and drops one that fails its check.
            let data = try session.job.writer.read(range)
            if session.job.writer.presentRanges().containsAll(range) { return data }
        } else if let session, fd >= 0, session.job.writer.presentRanges().containsAll(range) {
            let data = try preadAll(fd: fd, range: range, display: "\(remote):\(file.path)", cacheRoot: owner.cache.rootPath)
            // Bytes dropped meanwhile (hash mismatch, changed file) must not be served.
            if session.job.writer.presentRanges().containsAll(range) { return data }
        }
        return try reader.read(range)
    }

    /// Ends this client's interest: its read-ahead is cancelled. Idempotent.
    public func close() {
        let (session, fd) = state.withLock { s -> (FetchSession?, Int32) in
            if s.closed { return (nil, -1) }
            s.closed = true
            defer { s.partialFD = -1; s.session = nil }
            return (s.session, s.partialFD)
        }
        if fd >= 0 { Glibc.close(fd) }
        session?.remove(id)
        reader.close()
    }

    /// Read-ahead for `demand`: twice what the client consumed in its run since it last needed a fetch, from
    /// one block up to the configured read-ahead.
    private func window(for demand: Demand, runStart: Int64) -> Int64 {
        let options = owner.options
        let run = max(0, demand.position - runStart)
        return min(options.readAhead, max(options.blockSize, run > options.readAhead ? options.readAhead : 2 * run))
    }

    /// Present bytes per the index (checkpointed), re-read at most every `indexPollInterval`.
    private func present() throws -> ByteRanges {
        let cached = state.withLock { s -> ByteRanges? in
            guard let at = s.indexReadAt, ContinuousClock.now - at < owner.options.indexPollInterval else { return nil }
            return s.indexView
        }
        if let cached { return cached }
        let fresh = try reader.presentRanges()
        state.withLock {
            $0.indexView = fresh
            $0.indexReadAt = .now
        }
        return fresh
    }

    private func attachSession(_ demand: Demand) throws {
        if let current = state.withLock({ $0.session }), current.add(demand) { return }
        state.withLock { s in
            // The client needs a fetch from here on: its read-ahead grows from this point.
            if s.session == nil { s.runStart = demand.position }
        }
        var fresh = demand
        fresh.window = owner.options.blockSize
        guard let session = try owner.session(for: file.path, file: file, demand: fresh) else {
            state.withLock { $0.lastTakeover = .now }
            owner.logger.debug("serve: \(remote):\(file.path) is being written by another process; waiting for its checkpoints")
            return
        }
        state.withLock { $0.lastTakeover = nil }
        let fd = open(session.job.writer.partialURL.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        let (stale, old, closed) = state.withLock { s -> (Int32, FetchSession?, Bool) in
            if s.closed { return (fd, nil, true) }
            let stale = s.partialFD
            let old = s.session
            s.session = session
            s.partialFD = fd
            return (stale, old, false)
        }
        if stale >= 0 { Glibc.close(stale) }
        if let old, old !== session { old.remove(id) }
        if closed {
            session.remove(id)
            return
        }
        // Nothing to fetch after all: the bytes arrived since this stream last read the index (the session that
        // fetched them retired a moment ago), or the cloud is offline. Nothing would retire such a session — a
        // session retires when its fetch ends, or when its last stream closes — so it would hold the entry's
        // writer lock for as long as the player keeps its connection open, and a reader in another serve would
        // wait for checkpoints that never come. Let it go now and read the index afresh.
        if session.isIdle {
            owner.retireIfIdle(session)
            state.withLock { $0.indexReadAt = nil }
        }
    }
}
