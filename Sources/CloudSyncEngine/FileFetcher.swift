import CloudSyncCache
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization

/// Everything a file's download needs across passes (head-first, then the rest): the cache writer, the
/// resolved link, the validator for `If-Range`, and the in-order hash of the bytes received so far.
final class FileJob: Sendable {
    let remote: String
    let file: RemoteFile
    let writer: EntryWriter
    /// The provider's best hash, verified at completion; nil when the provider publishes none (then the size
    /// and the ETag checks on every range are what guard the bytes).
    let expectedHash: ContentHash?
    private let state: Mutex<State>

    struct State {
        var download: DownloadRequest?
        var etag: String?
        var hasher: (any ContentHasher)?
        /// Bytes [0, hashedUpTo) are in `hasher`.
        var hashedUpTo: Int64 = 0
        var fetched: Int64 = 0
        var unreportedProgress: Int64 = 0
    }

    init(remote: String, file: RemoteFile, writer: EntryWriter) {
        self.remote = remote
        self.file = file
        self.writer = writer
        expectedHash = file.preferredHash
        state = Mutex(State(hasher: file.preferredHash.map { makeHasher(for: $0.kind) }))
    }

    var fetched: Int64 { state.withLock { $0.fetched } }
    var etag: String? { state.withLock { $0.etag } }

    func withState<T>(_ body: (inout State) throws -> T) rethrows -> T { try state.withLock { try body(&$0) } }

    /// Forgets every byte and the hash: the remote file changed under us.
    func restart(etag: String?) throws {
        try writer.reset()
        state.withLock {
            $0.hasher = expectedHash.map { makeHasher(for: $0.kind) }
            $0.hashedUpTo = 0
            $0.etag = etag
        }
    }
}

