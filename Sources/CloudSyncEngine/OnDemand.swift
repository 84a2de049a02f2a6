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
    /// Bytes per ranged GET. Smaller than a pull's chunk so a seek re-prioritises quickly; bytes reach the
    /// player as they land whatever the size.
    public var chunkSize: Int64
    /// Bytes fetched beyond the end of what a client asked for while it stays connected.
    public var readAhead: Int64
    /// How often a stream waiting on another process's writer re-reads the index (its checkpoints).
    public var indexPollInterval: Duration
    /// How often such a stream tries to take the entry's writer lock itself (the other writer may have moved on).
    public var takeoverInterval: Duration

    public init(chunkSize: Int64 = 2 << 20, readAhead: Int64? = nil, indexPollInterval: Duration = .milliseconds(50),
                takeoverInterval: Duration = .seconds(1)) {
        self.chunkSize = max(64 << 10, chunkSize)
        self.readAhead = max(0, readAhead ?? 2 * self.chunkSize)
        self.indexPollInterval = indexPollInterval
        self.takeoverInterval = takeoverInterval
    }
}

/// Fills holes of one remote's tracks on demand, for `serve`: the Linux counterpart of AVAssetResourceLoader.
///
/// Contracts:
/// - A stream's wanted bytes are fetched at once by a task of their own: serve's fetches never wait in a queue
///   (only the remote's `Pacer` can delay them, on 429/Retry-After).
/// - Within a process, one fetch session per entry: two clients of the same missing track share it, so each
///   byte is downloaded once. Across processes the entry's writer lock decides: while another process (a
///   `pull`) holds it, streams see that writer's checkpointed bytes (``CacheLimits/checkpointBytes``) and
///   retry taking the lock every ``OnDemandOptions/takeoverInterval``.
/// - A session holds the entry's writer lock only while it has bytes to fetch; a track whose last byte arrives
///   this way is verified and promoted into `tracks/` like a pulled one.
/// - Closing a stream (the player disconnected) cancels its read-ahead; the GET in flight is cancelled when no
///   other stream wants the entry.
public final class OnDemand: Sendable {
    public let remote: String
    let cache: Cache
    let fetcher: FileFetcher
    let options: OnDemandOptions
    let logger: Logger
    private let sessions = Mutex<[String: FetchSession]>([:])
    private let nextID = Atomic<UInt64>(1)

    public init(remote: String, provider: any Provider, transport: any Transport, pacer: Pacer, cache: Cache,
                options: OnDemandOptions = OnDemandOptions(), logger: Logger = .silent) {
        self.remote = remote
        self.cache = cache
        self.options = options
        self.logger = logger
        // One stream per entry: a player reads in order, and a seek re-prioritises at the next chunk.
        fetcher = FileFetcher(provider: provider, transport: transport, pacer: pacer, chunkSize: options.chunkSize,
                              segments: 1, segmentThreshold: .max, events: { _ in }, logger: logger)
    }

    /// Opens `path` (relative to the remote's root, as indexed) for streaming. Touches its last access time.
    /// Throws `CacheError(.notFound)` for a path the index does not know.
    public func open(path: String) throws -> TrackStream {
        let reader = try cache.openReader(remote: remote, path: path)
        return TrackStream(owner: self, reader: reader, id: nextID.add(1, ordering: .relaxed).oldValue)
    }

    /// Entries with a fetch session now (for tests and the index page).
    public var activeSessions: Int { sessions.withLock { $0.count } }

    /// The open session of `path` with `demand` registered, a new one, or nil when another process holds the
    /// entry's writer lock.
    func session(for path: String, file: RemoteFile, demand: Demand) throws -> FetchSession? {
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
            let session = FetchSession(owner: self, job: FileJob(remote: remote, file: file, writer: writer))
            _ = session.add(demand)
            map[path] = session
            logger.debug("serve: fetching \(remote):\(path) on demand")
            return session
        }
    }

    /// Removes `session` and releases its writer lock if it has nothing left to fetch.
    func retireIfIdle(_ session: FetchSession) {
        let retired = sessions.withLock { map -> Bool in
            guard session.markClosedIfIdle() else { return false }
            if map[session.job.file.path] === session { map[session.job.file.path] = nil }
            return true
        }
        if retired { session.job.writer.close() }
    }
}

/// The bytes one client wants: from `position` (what it has consumed) to `end` (its request's end plus the
/// read-ahead), clamped to the file.
struct Demand: Sendable, Equatable {
    var id: UInt64
    var position: Int64
    var end: Int64
    /// Later demands are served first (a seek beats the previous position).
    var sequence: UInt64
}

