import CloudSyncCache
import CloudSyncCore
@testable import CloudSyncEngine
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
import TestSupport

// The engine honours what a provider declares in `ProviderCapabilities`: each test runs the same in-process fake
// provider with one capability switched, and shows the engine's behaviour follow it.

/// A provider served from memory: one `.full` page with `files` and `cursor`, downloads from `contents`.
/// Records the cursor each listing was asked with.
private final class MemoryProvider: Provider {
    let remoteName = "mem"
    let capabilities: ProviderCapabilities
    let files: [RemoteFile]
    let cursor: String?
    private let asked = Mutex<[String?]>([])

    init(capabilities: ProviderCapabilities, files: [RemoteFile] = [], cursor: String? = nil) {
        self.capabilities = capabilities
        self.files = files
        self.cursor = cursor
    }

    var cursorsAsked: [String?] { asked.withLock { $0 } }

    func listAudio(cursor: String?) -> AsyncThrowingStream<ListingPage, Error> {
        asked.withLock { $0.append(cursor) }
        let page = ListingPage(kind: .full, upserts: files, cursor: self.cursor)
        return ListingPage.stream { yield in yield(page) }
    }

    func resolveDownload(for file: RemoteFile) async throws -> DownloadRequest {
        guard let url = URL(string: "http://content.invalid/\(file.path)") else { throw TestFailure("bad path") }
        return DownloadRequest(url: url)
    }
}

/// A transport that serves `contents` by path and honours Range (206 with the asked bytes); records each range asked.
private final class MemoryTransport: Transport {
    let contents: [String: Data]
    private let asked = Mutex<[ClosedRange<Int64>?]>([])

    init(_ contents: [String: Data]) { self.contents = contents }

    var rangesAsked: [ClosedRange<Int64>?] { asked.withLock { $0 } }

    func send(_ request: HTTPRequest, into sink: any ResponseBodySink) async throws -> HTTPResponse {
        HTTPResponse(head: HTTPResponseHead(status: 404, headers: HTTPHeaders(), url: request.url), body: Data())
    }

    func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?, whenRangeIgnored: IgnoredRange,
                  into sink: any ByteSink) async throws -> DownloadOutcome {
        asked.withLock { $0.append(range) }
        let path = String(request.url.path.dropFirst())
        guard let body = contents[path] else {
            return DownloadOutcome(head: HTTPResponseHead(status: 404, headers: HTTPHeaders(), url: request.url),
                                   delivered: 0 ..< 0, rangeIgnored: false, totalSize: nil)
        }
        let size = Int64(body.count)
        let wanted = range.map { $0.lowerBound ..< min(size, $0.upperBound + 1) } ?? 0 ..< size
        let slice = body.subdata(in: Int(wanted.lowerBound) ..< Int(wanted.upperBound))
        try slice.withUnsafeBytes { try sink.write($0, at: wanted.lowerBound) }
        var headers = HTTPHeaders()
        headers.add("ETag", "\"v1\"")
        if range != nil { headers.add("Content-Range", "bytes \(wanted.lowerBound)-\(wanted.upperBound - 1)/\(size)") }
        return DownloadOutcome(head: HTTPResponseHead(status: range == nil ? 200 : 206, headers: headers, url: request.url),
                               delivered: wanted, rangeIgnored: false, totalSize: size)
    }
}

private func remoteFile(_ path: String, _ data: Data, hashes: [ContentHash]) -> RemoteFile {
    RemoteFile(path: path, size: Int64(data.count), modified: Date(timeIntervalSince1970: 1_700_000_000), revision: "v1",
               hashes: hashes, mimeType: nil)
}

