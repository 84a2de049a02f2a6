import CloudSyncCache
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization

/// Everything a file's download needs across passes (head-first, then the rest) and across its segments: the
/// cache writer, the resolved link, the validator for `If-Range`, the in-order hash of the bytes received so
/// far, and which ranges running segments have claimed.
///
/// Generations: every restart (the remote file changed) starts a new generation. Bytes, claims and restarts
/// carry the generation they belong to, so a transfer of an older generation can neither write into the new
/// one nor restart the file a second time.
final class FileJob: Sendable {
    let remote: String
    let file: RemoteFile
    let writer: EntryWriter
    /// The best hash of the file of a kind the provider declares (``ProviderCapabilities/hashToVerify(for:)``),
    /// verified at completion; nil when there is none (then the size and the ETag checks on every range are what
    /// guard the bytes).
    let expectedHash: ContentHash?
    private let state: Mutex<State>

    struct State {
        var download: DownloadRequest?
        /// Bumped whenever `download` is replaced, so a stream whose link was refused can tell whether another
        /// stream already replaced it.
        var downloadVersion = 0
        /// The one resolution in flight, awaited by every stream that needs a link meanwhile.
        var resolving: Task<DownloadRequest, any Error>?
        /// The current link answered 200 or 206 at least once (a later refusal means it expired).
        var linkWorked = false
        var etag: String?
        var hasher: (any ContentHasher)?
        /// Bytes [0, hashedUpTo) are in `hasher`.
        var hashedUpTo: Int64 = 0
        /// A catch-up (``FileJob/catchUpHash()``) holds the hasher: streams do not feed it meanwhile.
        var hashBusy = false
        /// Bumped whenever the hash starts over, so a catch-up that began before does not put its hasher back.
        var hashEpoch = 0
        var fetched: Int64 = 0
        var unreportedProgress: Int64 = 0
        /// Bumped by every restart.
        var generation = 0
        /// A 206 of this generation showed that the server honours Range: segments may run.
        var rangesHonoured = false
        /// Ranges that running segments fetch (this generation).
        var claimed = ByteRanges()

        mutating func resetHash(_ expected: ContentHash?) {
            hasher = expected.map { makeHasher(for: $0.kind) }
            hashedUpTo = 0
            hashBusy = false
            hashEpoch += 1
        }
    }

    /// Called whenever the transport has one of this file's requests (``TransferSlot/queued``).
    let requested: (@Sendable () -> Void)?
    /// Called when the server answered with another version (a new ETag) and the bytes were dropped for it,
    /// before any byte of that version is written: `serve` ends the responses that sent bytes of the old one.
    let newVersion: (@Sendable () -> Void)?

    init(remote: String, file: RemoteFile, writer: EntryWriter, capabilities: ProviderCapabilities,
         requested: (@Sendable () -> Void)? = nil, newVersion: (@Sendable () -> Void)? = nil) {
        self.remote = remote
        self.file = file
        self.writer = writer
        self.requested = requested
        self.newVersion = newVersion
        let expected = capabilities.hashToVerify(for: file)
        expectedHash = expected
        state = Mutex(State(etag: writer.validator, hasher: expected.map { makeHasher(for: $0.kind) }))
    }

    var fetched: Int64 { state.withLock { $0.fetched } }
    var etag: String? { state.withLock { $0.etag } }
    var generation: Int { state.withLock { $0.generation } }

    func withState<T>(_ body: (inout State) throws -> T) rethrows -> T { try state.withLock { try body(&$0) } }

    /// Forgets every byte and the hash: the remote file changed under us. With `generation`, only when no
    /// other stream restarted the file since that generation began. Returns whether this call restarted it.
    @discardableResult
    func restart(etag: String?, from generation: Int? = nil) throws -> Bool {
        try state.withLock { s in
            if let generation, generation != s.generation { return false }
            try writer.reset()
            try writer.setValidator(etag)
            s.generation += 1
            s.rangesHonoured = false
            s.claimed = ByteRanges()
            s.resetHash(expectedHash)
            s.etag = etag
            return true
        }
    }

    /// Whether the link of `version` was refused after it had worked, or was replaced since: resolving again
    /// then is a new expiry, not a second refusal of the same fresh link.
    func linkExpired(_ version: Int) -> Bool {
        state.withLock { $0.downloadVersion != version || $0.linkWorked }
    }

    // MARK: Segments

