import CloudSyncCore
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CloudSyncHTTP

@Suite(.timeLimit(.minutes(2)))
struct TransportTests {
    let transport: CurlTransport

    init() throws { transport = try CurlTransport() }

    @Test func rangedDownloadWritesExactlyTheRange() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/data/100000")), range: 1000...50999,
                                               ifRange: "\"v1-100000\"", into: sink)
        #expect(out.head.status == 206)
        #expect(out.delivered == 1000..<51000)
        #expect(!out.rangeIgnored)
        #expect(out.totalSize == 100000)
        #expect(sink.assembled(1000..<51000) == served(100000, from: 1000, to: 51000))
    }

    /// A sink that takes no bytes for a while pauses the transfer (no error, no byte lost or repeated), and the
    /// loop resumes it once the sink takes bytes again; other transfers on the loop go on meanwhile.
    @Test func aSinkThatHoldsBackPausesItsTransferOnly() async throws {
        final class HoldingSink: ByteSink {
            let memory = MemorySink()
            let holding = Atomic<Bool>(false)
            let refusals = Atomic<Int>(0)
            func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
                let refused = holding.load(ordering: .relaxed)
                #expect(!refused, "a write reached a sink that refused bytes")
                try memory.write(bytes, at: offset)
                // Refuse after the first write, until the test lets go.
                holding.store(true, ordering: .relaxed)
            }
            func acceptsBytes() -> Bool {
                if holding.load(ordering: .relaxed) { refusals.add(1, ordering: .relaxed); return false }
                return true
            }
        }
        let server = try await faultServer()
        let held = HoldingSink()
        let size = 4 << 20
        async let heldDownload = transport.download(HTTPRequest(url: server.url("/data/\(size)")), range: nil, ifRange: nil, into: held)
        // While it is held, another download on the same loop completes.
        while held.refusals.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let other = MemorySink()
        _ = try await transport.download(HTTPRequest(url: server.url("/data/100000")), range: nil, ifRange: nil, into: other)
        #expect(other.assembled(0 ..< 100000) == served(100000))
        #expect(held.memory.count < size)
        // Let go whenever it is asked again, until the body is in.
        let release = Task {
            while !Task.isCancelled {
                held.holding.store(false, ordering: .relaxed)
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        let out = try await heldDownload
        release.cancel()
        #expect(out.delivered == 0 ..< Int64(size))
        #expect(held.memory.assembled(0 ..< Int64(size)) == served(size))
        #expect(held.refusals.load(ordering: .relaxed) >= 1)
    }

    @Test func rangeRunningPastTheEndIsClampedByTheServer() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/data/3000")), range: 2000...8191, ifRange: nil, into: sink)
        #expect(out.head.status == 206)
        #expect(out.delivered == 2000..<3000)
        #expect(sink.assembled(2000..<3000) == served(3000, from: 2000))
    }

    @Test func wholeFileWithoutRange() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/data/300000")), range: nil, ifRange: nil, into: sink)
        #expect(out.head.status == 200)
        #expect(out.delivered == 0..<300000)
        #expect(out.totalSize == 300000)
        #expect(sink.assembled(0..<300000) == served(300000))
    }

    @Test func serverIgnoringRangeNeverWritesBeforeTheOffset() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/norange/200000")), range: 150000...159999,
                                               ifRange: nil, into: sink)
        #expect(out.head.status == 200)
        #expect(out.rangeIgnored)
        #expect(out.delivered == 150000..<200000)
        #expect(sink.lowestOffset == 150000)
        #expect(sink.assembled(150000..<200000) == served(200000, from: 150000))
    }

    @Test func serverIgnoringRangeStopsAtTheHeadWhenAsked() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/norange/200000")), range: 150000...159999,
                                               ifRange: nil, whenRangeIgnored: .stop, into: sink)
        #expect(out.head.status == 200)
        #expect(out.rangeIgnored)
        #expect(out.delivered.isEmpty)
        #expect(out.totalSize == 200000)
        #expect(sink.count == 0)
        // The transport stays usable; a 206 is read as usual with the same setting.
        let ranged = MemorySink()
        let ok = try await transport.download(HTTPRequest(url: server.url("/data/200000")), range: 1000...1999,
                                              ifRange: nil, whenRangeIgnored: .stop, into: ranged)
        #expect(ok.head.status == 206)
        #expect(ranged.assembled(1000..<2000) == served(200000, from: 1000).prefix(1000))
    }

    /// A sink that refuses the answer's version (`ByteSink.acceptsVersion`, a new ETag or size for a cache entry)
    /// gets no byte of it, 206 or 200 alike, and is asked once per answer with the size the answer names (the
    /// 206's `Content-Range` total, the 200's `Content-Length`); the transport stays usable.
    @Test func aRefusedVersionWritesNothing() async throws {
        let server = try await faultServer()
        let ranged = MemorySink(refusesVersions: true)
        let part = try await transport.download(HTTPRequest(url: server.url("/data/200000")), range: 1000...1999, ifRange: nil, into: ranged)
        #expect(part.head.status == 206 && part.delivered.isEmpty && !part.rangeIgnored)
        #expect(ranged.count == 0 && ranged.offered == [206] && ranged.offeredSizes == [200000])
        let ignored = MemorySink(refusesVersions: true)
        let whole = try await transport.download(HTTPRequest(url: server.url("/norange/200000")), range: 150000...159999, ifRange: nil, into: ignored)
        #expect(whole.head.status == 200 && whole.delivered.isEmpty && whole.rangeIgnored)
        #expect(ignored.count == 0 && ignored.offered == [200] && ignored.offeredSizes == [200000])
        let taken = MemorySink()
        let ok = try await transport.download(HTTPRequest(url: server.url("/data/200000")), range: 1000...1999, ifRange: nil, into: taken)
        #expect(ok.head.status == 206 && taken.offered == [206])
        #expect(taken.assembled(1000..<2000) == served(200000, from: 1000).prefix(1000))
    }

    @Test func mismatchedContentRangeWritesNothing() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let error = await #expect(throws: ProviderError.self) {
            try await transport.download(HTTPRequest(url: server.url("/badrange/10000")), range: 100...199, ifRange: nil, into: sink)
        }
        #expect(error?.code == .invalidResponse)
        #expect(sink.count == 0)
    }

    @Test func unsatisfiableRangeReportsTheSize() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/data/500")), range: 500...999, ifRange: nil, into: sink)
        #expect(out.head.status == 416)
        #expect(out.totalSize == 500)
        #expect(out.delivered.isEmpty)
        #expect(sink.count == 0)
    }

    @Test func errorStatusesReturnABoundedBodyAndWriteNothing() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/status/404")), range: 0...10, ifRange: nil, into: sink)
        #expect(out.head.status == 404)
        #expect(String(decoding: out.errorBody, as: UTF8.self) == "status 404")
        #expect(sink.count == 0)
    }

    @Test func cutConnectionIsTransientAndSaysWhatArrived() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let error = await #expect(throws: ProviderError.self) {
            try await transport.download(HTTPRequest(url: server.url("/cut/100000?after=30000")), range: 10000...99999,
                                         ifRange: nil, into: sink)
        }
        #expect(error?.code == .transient)
        #expect(error?.message.contains("127.0.0.1") == true)
        #expect(error?.message.contains("after=") == false)
        let interrupted = try #require(error?.cause as? InterruptedTransfer)
        #expect(interrupted.delivered == 10000..<40000)
        #expect(sink.assembled(10000..<40000) == served(100000, from: 10000, to: 40000))
    }

    /// A sink that asks for batches (`writeBatchBytes`) gets the body in writes of up to that size instead of
    /// libcurl's pieces of at most 16 KiB: each write but the last is flushed only when the next piece no longer
    /// fits, and the bytes are the same.
    @Test func aBatchingSinkGetsFewBigWritesOfTheSameBytes() async throws {
        let server = try await faultServer()
        let size = 4 << 20, batch = 128 << 10
        let sink = MemorySink(batch: batch)
        let out = try await transport.download(HTTPRequest(url: server.url("/data/\(size)")), range: nil, ifRange: nil, into: sink)
        #expect(out.delivered == 0 ..< Int64(size))
        #expect(sink.assembled(0 ..< Int64(size)) == served(size))
        let sizes = sink.sizes
        #expect(sizes.allSatisfy { $0 <= batch })
        #expect(sizes.dropLast().allSatisfy { $0 > batch - (16 << 10) }, "write sizes: \(sizes)")
        // Without a batch the same body comes in libcurl's pieces.
        let plain = MemorySink()
        _ = try await transport.download(HTTPRequest(url: server.url("/data/\(size)")), range: nil, ifRange: nil, into: plain)
        #expect(plain.sizes.count > sizes.count)
    }

    /// A cut transfer writes what it gathered before it reports what arrived, so a resume starts right after it.
    @Test func aCutTransferWritesItsBatchBeforeSayingWhatArrived() async throws {
        let server = try await faultServer()
        let sink = MemorySink(batch: 128 << 10)
        let error = await #expect(throws: ProviderError.self) {
            try await transport.download(HTTPRequest(url: server.url("/cut/100000?after=30000")), range: 10000...99999,
                                         ifRange: nil, into: sink)
        }
        let interrupted = try #require(error?.cause as? InterruptedTransfer)
        #expect(interrupted.delivered == 10000..<40000)
        #expect(sink.assembled(10000..<40000) == served(100000, from: 10000, to: 40000))
    }

    /// A cancelled transfer writes what it gathered too (the file's checkpoint keeps it).
    @Test func aCancelledTransferWritesItsBatch() async throws {
        let server = try await faultServer()
        // Batches of 32 KiB: the first is written while the transfer runs, the 17,232 bytes after it only when it
        // ends. The server sends its 50,000 bytes in one write, so once the first batch is in the rest has arrived.
        let sink = MemorySink(batch: 32 << 10)
        let task = Task {
            try await transport.download(HTTPRequest(url: server.url("/stall/100000?after=50000")), range: nil, ifRange: nil, into: sink)
        }
        while sink.count < 32 << 10 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(300))
        #expect(sink.count < 50000, "the last batch is written before the transfer ends")
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(sink.assembled(0 ..< 50000) == served(100000, to: 50000))
    }

    @Test func fileChangedBetweenRangesRestartsWithTheNewVersion() async throws {
        let server = try await faultServer()
        let size = 50000 + Int.random(in: 0..<1000)  // a path of its own: versions count per size
        let first = MemorySink()
        let a = try await transport.download(HTTPRequest(url: server.url("/changing/\(size)")), range: 0...9999, ifRange: nil, into: first)
        let etag = try #require(a.head.headers["ETag"])
        #expect(a.head.status == 206)
        let second = MemorySink()
        let b = try await transport.download(HTTPRequest(url: server.url("/changing/\(size)")), range: 10000...19999, ifRange: etag, into: second)
        #expect(b.head.status == 200)
        #expect(b.rangeIgnored)
        #expect(b.head.headers["ETag"] != etag)
        #expect(second.lowestOffset == 10000)
        #expect(second.assembled(10000..<Int64(size)) == served(size, version: 2, from: 10000))
    }

    @Test func sinkErrorsAbortAndAreRethrownUnchanged() async throws {
        let server = try await faultServer()
        let sink = MemorySink(failAfter: 1)
        await #expect(throws: MemorySink.Failure()) {
            try await transport.download(HTTPRequest(url: server.url("/data/4000000")), range: nil, ifRange: nil, into: sink)
        }
    }

    @Test func cancellationAbortsAStalledTransfer() async throws {
        let server = try await faultServer()
        let sink = MemorySink()
        let task = Task {
            try await transport.download(HTTPRequest(url: server.url("/stall/100000?after=1000")), range: nil, ifRange: nil, into: sink)
        }
        while sink.count < 1000 { try await Task.sleep(for: .milliseconds(10)) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func manyConcurrentDownloadsShareTheLoop() async throws {
        let server = try await faultServer()
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<40 {
                group.addTask {
                    let sink = MemorySink()
                    let size = 10000 + i * 977
                    _ = try await transport.download(HTTPRequest(url: server.url("/data/\(size)")), range: 5...Int64(size - 1),
                                                     ifRange: nil, into: sink)
                    return sink.assembled(5..<Int64(size)) == served(size, from: 5)
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }

    /// File slots (``TransferSlot``), two of them: a third file's download waits in the transport (it never
    /// reaches the server) until a file's last transfer ends; a second stream of a transferring file starts at
    /// once; a waiting download that is cancelled throws `CancellationError` and never starts; a file that
    /// transferred lately starts before a new file that waited longer; and a waiting download whose remote was
    /// paused meanwhile (`startsNow` false) fails with `Deferred` instead of starting.
    @Test func fileSlotsBoundTheFilesTransferringAtOnce() async throws {
        struct SlotSink: ByteSink {
            let slot: TransferSlot?
            func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {}
        }
        final class File: Sendable {}
        // The server holds each request until the test lets its name go.
        let arrived = Mutex<[String]>([])
        let released = Mutex<Set<String>>([])
        let server = try LoopbackHTTPServer { request in
            let name = String(request.target.dropFirst("/f/".count))
            arrived.withLock { $0.append(name) }
            for _ in 0 ..< 20_000 where !released.withLock({ $0.contains(name) }) { usleep(1000) }
            return .init(status: 200, body: Data("x".utf8))
        }
        func arrivedNow() -> [String] { arrived.withLock { $0 } }
        func waitFor(_ name: String) async throws {
            while !arrivedNow().contains(name) { try await Task.sleep(for: .milliseconds(2)) }
        }
        let (a, b, c, d, e) = (File(), File(), File(), File(), File())
        func get(_ name: String, _ file: File, startsNow: (@Sendable () -> Bool)? = nil) -> Task<Int, any Error> {
            let sink = SlotSink(slot: TransferSlot(file: ObjectIdentifier(file), files: 2, startsNow: startsNow))
            return Task {
                try await transport.download(HTTPRequest(url: server.url("/f/\(name)")), range: nil, ifRange: nil,
                                             into: sink).head.status
            }
        }
        let a1 = get("a1", a), b1 = get("b1", b)
        try await waitFor("a1")
        try await waitFor("b1")
        let c1 = get("c1", c)
        let a2 = get("a2", a)  // another stream of a file that holds a slot
        try await waitFor("a2")
        let d1 = get("d1", d)
        let e1 = get("e1", e)
        try await Task.sleep(for: .milliseconds(50))
        e1.cancel()
        await #expect(throws: CancellationError.self) { try await e1.value }
        #expect(Set(arrivedNow()) == ["a1", "b1", "a2"], "files beyond the slots reached the server")

        // a's last transfer ends: c (the first new file that waited) starts, d still waits.
        released.withLock { $0.formUnion(["a1", "a2"]) }
        #expect(try await a1.value == 200)
        #expect(try await a2.value == 200)
        try await waitFor("c1")
        // x's remote is paused while it waits.
        let x = File()
        let x1 = get("x1", x, startsNow: { false })
        // a asks again (its next range) while b and c transfer: when b ends, a starts before d.
        let a3 = get("a3", a)
        try await Task.sleep(for: .milliseconds(50))
        released.withLock { _ = $0.insert("b1") }
        #expect(try await b1.value == 200)
        try await waitFor("a3")
        #expect(!arrivedNow().contains("d1"), "a new file started before one that transferred lately")

        released.withLock { $0.formUnion(["c1", "a3", "d1"]) }
        for task in [c1, a3, d1] { #expect(try await task.value == 200) }
        await #expect(throws: TransferSlot.Deferred.self) { try await x1.value }
        #expect(arrivedNow().suffix(3) == ["c1", "a3", "d1"])
        #expect(!arrivedNow().contains("e1") && !arrivedNow().contains("x1"))
    }

    @Test func refusedConnectionIsUnreachableAndNamesTheHostOnly() async throws {
        let listener = try LoopbackHTTPServer { _ in .init() }
        let port = listener.port
        listener.stop()
        let error = await #expect(throws: ProviderError.self) {
            try await transport.send(HTTPRequest(url: URL(string: "http://127.0.0.1:\(port)/x?sig=SECRET")!))
        }
        #expect(error?.code == .unreachable)
        #expect(error?.isRetryable == true)
        #expect(error?.exitCode == .unavailable)
        #expect(error?.message.contains("127.0.0.1") == true)
        #expect(error?.message.contains("network") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("SECRET") == false)
    }

    /// RFC 6761: `.invalid` never resolves, and the resolver answers NXDOMAIN without asking anyone.
    @Test func unresolvableHostIsUnreachable() async throws {
        let error = await #expect(throws: ProviderError.self) {
            try await transport.send(HTTPRequest(url: URL(string: "http://nonexistent.invalid/x?token=SECRET")!))
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("nonexistent.invalid") == true)
        #expect(error?.message.contains("SECRET") == false)
    }

    /// Regression: after a resolver failure the handle went back to the pool with curl's receive buffer still
    /// allocated, and the next request on it died with "libcurl refused option BUFFERSIZE" (.configuration, exit 3)
    /// instead of failing (or succeeding) like the first.
    @Test func aHandleThatFailedIsNeverReconfigured() async throws {
        let server = try await faultServer()
        let transport = try CurlTransport()
        for _ in 0..<3 {
            for url in ["http://nonexistent.invalid/a", "http://127.0.0.1:1/b"] {
                let error = await #expect(throws: ProviderError.self) { try await transport.send(HTTPRequest(url: URL(string: url)!)) }
                #expect(error?.code == .unreachable, "\(error?.message ?? "")")
            }
            let sink = MemorySink()
            let ok = try await transport.download(HTTPRequest(url: server.url("/data/1000")), range: 0...99, ifRange: nil, into: sink)
            #expect(ok.head.status == 206)
            let r = try await transport.send(HTTPRequest(url: server.url("/status/200")))
            #expect(r.status == 200)
        }
    }

    @Test func aServerThatNeverAnswersIsTransientNotUnreachable() async throws {
        let server = try await faultServer()
        var options = CurlTransportOptions()
        options.lowSpeedTime = 1
        let transport = try CurlTransport(options: options)
        let error = await #expect(throws: ProviderError.self) {
            try await transport.download(HTTPRequest(url: server.url("/stall/100000?after=0")), range: nil, ifRange: nil, into: MemorySink())
        }
        #expect(error?.code == .transient, "a host that accepted the request is reachable: \(error?.message ?? "")")
    }

    @Test(arguments: ["ftp://127.0.0.1/x", "file:///etc/passwd"])
    func onlyHTTPIsSpoken(url: String) async throws {
        let error = await #expect(throws: ProviderError.self) { try await transport.send(HTTPRequest(url: URL(string: url)!)) }
        #expect(error?.code == .configuration)
    }

    @Test func sendCarriesMethodHeadersAndBody() async throws {
        let server = try await faultServer()
        let r = try await transport.send(HTTPRequest(method: "PROPFIND", url: server.url("/echo?q=1"),
                                                     headers: ["Depth": "1", "X-Empty": ""], body: Data("<xml/>".utf8)))
        let echo = try JSONSerialization.jsonObject(with: r.body) as? [String: Any]
        let headers = echo?["headers"] as? [String: String]
        #expect(echo?["method"] as? String == "PROPFIND")
        #expect(echo?["body"] as? String == "<xml/>")
        #expect(headers?["depth"] == "1")
        #expect(headers?["x-empty"] == "")
        #expect(r.head.url == server.url("/echo?q=1"))
    }

    @Test func tinySwiftServerFromTestSupportWorks() async throws {
        let server = try LoopbackHTTPServer { request in
            .init(status: 201, headers: [("X-Method", request.method)], body: request.body + Data(request.target.utf8))
        }
        let r = try await transport.send(HTTPRequest(method: "PUT", url: server.url("/p?x"), body: Data("hi".utf8)))
        #expect(r.status == 201)
        #expect(r.headers["x-method"] == "PUT")
        #expect(r.body == Data("hi/p?x".utf8))
    }
}

/// A sink that records what streamed into it; accepts the statuses it is given.
private final class RecordingBodySink: ResponseBodySink {
    struct Refused: Error, Equatable {}
    private let state = Mutex<(bytes: Int, writes: Int, heads: [Int])>((0, 0, []))
    let statuses: ClosedRange<Int>
    let failAfter: Int?

    init(statuses: ClosedRange<Int> = 200...299, failAfter: Int? = nil) {
        self.statuses = statuses
        self.failAfter = failAfter
    }

    func accepts(_ head: HTTPResponseHead) -> Bool {
        state.withLock { $0.heads.append(head.status) }
        return statuses.contains(head.status)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        try state.withLock {
            if let failAfter, $0.bytes >= failAfter { throw Refused() }
            $0.bytes += bytes.count
            $0.writes += 1
        }
    }

    var bytes: Int { state.withLock { $0.bytes } }
    var writes: Int { state.withLock { $0.writes } }
    var heads: [Int] { state.withLock { $0.heads } }
}

@Suite(.timeLimit(.minutes(2)))
struct StreamingSendTests {
    @Test func anAcceptedBodyStreamsInPiecesAndIsNotKept() async throws {
        let server = try await faultServer()
        let transport = try CurlTransport()
        let sink = RecordingBodySink()
        let r = try await transport.send(HTTPRequest(method: "PROPFIND", url: server.url("/data/3000000")), into: sink)
        #expect(r.status == 200)
        #expect(r.body.isEmpty)
        #expect(sink.bytes == 3_000_000)
        #expect(sink.writes > 1, "bytes arrive as they come, not at the end")
        #expect(sink.heads == [200])
    }

    @Test func aRefusedStatusKeepsABoundedBodyForTheErrorMapping() async throws {
        let server = try await faultServer()
        var options = CurlTransportOptions()
        options.maxErrorBody = 1000
        let transport = try CurlTransport(options: options)
        let sink = RecordingBodySink(statuses: 207...207)
        let r = try await transport.send(HTTPRequest(url: server.url("/status/403")), into: sink)
        #expect(r.status == 403)
        #expect(String(decoding: r.body, as: UTF8.self) == "status 403")
        #expect(sink.bytes == 0)
        let big = try await transport.send(HTTPRequest(url: server.url("/data/5000")), into: sink)
        #expect(big.status == 200)
        #expect(big.body.count == 1000, "an error body is kept up to maxErrorBody only")
    }

    @Test func aBodyOverTheCapFailsWithAClearError() async throws {
        let server = try await faultServer()
        var options = CurlTransportOptions()
        options.maxResponseBody = 100_000
        let transport = try CurlTransport(options: options)
        let sink = RecordingBodySink()
        let error = await #expect(throws: ProviderError.self) {
            try await transport.send(HTTPRequest(method: "PROPFIND", url: server.url("/data/300000?sig=SECRET")), into: sink)
        }
        #expect(error?.code == .invalidResponse)
        #expect(error?.message.contains("larger than 97.7 KiB") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("PROPFIND http://127.0.0.1:\(server.port)/data/…") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("SECRET") == false)
        #expect(sink.bytes <= 100_000, "nothing past the cap reaches the sink")
        // The whole-body send has the same cap.
        await #expect(throws: ProviderError.self) { try await transport.send(HTTPRequest(url: server.url("/data/300000"))) }
    }

    @Test func sinkErrorsAbortTheAnswerAndAreRethrownUnchanged() async throws {
        let server = try await faultServer()
        let transport = try CurlTransport()
        await #expect(throws: RecordingBodySink.Refused()) {
            try await transport.send(HTTPRequest(url: server.url("/data/4000000")), into: RecordingBodySink(failAfter: 1))
        }
    }

    /// #19.12: an answer dripping above the low-speed limit used to never end and hold the pull lock.
    @Test func anAnswerDrippingPastTheDeadlineFailsWithoutRetry() async throws {
        let server = try await faultServer()
        var options = CurlTransportOptions()
        options.apiTimeout = 1.5
        let transport = try CurlTransport(options: options)
        let started = ContinuousClock.now
        let error = await #expect(throws: ProviderError.self) {
            try await transport.send(HTTPRequest(method: "PROPFIND", url: server.url("/drip/100000?rate=1500")))
        }
        let took = ContinuousClock.now - started
        // The drip lasts 67 s: ending before 30 s is the deadline at work (a bound on a hang, not on speed).
        #expect(took >= .seconds(1.4) && took < .seconds(30), "\(took)")
        #expect(error?.code == .invalidResponse, "not retryable: the same answer would drip again")
        #expect(error?.isRetryable == false)
        #expect(error?.message.contains("within 1.5 s") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("pull.api_timeout") == true)
    }

    @Test func downloadsHaveNoDeadline() async throws {
        let server = try await faultServer()
        var options = CurlTransportOptions()
        options.apiTimeout = 0.5
        let transport = try CurlTransport(options: options)
        let sink = MemorySink()
        let out = try await transport.download(HTTPRequest(url: server.url("/drip/3000?rate=2000")), range: nil, ifRange: nil, into: sink)
        #expect(out.head.status == 200)
        #expect(sink.count == 3000)
    }
}