private func bytes(_ count: Int, seed: UInt8) -> Data {
    Data((0 ..< count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
}

private func sync(_ provider: MemoryProvider, _ transport: MemoryTransport, cache: Cache, options: SyncOptions = SyncOptions()) -> Sync {
    Sync(remote: "mem", providerName: "memory", provider: provider, transport: transport, pacer: Pacer(policy: .init(retries: 0)),
         cache: cache, options: options, logger: .silent, events: { _ in })
}

@Suite("the engine honours ProviderCapabilities")
struct CapabilityTests {
    @Test("hasChangeFeed: only a provider with a feed is given the stored cursor, and only its cursor is stored",
          arguments: [true, false])
    func changeFeed(hasFeed: Bool) async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let provider = MemoryProvider(capabilities: ProviderCapabilities(hashKinds: [], hasChangeFeed: hasFeed), cursor: "c1")
        let transport = MemoryTransport([:])
        _ = try await sync(provider, transport, cache: cache).run()
        _ = try await sync(provider, transport, cache: cache).run()
        #expect(provider.cursorsAsked == (hasFeed ? [nil, "c1"] : [nil, nil]))
        #expect(try cache.cursor(remote: "mem") == (hasFeed ? "c1" : nil))
    }

    @Test("supportsRanges: chunked and segmented when true; one GET for the missing run when false",
          arguments: [true, false])
    func ranges(supportsRanges: Bool) async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let chunk: Int64 = 64 << 10
        let data = bytes(Int(chunk) * 3 + 100, seed: 7)
        let file = remoteFile("a.mp3", data, hashes: [])
        try cache.upsert(remote: "mem", files: [file])
        let capabilities = ProviderCapabilities(hashKinds: [], hasChangeFeed: false, supportsRanges: supportsRanges)
        let provider = MemoryProvider(capabilities: capabilities, files: [file])
        let transport = MemoryTransport(["a.mp3": data])
        let fetcher = FileFetcher(provider: provider, transport: transport, pacer: Pacer(policy: .init(retries: 0)),
                                  chunkSize: chunk, segments: 4, segmentThreshold: 1, events: { _ in }, logger: .silent)
        let writer = try cache.openWriter(remote: "mem", path: "a.mp3")
        let job = FileJob(remote: "mem", file: file, writer: writer, capabilities: capabilities)
        try await fetcher.fetch(job, within: 0 ..< file.size)
        #expect(writer.missingRanges().ranges.isEmpty)
        let asked = transport.rangesAsked.compactMap { $0 }
        if supportsRanges {
            #expect(asked.count == 4, "one GET per chunk: \(asked)")
            #expect(asked.allSatisfy { Int64($0.count) <= chunk })
        } else {
            #expect(asked == [0 ... file.size - 1], "the whole missing run in one GET: \(asked)")
        }
        try await fetcher.complete(job)
        writer.close()
    }

    /// The fetcher keeps a file's resolved link for its later passes (head, then the rest), and forgets it once
    /// the file is verified: a pull of 100,000 tracks held one link per track before.
    @Test func aVerifiedFilesLinkIsForgotten() async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let data = bytes(200_000, seed: 3)
        let files = [remoteFile("a.mp3", data, hashes: []), remoteFile("b.mp3", data, hashes: [])]
        try cache.upsert(remote: "mem", files: files)
        let capabilities = ProviderCapabilities(hashKinds: [], hasChangeFeed: false, supportsRanges: true)
        let provider = MemoryProvider(capabilities: capabilities, files: files)
        let fetcher = FileFetcher(provider: provider, transport: MemoryTransport(["a.mp3": data, "b.mp3": data]),
                                  pacer: Pacer(policy: .init(retries: 0)), chunkSize: 64 << 10, segments: 1, segmentThreshold: 1 << 30,
                                  events: { _ in }, logger: .silent)
        var jobs: [FileJob] = []
        for file in files {
            let job = FileJob(remote: "mem", file: file, writer: try cache.openWriter(remote: "mem", path: file.path),
                              capabilities: capabilities)
            try await fetcher.fetch(job, within: 0 ..< 1000)
            jobs.append(job)
        }
        #expect(fetcher.links.count == 2, "both heads fetched, both links kept for the rest")
        try await fetcher.fetch(jobs[0], within: 0 ..< files[0].size)
        try await fetcher.complete(jobs[0])
        #expect(fetcher.links.count == 1, "a.mp3 is verified: its link is gone; b.mp3's stays")
        for job in jobs { job.writer.close() }
    }

    /// Past `LinkCache.pruneAt` links (a serve streaming many files it never completes), storing one drops the
    /// expired ones; links still valid stay.
    @Test func manyLinksDropTheExpiredOnes() {
        let cache = LinkCache()
        let url = URL(string: "https://content.example/x")!
        func file(_ i: Int) -> RemoteFile { remoteFile("t\(i).mp3", Data([1]), hashes: []) }
        cache.store(DownloadRequest(url: url, expiresAt: Date().addingTimeInterval(3600)), for: file(0))
        for i in 1 ..< LinkCache.pruneAt { cache.store(DownloadRequest(url: url, expiresAt: Date().addingTimeInterval(-1)), for: file(i)) }
        #expect(cache.count == LinkCache.pruneAt)
        cache.store(DownloadRequest(url: url), for: file(LinkCache.pruneAt))
        #expect(cache.count == 2)
        #expect(cache.link(for: file(0)) != nil)
    }

    /// A link belongs to one version of one file: another path, size, modification second or revision gets none;
    /// the same version does, also when its ETag is marked weak (Apache, for a second after a write).
    @Test("a link is handed out for its file version only",
          arguments: [
              ("a.mp3", Int64(10), 1_700_000_000.4, "\"v1\"", true),
              ("a.mp3", Int64(10), 1_700_000_000.9, "W/\"v1\"", true),
              ("b.mp3", Int64(10), 1_700_000_000.4, "\"v1\"", false),
              ("A.mp3", Int64(10), 1_700_000_000.4, "\"v1\"", false),
              ("a.mp3", Int64(11), 1_700_000_000.4, "\"v1\"", false),
              ("a.mp3", Int64(10), 1_700_000_001.0, "\"v1\"", false),
              ("a.mp3", Int64(10), 1_700_000_000.4, "\"v2\"", false),
          ])
    func linkPerVersion(path: String, size: Int64, modified: Double, revision: String, found: Bool) {
        let cache = LinkCache()
        let stored = RemoteFile(path: "a.mp3", size: 10, modified: Date(timeIntervalSince1970: 1_700_000_000), revision: "\"v1\"")
        cache.store(DownloadRequest(url: URL(string: "https://content.example/a")!), for: stored)
        let asked = RemoteFile(path: path, size: size, modified: Date(timeIntervalSince1970: modified), revision: revision)
        #expect((cache.link(for: asked) != nil) == found)
        cache.forget(asked)
        #expect((cache.link(for: stored) != nil) == !found, "forget drops only its own version")
    }

    @Test("hashKinds: the strongest hash of a declared kind is the one verified; an empty set trusts any",
          arguments: [
              (Set<HashKind>([.md5]), HashKind?.some(.md5)),
              (Set<HashKind>([.sha256, .md5]), HashKind?.some(.sha256)),
              (Set<HashKind>([.quickXor]), HashKind?.none),
              (Set<HashKind>(), HashKind?.some(.sha256)),
          ])
    func hashChoice(declared: Set<HashKind>, verified: HashKind?) {
        let file = remoteFile("a.mp3", Data("x".utf8), hashes: [ContentHash(kind: .md5, value: "m"), ContentHash(kind: .sha256, value: "s")])
        #expect(ProviderCapabilities(hashKinds: declared, hasChangeFeed: false).hashToVerify(for: file)?.kind == verified)
    }

    @Test("hashKinds: a pull verifies with the declared kind; a wrong hash of an undeclared kind does not fail the file",
          arguments: [true, false])
    func hashVerifiedByPull(declareMD5Only: Bool) async throws {
        let dir = try TemporaryDirectory()
        let cache = try Cache.open(root: dir.url.appendingPathComponent("cache"))
        let data = bytes(200_000, seed: 3)
        // The MD5 is right, the SHA-256 is not: only a pull that trusts SHA-256 fails.
        let file = remoteFile("a.mp3", data, hashes: [ContentHash(kind: .md5, value: contentHash(of: data, kind: .md5)),
                                                      ContentHash(kind: .sha256, value: String(repeating: "0", count: 64))])
        let declared: Set<HashKind> = declareMD5Only ? [.md5] : [.md5, .sha256]
        let provider = MemoryProvider(capabilities: ProviderCapabilities(hashKinds: declared, hasChangeFeed: false), files: [file])
        let report = try await sync(provider, MemoryTransport(["a.mp3": data]), cache: cache).run()
        if declareMD5Only {
            #expect(report.failed.isEmpty, "\(report.failed)")
            #expect(try cache.entry(remote: "mem", path: "a.mp3")?.state == .complete)
        } else {
            #expect(report.failed.map(\.path) == ["a.mp3"])
        }
    }
}