/// One entry being fetched for `serve`: its writer, its job, the demands of the streams reading it, and the
/// one task that fetches their missing bytes chunk by chunk.
final class FetchSession: Sendable {
    let job: FileJob
    private let owner: OnDemand

    private struct State {
        var demands: [UInt64: Demand] = [:]
        var task: Task<Void, Never>?
        var cancelling = false
        var failure: (any Error & Sendable)?
        var closed = false
        var mismatches = 0
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

    /// Adds or moves `demand`; starts fetching if bytes it wants are missing. False when the session is closed.
    func add(_ demand: Demand) -> Bool {
        state.withLock { s in
            guard !s.closed else { return false }
            s.sequence += 1
            var d = demand
            d.sequence = s.sequence
            s.demands[d.id] = d
            if s.task == nil, s.failure == nil { startLocked(&s) }
            else if s.cancelling { s.cancelling = false }  // the ending task restarts (see `run`).
            return true
        }
    }

    /// Drops the demand of stream `id`. With no demand left, the GET in flight is cancelled.
    func remove(_ id: UInt64) {
        let idle = state.withLock { s -> Bool in
            s.demands[id] = nil
            guard s.demands.isEmpty else { return false }
            if let task = s.task {
                s.cancelling = true
                task.cancel()
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
        s.cancelling = false
        s.task = Task { await self.run() }
    }

    /// Fetches the first missing chunk of the most recent demand, then the next, until no demand misses bytes;
    /// completes (verifies and promotes) the file when its last byte arrives.
    private func run() async {
        let chunkSize = owner.options.chunkSize
        while true {
            let next: Range<Int64>? = state.withLock { s in
                if Task.isCancelled && s.cancelling { return nil }
                return Self.nextChunk(s.demands.values, missing: job.writer.missingRanges(), chunkSize: chunkSize)
            }
            guard let next else { break }
            do {
                try await owner.fetcher.fetch(job, within: next)
                if job.file.size > 0 ? job.writer.missingRanges().isEmpty : true {
                    try await completeFile()
                    break
                }
            } catch {
                if Task.isCancelled || error is CancellationError {
                    try? job.writer.checkpoint()
                    break
                }
                if (error as? CacheError)?.code == .hashMismatch, recordMismatch() {
                    owner.logger.warning("serve: \(owner.remote):\(job.file.path): \(error); fetching it once more")
                    _ = try? job.restart(etag: nil)
                    continue
                }
                owner.logger.warning("serve: fetching \(owner.remote):\(job.file.path) failed: \(error)")
                state.withLock { $0.failure = SessionFailure(error) }
                try? job.writer.checkpoint()
                break
            }
        }
        // Restart when a stream asked for more while this task was being cancelled.
        let restart = state.withLock { s -> Bool in
            s.task = nil
            let wanted = !s.demands.isEmpty && s.failure == nil && !s.closed
                && Self.nextChunk(s.demands.values, missing: job.writer.missingRanges(), chunkSize: chunkSize) != nil
            if wanted { startLocked(&s) }
            return wanted
        }
        if !restart { owner.retireIfIdle(self) }
    }

    private func completeFile() async throws {
        try await owner.fetcher.complete(job)
        owner.logger.info("serve: \(owner.remote):\(job.file.path) is complete\(job.expectedHash.map { " (\($0.kind.rawValue) verified)" } ?? "") and in tracks/")
    }

    private func recordMismatch() -> Bool {
        state.withLock { s in
            s.mismatches += 1
            return s.mismatches == 1
        }
    }

    /// The first missing chunk (at most `chunkSize`) of the most recent demand that misses bytes, or nil.
    static func nextChunk(_ demands: some Sequence<Demand>, missing: RangeSet<Int64>, chunkSize: Int64) -> Range<Int64>? {
        for demand in demands.sorted(by: { $0.sequence > $1.sequence }) where demand.position < demand.end {
            let window = demand.position ..< demand.end
            if let gap = missing.ranges.first(where: { $0.overlaps(window) })?.clamped(to: window) {
                return gap.lowerBound ..< min(gap.upperBound, gap.lowerBound + chunkSize)
            }
        }
        return nil
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
/// bytes it wants next. Thread-safe; meant for one connection (its demand is one window at a time).
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
        var indexView = RangeSet<Int64>()
        var indexReadAt: ContinuousClock.Instant?
        var lastTakeover: ContinuousClock.Instant?
        var closed = false
    }

    private let state: Mutex<State>

    init(owner: OnDemand, reader: EntryReader, id: UInt64) {
        self.owner = owner
        self.reader = reader
        self.id = id
        remote = owner.remote
        state = Mutex(State())
    }

    deinit { close() }

    /// Declares that the client wants `range` next: bytes in `range` plus the read-ahead that are missing are
    /// fetched at once (or awaited from another process's writer). Throws `.changed` if the remote file changed.
    public func want(_ range: Range<Int64>) throws {
        let size = file.size
        let end = min(size, range.upperBound + owner.options.readAhead)
        let demand = Demand(id: id, position: max(0, range.lowerBound), end: end, sequence: 0)
        state.withLock { $0.demand = demand }
        if try present().containsAll(demand.position ..< demand.end) { return }
        try attachSession(demand)
    }

    /// Records that bytes before `offset` were sent: the fetch window moves with the client.
    public func consumed(upTo offset: Int64) {
        let (session, demand) = state.withLock { s -> (FetchSession?, Demand?) in
            guard var d = s.demand, offset > d.position else { return (nil, nil) }
            d.position = min(offset, d.end)
            s.demand = d
            return (s.session, d)
        }
        if let session, let demand, !session.isClosed { _ = session.add(demand) }
    }

    /// The bytes from `offset` (up to `limit`) that can be read now: the present prefix of `offset..<limit`,
    /// empty when the byte at `offset` is not there yet. Throws the error that stopped fetching this track
    /// (network, auth, changed file), so a waiting client is not left hanging.
    public func available(from offset: Int64, limit: Int64) throws -> Range<Int64> {
        let wanted = offset ..< min(limit, file.size)
        if wanted.isEmpty { return wanted }
        let (session, takeoverDue) = state.withLock { s -> (FetchSession?, Bool) in
            let due = s.lastTakeover.map { ContinuousClock.now - $0 >= owner.options.takeoverInterval } ?? true
            return (s.session, due)
        }
        if let session {
            let fromWriter = session.job.writer.presentRanges().presentPrefix(of: wanted)
            if !fromWriter.isEmpty { return fromWriter }
            if let failure = session.failure { throw failure }
        }
        let fromIndex = try present().presentPrefix(of: wanted)
        if !fromIndex.isEmpty { return fromIndex }
        // Nothing yet: make sure someone fetches it (a retired session, or another process's writer that let go).
        if let demand = state.withLock({ $0.demand }), session == nil || session?.isClosed == true, takeoverDue {
            var d = demand
            if !(d.position ..< d.end).contains(offset) { d = Demand(id: id, position: offset, end: min(file.size, offset + owner.options.readAhead + 1), sequence: 0) }
            try attachSession(d)
        }
        return offset ..< offset
    }

    /// Reads `range`, which ``available(from:limit:)`` reported. Throws `.incomplete` if it is not present.
    public func read(_ range: Range<Int64>) throws -> Data {
        let (session, fd) = state.withLock { ($0.session, $0.partialFD) }
        if let session, fd >= 0, session.job.writer.presentRanges().containsAll(range) {
            let data = try preadFully(fd: fd, range: range, path: file.path)
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

    /// Present bytes per the index (checkpointed), re-read at most every `indexPollInterval`.
    private func present() throws -> RangeSet<Int64> {
        let cached = state.withLock { s -> RangeSet<Int64>? in
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
        state.withLock { $0.lastTakeover = .now }
        guard let session = try owner.session(for: file.path, file: file, demand: demand) else {
            owner.logger.debug("serve: \(remote):\(file.path) is being written by another process; waiting for its checkpoints")
            return
        }
        let fd = open(session.job.writer.partialURL.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        let (stale, old, closed) = state.withLock { s -> (Int32, FetchSession?, Bool) in
            let stale = s.partialFD
            let old = s.session
            s.session = session
            s.partialFD = fd
            return (stale, old, s.closed)
        }
        if stale >= 0 { Glibc.close(stale) }
        if let old, old !== session { old.remove(id) }
        if closed { close() }
    }
}

/// Reads `range` of `fd` fully with pread.
private func preadFully(fd: Int32, range: Range<Int64>, path: String) throws -> Data {
    var data = Data(count: Int(range.count))
    var failure: Int32 = 0
    data.withUnsafeMutableBytes { buffer in
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress.map { $0 + done }, buffer.count - done, off_t(range.lowerBound + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                failure = errno
                return
            }
            if n == 0 { failure = EIO; return }
            done += n
        }
    }
    if failure != 0 {
        throw CacheError(.io, "reading \(path) from the cache failed: \(String(cString: strerror(failure)))", path: path)
    }
    return data
}