    /// Claims for a segment of `generation` the first chunk (at most `chunkSize` bytes) of `bounds` that is
    /// neither present nor claimed. Nil when the generation is over, the server stopped honouring Range, or
    /// every missing byte is claimed.
    func claim(within bounds: Range<Int64>, chunkSize: Int64, generation: Int) -> Range<Int64>? {
        state.withLock { s in
            guard s.generation == generation, s.rangesHonoured else { return nil }
            var open = writer.missingRanges()
            open.subtract(s.claimed)
            guard let gap = open.ranges.first(where: { $0.overlaps(bounds) })?.clamped(to: bounds) else { return nil }
            let chunk = gap.lowerBound ..< min(gap.upperBound, gap.lowerBound + chunkSize)
            s.claimed.insert(contentsOf: chunk)
            return chunk
        }
    }

    /// Gives `claim` back (its missing bytes, if any, may be claimed again).
    func release(_ claim: Range<Int64>, generation: Int) {
        state.withLock { s in
            if s.generation == generation { s.claimed.remove(contentsOf: claim) }
        }
    }

    /// The first missing part of `claim`, or nil when it is all present or the generation is over. (A segment's
    /// bytes arrive in order, so after a cut connection this is the rest of its claim.)
    func unfetched(of claim: Range<Int64>, generation: Int) -> Range<Int64>? {
        state.withLock { s in
            guard s.generation == generation else { return nil }
            return writer.missingRanges().ranges.first { $0.overlaps(claim) }?.clamped(to: claim)
        }
    }

    // MARK: Hash

    /// Hashes, from the partial file, the bytes that arrived out of order once every byte before them is
    /// present, so that little is left to read at completion. One catch-up at a time (a concurrent call returns
    /// at once); streams do not feed the hash meanwhile. A failed read only ends the catch-up: completion
    /// reads what is left and reports errors.
    func catchUpHash() {
        while true {
            let taken = state.withLock { s -> (from: Int64, to: Int64, hasher: any ContentHasher, epoch: Int)? in
                guard !s.hashBusy, let hasher = s.hasher else { return nil }
                guard let run = writer.presentRanges().ranges.first(where: { $0.contains(s.hashedUpTo) }) else { return nil }
                s.hashBusy = true
                s.hasher = nil
                return (s.hashedUpTo, run.upperBound, hasher, s.hashEpoch)
            }
            guard let taken else { return }
            var hasher = taken.hasher
            var at = taken.from
            let block: Int64 = 1 << 20
            while at < taken.to, let data = try? writer.read(at ..< min(taken.to, at + block)), !data.isEmpty {
                data.withUnsafeBytes { hasher.update($0) }
                at += Int64(data.count)
            }
            let done = state.withLock { s -> Bool in
                guard s.hashEpoch == taken.epoch else { return true }
                s.hasher = hasher
                s.hashedUpTo = at
                s.hashBusy = false
                return at < taken.to
            }
            if done { return }
        }
    }
}

/// Why a stream of a file stopped early. Not an error of the file: the fetch loop chooses again.
enum SegmentStopped: Error {
    /// Another stream restarted the file (a new generation).
    case superseded
}

/// Receives a transfer's bytes: writes them into the cache entry and feeds the hash while they arrive in order.
/// Bytes of a generation that is over are refused (the transfer stops). Runs on the transport's network thread,
/// so it only moves bytes: a `pwrite`, the in-order hash, and a request for a checkpoint that the cache's writer
/// runs later (``EntryWriter/checkpointIfDue()``); a failed write or checkpoint (a full disk) ends this transfer
/// only.
struct JobSink: ByteSink {
    let job: FileJob
    let generation: Int
    let progress: @Sendable (Int64) -> Void

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        let report: Int64 = try job.withState { s in
            // Under the job's lock: a restart cannot slip between this check and the write.
            guard s.generation == generation else { throw SegmentStopped.superseded }
            try job.writer.write(bytes, at: offset)
            if offset == s.hashedUpTo, !s.hashBusy, s.hasher != nil {
                s.hasher?.update(bytes)
                s.hashedUpTo += Int64(bytes.count)
            }
            s.fetched += Int64(bytes.count)
            s.unreportedProgress += Int64(bytes.count)
            guard s.unreportedProgress >= 256 << 10 else { return 0 }
            defer { s.unreportedProgress = 0 }
            return s.unreportedProgress
        }
        if report > 0 { progress(report) }
        try job.writer.checkpointIfDue()
    }

    func acceptsBytes() -> Bool { job.writer.acceptsBytes }

    /// An answer naming another version than the one whose bytes the entry holds writes nothing: the fetcher
    /// sees its head and restarts the file, or stops if its size is not the listed one (``FileFetcher``
    /// `checkSameFile`), so `serve` never reads a mix and a stranger's answer (a network's login page) never
    /// lands in the entry.
    func acceptsVersion(_ head: HTTPResponseHead, totalSize: Int64?) -> Bool {
        if let totalSize, totalSize != job.file.size { return false }
        guard let known = job.etag, let now = head.headers["ETag"] else { return true }
        return EntityTag.sameVersion(known, now) != false
    }

    /// ``FileFetcher/writeBatchBytes``.
    let writeBatchBytes: Int
    /// ``FileFetcher/transferSlots``.
    let slot: TransferSlot?
}