/// Receives a transfer's bytes: writes them into the cache entry and feeds the hash while they arrive in order.
struct JobSink: ByteSink {
    let job: FileJob
    let progress: @Sendable (Int64) -> Void

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        try job.writer.write(bytes, at: offset)
        let report: Int64 = job.withState { s in
            if offset == s.hashedUpTo, s.hasher != nil {
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
}

/// Downloads the missing bytes of files with ranged GETs and completes them. One per remote.
struct FileFetcher: Sendable {
    let provider: any Provider
    let transport: any Transport
    let pacer: Pacer
    let chunkSize: Int64
    let events: @Sendable (SyncEvent) -> Void
    let logger: Logger

    /// Fetches every missing byte of `job` inside `bounds`. With `checkpointAtEnd` the bytes are made durable
    /// before returning; the full pass skips that because promotion fsyncs the file anyway (one sync fewer
    /// per track), and a failure path checkpoints what arrived.
    func fetch(_ job: FileJob, within bounds: Range<Int64>, checkpointAtEnd: Bool = true) async throws {
        while nextChunk(job, within: bounds) != nil {
            try Task.checkCancellation()
            try await pacer.run("GET \(job.file.path)") {
                // Chosen on every attempt: a retry after a cut connection resumes after the bytes that arrived.
                guard let chunk = nextChunk(job, within: bounds) else { return }
                try await fetchChunk(job, chunk)
            }
            try job.writer.checkpointIfDue()
        }
        if checkpointAtEnd { try job.writer.checkpoint() }
        flushProgress(job)
    }

    /// Verifies the hash of a fully present file and promotes it into tracks/.
    func complete(_ job: FileJob) async throws {
        let computed = try finishHash(job)
        try job.writer.complete(expectedHash: job.expectedHash) { _ in computed }
    }

    private func nextChunk(_ job: FileJob, within bounds: Range<Int64>) -> Range<Int64>? {
        if job.file.size == 0 {
            // A 0-byte file has nothing to fetch; never send Range for it.
            return nil
        }
        guard let gap = job.writer.missingRanges().ranges.first(where: { $0.overlaps(bounds) })?.clamped(to: bounds) else {
            return nil
        }
        return gap.lowerBound ..< min(gap.upperBound, gap.lowerBound + chunkSize)
    }

    private func fetchChunk(_ job: FileJob, _ chunk: Range<Int64>) async throws {
        var refusedOnce = false
        while true {
            let download = try await resolvedDownload(job)
            var request = HTTPRequest(method: download.method, url: download.url,
                                      keepsAuthAcrossHosts: download.sendsAuthOnRedirect)
            for h in download.headers { request.headers.add(h.name, h.value) }
            let sink = JobSink(job: job) { bytes in
                events(.progress(remote: job.remote, path: job.file.path, bytes: bytes))
            }
            let ifRange = job.etag.flatMap(strongETag)
            let outcome = try await transport.download(request, range: chunk.lowerBound ... chunk.upperBound - 1,
                                                       ifRange: ifRange, into: sink)
            let status = outcome.head.status
            switch status {
            case 200, 206:
                try checkSameFile(job, outcome: outcome, sentIfRange: ifRange)
                return
            case 416:
                if let total = outcome.totalSize, total != job.file.size {
                    try job.restart(etag: nil)
                    throw ProviderError(.invalidResponse, "\(job.file.path) changed size on the server during download (\(total) bytes now, \(job.file.size) listed); the next pull will fetch the new version")
                }
                throw ProviderError(.invalidResponse, "the server refused the byte range \(chunk.lowerBound)-\(chunk.upperBound - 1) of \(job.file.path) (416)")
            case _ where [401, 403, 404, 410].contains(status) && !refusedOnce:
                // Links expire and tokens age: resolve again once, then continue from the same offset.
                // (One `where` for all four statuses: on a multi-pattern case it would guard only the last.)
                refusedOnce = true
                logger.info("\(job.file.path): content host answered \(status); resolving the download again")
                let fresh = try await provider.resolveDownload(for: job.file, rejected: download, status: status)
                job.withState { $0.download = fresh }
            default:
                let context = "downloading \(job.file.path) from \(outcome.head.url.host ?? "the server")"
                throw ProviderError.fromHTTP(status: status, headers: outcome.head.headers, body: outcome.errorBody, context: context)
                    ?? ProviderError(.invalidResponse, "\(context): unexpected HTTP \(status)", status: status)
            }
        }
    }

    /// Detects a file that changed between requests: a new validator or size. Its bytes are dropped and the
    /// download restarts from 0, so versions never mix.
    private func checkSameFile(_ job: FileJob, outcome: DownloadOutcome, sentIfRange: String?) throws {
        let responseETag = outcome.head.headers["ETag"]
        if let total = outcome.totalSize, total != job.file.size {
            try job.restart(etag: nil)
            throw ProviderError(.invalidResponse, "\(job.file.path) is \(total) bytes on the server but was listed with \(job.file.size); it changed during the pull and will be fetched again next time")
        }
        if let known = job.etag, let now = responseETag, sameVersion(known, now) == false {
            logger.info("\(job.file.path) changed on the server during download (ETag); restarting it from the beginning")
            try job.restart(etag: now)
            throw ProviderError(.transient, "\(job.file.path) changed during download; restarting")
        }
        if job.etag == nil, let now = responseETag {
            job.withState { $0.etag = now }
        }
    }

    private func resolvedDownload(_ job: FileJob) async throws -> DownloadRequest {
        if let current = job.withState({ $0.download }), (current.expiresAt ?? .distantFuture) > Date().addingTimeInterval(30) {
            return current
        }
        let fresh = try await provider.resolveDownload(for: job.file)
        job.withState { s in
            s.download = fresh
            if s.etag == nil { s.etag = fresh.etag }
        }
        return fresh
    }

    /// Feeds the hash with the bytes not hashed while arriving (resumed or out of order), read from disk.
    /// Nil when the provider has no hash.
    private func finishHash(_ job: FileJob) throws -> String? {
        let size = job.file.size
        var start = job.withState { $0.hashedUpTo }
        guard var hasher = job.withState({ $0.hasher }) else { return nil }
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

/// Whether two ETags name the same version, ignoring a weak prefix (Apache reports `W/"x"` for a second
/// after a write, then `"x"`).
func sameVersion(_ a: String, _ b: String) -> Bool {
    func plain(_ t: String) -> Substring { t.hasPrefix("W/") ? t.dropFirst(2) : Substring(t) }
    return plain(a) == plain(b)
}

/// The ETag if it is strong (usable in `If-Range`), else nil.
func strongETag(_ etag: String) -> String? {
    let t = etag.trimmingCharacters(in: .whitespaces)
    return t.hasPrefix("W/") || t.isEmpty ? nil : t
}