/// Downloads the missing bytes of files with ranged GETs and completes them. One per remote.
///
/// A file of at least `segmentThreshold` bytes is fetched by up to `segments` concurrent streams once a 206
/// has shown that its server honours Range: each stream claims the next chunk nobody fetches yet, so no byte
/// is requested twice and every stream stays busy until the last chunks. Until then, and whenever a stream
/// finds the server ignoring Range or the file restarts, one stream fetches chunk by chunk.
struct FileFetcher: Sendable {
    /// Links resolved in this run, by file version: a file's later passes (its head, then its rest) reuse the
    /// link of the first until it expires or is refused, instead of asking the provider again.
    let links = LinkCache()
    let provider: any Provider
    let transport: any Transport
    let pacer: Pacer
    let chunkSize: Int64
    /// Concurrent streams per file; 1 turns segments off.
    let segments: Int
    /// Files smaller than this are fetched over one stream.
    let segmentThreshold: Int64
    let events: @Sendable (SyncEvent) -> Void
    let logger: Logger
    /// Where the fetcher's own tasks (a link being resolved) run; nil: Swift's global pool.
    var executor: (any TaskExecutor)? = nil
    /// The bytes a transfer gathers before one write (``ByteSink/writeBatchBytes``): a pull's 128 KiB cost ext4
    /// far fewer write calls; `serve` passes 0, so a player waiting for a seek's bytes gets each piece at once.
    var writeBatchBytes = 128 << 10
    /// Most files transferring at once (``TransferSlot``): a pull's `jobs`, while it keeps more files open so their
    /// bookkeeping overlaps other files' transfers. nil: every download starts at once (`serve`'s, which a player
    /// waits for).
    var transferSlots: Int? = nil

    /// Fetches every missing byte of `job` inside `bounds`. With `checkpointAtEnd` the bytes are made durable
    /// (on the cache's writer) before returning; the full pass skips that because promotion syncs the file anyway
    /// (one sync fewer per track), and a failure path checkpoints what arrived.
    /// `streams` (default `segments`) bounds the connections of a file big enough for segments: fewer when other
    /// streams of the same file run beside this pass.
    func fetch(_ job: FileJob, within bounds: Range<Int64>, checkpointAtEnd: Bool = true, streams: Int? = nil) async throws {
        // An encrypted entry stores whole blocks only: fetch the blocks `bounds` touches, so none is left half
        // in memory when this pass ends.
        let bounds = job.writer.aligned(bounds)
        let streams = streams ?? segments
        while nextChunk(job, within: bounds) != nil {
            try Task.checkCancellation()
            do {
                if streams > 1, let generation = segmentGeneration(job) {
                    try await fetchSegments(job, within: bounds, generation: generation, streams: streams)
                } else {
                    try await pacer.run("GET \(job.file.path)", progress: { job.fetched }) {
                        // Chosen on every attempt: a retry after a cut connection resumes after the bytes that
                        // arrived, a retry after a restart starts from 0.
                        let generation = job.generation
                        guard let chunk = nextChunk(job, within: bounds) else { return }
                        try await fetchChunk(job, chunk, generation: generation, segment: false)
                    }
                }
            } catch is SegmentStopped {
                // The file restarted or segments stopped under this stream: choose again.
            }
            try job.writer.checkpointIfDue()
        }
        if checkpointAtEnd { try await job.writer.flush() }
        flushProgress(job)
    }

    /// Fetches every missing byte of `ranges` without making it durable (the caller flushes a head it keeps;
    /// promotion syncs a whole track). Several missing ranges (a head and a tail, a cover's end and a `moov`)
    /// are asked for at once, so they cost one request's latency instead of one each: the first over a lone
    /// stream, up to `segments - 1` others beside it over streams that end before any body byte when the server
    /// answers with the whole file, which the lone stream then reads on from its offset. Whatever is still
    /// missing after that is fetched range after range over one stream.
    func fetch(_ job: FileJob, ranges: ByteRanges) async throws {
        func missing() -> ByteRanges {
            var missing = ByteRanges(ranges.ranges.map(job.writer.aligned))
            missing.subtract(job.writer.presentRanges())
            return missing
        }
        let parts = missing().ranges
        if parts.count > 1, segments > 1, provider.capabilities.supportsRanges {
            try await withThrowingTaskGroup(of: Void.self) { group in
                let beside = parts.dropFirst().prefix(segments - 1)
                for part in beside {
                    group.addTask { try await fetchBeside(job, within: part) }
                }
                // The streams beside count against the file's `segments`.
                try await fetch(job, within: parts[0], checkpointAtEnd: false, streams: segments - beside.count)
                try await group.waitForAll()
            }
        }
        for range in missing().ranges { try await fetch(job, within: range, checkpointAtEnd: false) }
    }

    /// One stream beside another of the same file: fetches `bounds` chunk by chunk (each retried through the
    /// pacer, resuming after the bytes that arrived) until it is present, the file restarts, or the server
    /// ignores Range.
    private func fetchBeside(_ job: FileJob, within bounds: Range<Int64>) async throws {
        do {
            while true {
                try Task.checkCancellation()
                let honoured = try await pacer.run("GET \(job.file.path)", progress: { job.fetched }) { () -> Bool in
                    let generation = job.generation
                    guard let chunk = nextChunk(job, within: bounds) else { return false }
                    return try await fetchChunk(job, chunk, generation: generation, segment: true)
                }
                guard honoured else { return }
                try job.writer.checkpointIfDue()
            }
        } catch is SegmentStopped {
            // The file restarted under this stream: the sequential pass after it fetches what is missing.
        }
    }

    /// Verifies the hash of a fully present file and promotes it into tracks/ (in the cache's next group commit).
    func complete(_ job: FileJob) async throws {
        try verify(job)
        try await job.writer.promote()
    }

    /// Verifies that every byte of `job` is present and has the provider's hash (``EntryWriter/verify``). A
    /// verified file needs no link any more: it leaves ``links``, which otherwise grows by one link per file of
    /// the pull (45 MiB at 100,000 tracks).
    func verify(_ job: FileJob) throws {
        let computed = try finishHash(job)
        try job.writer.verify(expectedHash: job.expectedHash) { _ in computed }
        links.forget(job.file)
    }

    private func nextChunk(_ job: FileJob, within bounds: Range<Int64>) -> Range<Int64>? {
        if job.file.size == 0 {
            // A 0-byte file has nothing to fetch; never send Range for it.
            return nil
        }
        guard let gap = job.writer.missingRanges().ranges.first(where: { $0.overlaps(bounds) })?.clamped(to: bounds) else {
            return nil
        }
        // A provider whose content hosts do not honour Range sends the whole file whatever is asked: one GET per
        // missing run, not one per chunk (each of which would send every byte before it again).
        guard provider.capabilities.supportsRanges else { return gap }
        return gap.lowerBound ..< min(gap.upperBound, gap.lowerBound + chunkSize)
    }

    // MARK: Segments

    /// The generation to run segments in, or nil when `job` is fetched over one stream: segments are off, the
    /// provider does not declare `supportsRanges`, the file is below the threshold, or no 206 of this generation
    /// has shown that the server honours Range yet.
    private func segmentGeneration(_ job: FileJob) -> Int? {
        guard segments > 1, job.file.size >= segmentThreshold, provider.capabilities.supportsRanges else { return nil }
        return job.withState { $0.rangesHonoured ? $0.generation : nil }
    }

    /// Runs `streams` streams until no unclaimed byte of `bounds` is missing, the generation ends, or the
    /// server stops honouring Range. The first error that is not a `SegmentStopped` cancels the other streams
    /// and is rethrown (cancellation included).
    private func fetchSegments(_ job: FileJob, within bounds: Range<Int64>, generation: Int, streams: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0 ..< streams {
                group.addTask { try await runSegment(job, within: bounds, generation: generation) }
            }
            try await group.waitForAll()
        }
    }

    /// One stream: claims a chunk, fetches it (retried through the pacer, resuming after the bytes that
    /// arrived), gives it back, and claims the next.
    private func runSegment(_ job: FileJob, within bounds: Range<Int64>, generation: Int) async throws {
        while let claim = job.claim(within: bounds, chunkSize: chunkSize, generation: generation) {
            defer { job.release(claim, generation: generation) }
            try Task.checkCancellation()
            do {
                try await pacer.run("GET \(job.file.path)", progress: { job.fetched }) {
                    guard let rest = job.unfetched(of: claim, generation: generation) else { return }
                    try await fetchChunk(job, rest, generation: generation, segment: true)
                }
            } catch is SegmentStopped {
                return
            }
            job.catchUpHash()
            try job.writer.checkpointIfDue()
        }
    }

    // MARK: One ranged GET

    /// Fetches `chunk` for `generation` (one attempt, plus one after the link was refused). A `segment` stream
    /// runs beside others, so a 200 (the server ignored Range, or `If-Range` no longer matched) ends its
    /// transfer before any byte: segments stop and the chunk stays missing for the single stream that follows.
    /// A lone stream reads a 200 on, from its offset. Returns whether the server honoured Range (a 206).
    @discardableResult
    private func fetchChunk(_ job: FileJob, _ chunk: Range<Int64>, generation: Int, segment: Bool) async throws -> Bool {
        var refusedOnce = false
        while true {
            let (download, version) = try await currentDownload(job)
            var request = HTTPRequest(method: download.method, url: download.url,
                                      keepsAuthAcrossHosts: download.sendsAuthOnRedirect)
            for h in download.headers { request.headers.add(h.name, h.value) }
            let sink = JobSink(job: job, generation: generation, progress: { bytes in
                events(.progress(remote: job.remote, path: job.file.path, bytes: bytes))
            }, writeBatchBytes: writeBatchBytes, slot: transferSlots.map {
                TransferSlot(file: ObjectIdentifier(job), files: $0, queued: job.requested,
                             startsNow: { [pacer] in !pacer.isPaused })
            })
            let ifRange = job.etag.flatMap(EntityTag.ifRangeValidator)
            let outcome = try await transport.download(request, range: chunk.lowerBound ... chunk.upperBound - 1, ifRange: ifRange,
                                                       whenRangeIgnored: segment ? .stop : .skipToOffset, into: sink)
            let status = outcome.head.status
            switch status {
            case 200, 206:
                try checkSameFile(job, outcome: outcome, generation: generation)
                let segmentsStopped = job.withState { s -> Bool in
                    if s.downloadVersion == version { s.linkWorked = true }
                    guard s.generation == generation else { return false }
                    // A 206 shows that Range is honoured; a 200 to a ranged request, that it is not.
                    let was = s.rangesHonoured
                    s.rangesHonoured = status == 206 && !outcome.rangeIgnored
                    return was && !s.rangesHonoured
                }
                if segment && segmentsStopped {
                    logger.info("\(job.file.path): the server answered a ranged request with the whole file; continuing over one connection")
                }
                return status == 206 && !outcome.rangeIgnored
            case 416:
                if let total = outcome.totalSize, total != job.file.size {
                    throw Self.otherSize(job, total, outcome.head)
                }
                throw ProviderError(.invalidResponse, "the server refused the byte range \(chunk.lowerBound)-\(chunk.upperBound - 1) of \(job.file.path) (416)")
            case _ where [401, 403, 404, 410].contains(status) && (!refusedOnce || job.linkExpired(version)):
                // Links expire and tokens age: resolve again once, then continue from the same offset. Once more
                // only when the link refused now had worked (other streams used it up) or was already replaced.
                // (One `where` for all four statuses: on a multi-pattern case it would guard only the last.)
                refusedOnce = true
                _ = try await currentDownload(job, refused: (download, version, status))
            default:
                let context = "downloading \(job.file.path) from \(outcome.head.url.host ?? "the server")"
                throw ProviderError.fromHTTP(status: status, headers: outcome.head.headers, body: outcome.errorBody, context: context,
                                             remote: job.remote)
                    ?? ProviderError(.invalidResponse, "\(context): unexpected HTTP \(status)", status: status)
            }
        }
    }

    /// Detects a file that changed between requests. A new validator of the listed size: its bytes are dropped
    /// and the download restarts from 0, so versions never mix. Another size: the fetch stops and the cached
    /// bytes stay, since this job cannot fetch a version of another size (the next listing does) and the answer
    /// may not be the file at all. Throws `SegmentStopped` when another stream already restarted the file (this
    /// transfer's bytes were dropped or refused).
    private func checkSameFile(_ job: FileJob, outcome: DownloadOutcome, generation: Int) throws {
        let responseETag = outcome.head.headers["ETag"]
        let (known, current) = job.withState { ($0.etag, $0.generation) }
        guard current == generation else { throw SegmentStopped.superseded }
        if let total = outcome.totalSize, total != job.file.size {
            throw Self.otherSize(job, total, outcome.head)
        }
        if let known, let now = responseETag, EntityTag.sameVersion(known, now) == false {
            guard try job.restart(etag: now, from: generation) else { throw SegmentStopped.superseded }
            job.newVersion?()
            logger.info("\(job.file.path) changed on the server during download (ETag); restarting it from the beginning")
            throw ProviderError(.transient, "\(job.file.path) changed during download; restarting")
        }
        if known == nil, let now = responseETag {
            try job.withState { s in
                if s.generation == generation, s.etag == nil {
                    s.etag = now
                    try job.writer.setValidator(now)
                }
            }
        }
    }

    /// An answer of `total` bytes where the listing has another size: the file changed since it was listed, or
    /// something answered in the cloud's place — a network's login page, a proxy's error page — which an HTML
    /// answer to a request for audio makes the likelier. Its cached bytes are kept either way
    /// (``JobSink/acceptsVersion(_:totalSize:)`` wrote none of the answer).
    static func otherSize(_ job: FileJob, _ total: Int64, _ head: HTTPResponseHead) -> ProviderError {
        let type = head.headers["Content-Type"].map { "\($0.split(separator: ";").first.map(String.init) ?? $0), " } ?? ""
        let host = head.url.host.map { " from \($0)" } ?? ""
        let changed = "the file changed since it was listed (the next pull fetches the new version)"
        let stranger = HTTPResponseHead.strangerAdvice
        return ProviderError(.invalidResponse, "\(job.file.path): the answer\(host) (HTTP \(head.status), \(type)\(total) bytes) is not the listed "
            + "file of \(job.file.size) bytes: " + (head.isHTMLPage ? "\(stranger); or \(changed)" : "\(changed); or \(stranger)")
            + ". The bytes cached so far are kept", status: head.status)
    }

    /// The file's link and its version. Resolved once for all of the file's streams: when there is none or it
    /// is about to expire, or when `refused` names the version the content host refused (401/403/404/410),
    /// one stream asks the provider and the others wait for its answer; a stream whose refused link another
    /// stream already replaced gets the replacement without asking again.
    private func currentDownload(_ job: FileJob, refused: (request: DownloadRequest, version: Int, status: Int)? = nil)
        async throws -> (DownloadRequest, Int) {
        enum Next { case ready(DownloadRequest, Int), wait(Task<DownloadRequest, any Error>) }
        let next = job.withState { s -> Next in
            if let current = s.download {
                if let refused {
                    if s.downloadVersion != refused.version { return .ready(current, s.downloadVersion) }
                } else if (current.expiresAt ?? .distantFuture) > Date().addingTimeInterval(30) {
                    return .ready(current, s.downloadVersion)
                }
            }
            if let resolving = s.resolving { return .wait(resolving) }
            if refused == nil, s.download == nil, let earlier = links.link(for: job.file) {
                s.download = earlier
                s.downloadVersion += 1
                s.linkWorked = false
                if s.etag == nil { s.etag = earlier.etag }
                return .ready(earlier, s.downloadVersion)
            }
            let resolving = Task(executorPreference: executor) { [provider, logger] in
                guard let refused else { return try await provider.resolveDownload(for: job.file) }
                logger.info("\(job.file.path): content host answered \(refused.status); resolving the download again")
                return try await provider.resolveDownload(for: job.file, rejected: refused.request, status: refused.status)
            }
            s.resolving = resolving
            return .wait(resolving)
        }
        switch next {
        case .ready(let download, let version):
            return (download, version)
        case .wait(let resolving):
            let result = await withTaskCancellationHandler {
                await resolving.result
            } onCancel: {
                resolving.cancel()
            }
            return try job.withState { s in
                if s.resolving == resolving {
                    s.resolving = nil
                    if case .success(let fresh) = result {
                        s.download = fresh
                        s.downloadVersion += 1
                        s.linkWorked = false
                        if refused == nil, s.etag == nil { s.etag = fresh.etag }
                        links.store(fresh, for: job.file)
                    }
                }
                let fresh = try result.get()
                return (s.download ?? fresh, s.downloadVersion)
            }
        }
    }

    /// Feeds the hash with the bytes not hashed while arriving (resumed or out of order), read from disk.
    /// Nil when the provider has no hash.
    private func finishHash(_ job: FileJob) throws -> String? {
        guard let expected = job.expectedHash else { return nil }
        let size = job.file.size
        // No catch-up runs once every stream has ended; if one did, start over rather than skip the check.
        var (start, hasher) = job.withState { s -> (Int64, any ContentHasher) in
            guard !s.hashBusy, let hasher = s.hasher else { return (0, makeHasher(for: expected.kind)) }
            return (s.hashedUpTo, hasher)
        }
        let block: Int64 = 1 << 20
        while start < size {
            let data = try job.writer.read(start ..< min(size, start + block))
            data.withUnsafeBytes { hasher.update($0) }
            start += Int64(data.count)
            if data.isEmpty { break }
        }
        return hasher.finalize()
    }

    private func flushProgress(_ job: FileJob) {
        let rest = job.withState { s -> Int64 in
            defer { s.unreportedProgress = 0 }
            return s.unreportedProgress
        }
        if rest > 0 { events(.progress(remote: job.remote, path: job.file.path, bytes: rest)) }
    }
}

/// The links one fetcher resolved, by file version (path and fingerprint); a link about to expire is not handed
/// out. Links carry credentials: they live in memory only and are never logged.
final class LinkCache: Sendable {
    /// The first size at which the expired links are dropped.
    static let pruneAt = 4096

    /// A file version: its path and fingerprint (compared as values, no key text built per lookup).
    private struct Key: Hashable {
        let path: String
        let fingerprint: Fingerprint

        init(_ file: RemoteFile) {
            path = file.path
            fingerprint = file.fingerprint
        }
    }

    private struct State {
        var map: [Key: DownloadRequest] = [:]
        /// The size at which the expired links are dropped next: twice what stayed at the last drop, so a map of
        /// links that do not expire (a budget-limited pull keeps every head-only file's link) is scanned
        /// O(log n) times, not at every store.
        var pruneAt = LinkCache.pruneAt
    }

    private let state = Mutex(State())

    func link(for file: RemoteFile) -> DownloadRequest? {
        let key = Key(file)
        return state.withLock { s in
            guard let link = s.map[key] else { return nil }
            if (link.expiresAt ?? .distantFuture) <= Date().addingTimeInterval(30) {
                s.map[key] = nil
                return nil
            }
            return link
        }
    }

    func store(_ link: DownloadRequest, for file: RemoteFile) {
        let key = Key(file)
        state.withLock { s in
            // A long-running serve streams many files that never complete (their links stay): past a few
            // thousand, the expired ones go.
            if s.map.count >= s.pruneAt {
                let now = Date()
                s.map = s.map.filter { ($0.value.expiresAt ?? .distantFuture) > now }
                s.pruneAt = max(Self.pruneAt, 2 * s.map.count)
            }
            s.map[key] = link
        }
    }

    func forget(_ file: RemoteFile) {
        let key = Key(file)
        state.withLock { $0.map[key] = nil }
    }

    /// How many links are kept.
    var count: Int { state.withLock { $0.map.count } }
}

extension ProviderCapabilities {
    /// The hash the engine verifies a download of `file` with: the strongest one of a kind in `hashKinds` (a hash of a
    /// kind the provider does not declare is not trusted). A provider that declares no kinds up front (WebDAV learns
    /// them from its server's answers) gets the strongest the file carries.
    public func hashToVerify(for file: RemoteFile) -> ContentHash? {
        if hashKinds.isEmpty { return file.preferredHash }
        var declared = file
        declared.hashes = file.hashes.filter { hashKinds.contains($0.kind) }
        return declared.preferredHash
    }
}
