import CloudSyncHTTP
import Foundation
import TestSupport
import Testing

/// Big files in segments (`pull.segments`, `pull.segment_threshold`). A 1 MiB threshold and 256 KiB chunks keep
/// the data small; the fake paces each answer, so concurrent streams overlap on its side.
@Suite struct SegmentTests {
    static let chunk: Int64 = 256 << 10
    static let pull = [#"chunk_size = "256KiB""#, #"segment_threshold = "1MiB""#, "segments = 4"]
    static let bigSize = (4 << 20) + 12_345

    /// GETs of `path` that answered 206 or 200, in arrival order.
    static func gets(_ log: [Served], _ path: String) -> [Served] {
        log.filter { $0.path.hasSuffix(path) && ($0.status == 206 || $0.status == 200) }.sorted { $0.t < $1.t }
    }

    /// A big file goes over several connections at once, each byte is asked for exactly once, and the track is
    /// identical. A file below the threshold goes over one connection after its start set.
    @Test func bigFileInSegments() throws {
        let fixture = try Fixture(seed: 31, files: [("Big/long.flac", Self.bigSize), ("small.mp3", 900_000)],
                                  rate: 2 << 20, pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull", "--jobs", "1"])

        let log = try fixture.server.log()
        let big = Self.gets(log, "long.flac")
        #expect(big.allSatisfy { $0.status == 206 }, "statuses: \(big.map(\.status))")
        // Every byte asked for once: the requested ranges tile the file without overlap.
        let requested = big.compactMap(\.requested).sorted { $0.lowerBound < $1.lowerBound }
        #expect(requested.count == big.count)
        var next: Int64 = 0
        for range in requested {
            #expect(range.lowerBound == next, "ranges overlap or leave a hole at \(next): \(requested)")
            next = range.upperBound
        }
        #expect(next == Int64(Self.bigSize))
        #expect(big.reduce(0) { $0 + $1.bytes } == Int64(Self.bigSize))
        let overlapping = Self.mostAtOnce(big)
        #expect(overlapping >= 2 && overlapping <= 4, "at most \(overlapping) GETs of the big file ran at once")
        #expect(try fixture.server.stats()["max_active"] ?? 0 >= 2)

        let small = Self.gets(log, "small.mp3")
        Self.expectTiling(small, size: 900_000)
        // Its start set's two parts at once (``headAndTailAtOnce``), then one GET at a time.
        #expect(Self.mostAtOnce(small) == 2, "the small file: \(small.map { $0.range ?? "-" })")
        let rest = small.filter { $0.rangeStart >= 576 << 10 && $0.rangeStart < 900_000 - (128 << 10) }
        #expect(!rest.isEmpty && Self.mostAtOnce(rest) == 1, "the small file: \(small.map { $0.range ?? "-" })")
    }

    /// Runs `pull ARGUMENTS` on `fixture`, which must succeed with every track identical to the library.
    static func pullCompletely(_ fixture: Fixture, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try fixture.env.run(arguments)
        #expect(r.status == 0, "stderr: \(r.stderr)", sourceLocation: sourceLocation)
        try fixture.env.expectTracksEqual(fixture.library)
    }

    /// The requested ranges of `gets` tile `0..<size` without overlap: every byte asked for exactly once.
    static func expectTiling(_ gets: [Served], size: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let requested = gets.compactMap(\.requested).sorted { $0.lowerBound < $1.lowerBound }
        #expect(requested.count == gets.count, sourceLocation: sourceLocation)
        var next: Int64 = 0
        for range in requested {
            #expect(range.lowerBound == next, "ranges overlap or leave a hole at \(next): \(requested)", sourceLocation: sourceLocation)
            next = range.upperBound
        }
        #expect(next == Int64(size), sourceLocation: sourceLocation)
    }

    /// `segments = 1` (here from `--segments 1`): one GET at a time; after the start set (the first bytes and the
    /// tail), chunk after chunk in file order.
    @Test func oneSegmentIsOneStreamInOrder() throws {
        let fixture = try Fixture(seed: 32, files: [("Big/long.flac", Self.bigSize)], rate: 8 << 20, pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull", "--segments", "1"])
        let big = Self.gets(try fixture.server.log(), "long.flac")
        Self.expectTiling(big, size: Self.bigSize)
        let tailStart = Int64(Self.bigSize - (128 << 10))
        let rest = big.compactMap(\.requested).drop { $0.lowerBound < 576 << 10 || $0.lowerBound >= tailStart }
        #expect(rest.allSatisfy { $0.count <= Self.chunk }, "\(rest)")
        #expect(zip(rest, rest.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound }, "not in file order: \(rest)")
        #expect(Self.mostAtOnce(big) == 1)
        #expect(try fixture.server.stats()["max_active"] == 1)
    }

    /// The server honours Range for the first answers, then ignores it (200 with the whole body): each segment
    /// stops at the end of its claim and one stream fetches the rest, so no two streams download the whole file.
    @Test func serverThatStopsHonouringRangeFallsBackToOneStream() throws {
        // Four GETs for the start set (576 KiB in 256 KiB chunks, then the tail), the first chunk of the rest
        // alone, one segment; then the server ignores Range.
        let fixture = try Fixture(seed: 33, files: [("Big/long.flac", Self.bigSize)], rate: 4 << 20,
                                  faults: #"[{"kind": "none", "count": 6}, {"kind": "ignore_range", "count": -1}]"#,
                                  pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull"])
        let big = Self.gets(try fixture.server.log(), "long.flac")
        let whole = big.filter { $0.status == 200 && $0.bytes > Int64(Self.bigSize) / 2 }
        #expect(whole.count == 1, "answers that sent most of the file: \(whole.map { ($0.range ?? "-", $0.bytes) })")
        #expect(big.contains { $0.status == 200 && $0.bytes < Int64(Self.bigSize) / 2 }, "no segment stopped early")
        let served = try fixture.server.stats()["bytes"] ?? 0
        #expect(served < 3 * Int64(Self.bigSize), "served \(served) bytes for a file of \(Self.bigSize)")
    }

    /// A track's first bytes and its tail are asked for at once (one request latency for the start set, not
    /// two), each byte once, even below the segment threshold; `segments = 1` keeps one GET at a time
    /// (``oneSegmentIsOneStreamInOrder``).
    @Test func headAndTailAtOnce() throws {
        let size = 900_000
        let fixture = try Fixture(seed: 38, files: [("a.flac", size)], rate: 2 << 20, pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull", "--jobs", "1"])
        let gets = Self.gets(try fixture.server.log(), "a.flac")
        Self.expectTiling(gets, size: size)
        let first = Array(gets.prefix(2))
        #expect(Set(first.map(\.rangeStart)) == [0, Int64(size - (128 << 10))], "\(gets.map { $0.range ?? "-" })")
        #expect(Self.mostAtOnce(first) == 2, "the head and the tail went one after the other")
    }

    /// A big file's start set whose head spans several chunks (64 KiB chunks, 576 KiB head) keeps to `segments`
    /// streams in all: the streams beside the head's leave the head that many fewer, so two segments are two
    /// GETs at once, not two for the rest of the head (segmented once its first chunk was a 206) while the
    /// tail's 128 KiB still arrive.
    @Test func startSetOfBigFileKeepsToSegments() throws {
        let pull = [#"chunk_size = "64KiB""#, #"segment_threshold = "1MiB""#, "segments = 2"]
        let fixture = try Fixture(seed: 40, files: [("Big/long.flac", Self.bigSize)], rate: 2 << 20, pull: pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull", "--jobs", "1"])
        let gets = Self.gets(try fixture.server.log(), "long.flac")
        Self.expectTiling(gets, size: Self.bigSize)
        let startSet = gets.filter { $0.rangeStart < 576 << 10 || $0.rangeStart >= Int64(Self.bigSize - (128 << 10)) }
        #expect(Self.mostAtOnce(startSet) == 2, "\(startSet.map { $0.range ?? "-" })")
        #expect(Self.mostAtOnce(gets) <= 2, "\(gets.map { $0.range ?? "-" })")
    }

    /// A server that ignores Range from the first request: the tail's stream ends at the answer's head and the
    /// head's stream reads the whole answer, so each file is sent whole once, not once per stream.
    @Test func headAndTailFromServerIgnoringRange() throws {
        let files = [("a.flac", 900_000), ("Big/long.flac", Self.bigSize)]
        let fixture = try Fixture(seed: 39, files: files, rate: 8 << 20,
                                  faults: #"[{"kind": "ignore_range", "count": -1}]"#, pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull", "--jobs", "1"])
        let log = try fixture.server.log()
        for (path, size) in files {
            let gets = Self.gets(log, path)
            #expect(gets.count >= 2, "\(path): \(gets.map { $0.range ?? "-" })")
            let whole = gets.filter { $0.bytes > Int64(size) / 2 }
            #expect(whole.count == 1, "\(path): answers that sent most of the file: \(gets.map { ($0.range ?? "-", $0.bytes) })")
        }
    }

    /// 429 with Retry-After to one segment pauses every stream of the remote: from the fake's clock, once the
    /// throttled answer is out (plus a grace for GETs other streams had already sent), no GET arrives before
    /// Retry-After has passed.
    @Test func retryAfterPausesEverySegment() throws {
        let fixture = try Fixture(seed: 37, files: [("Big/long.flac", Self.bigSize)], rate: 2 << 20,
                                  faults: #"[{"kind": "none", "count": 3}, {"kind": "status", "status": 429, "retry_after": 2}]"#,
                                  pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull"])
        let log = try fixture.server.log()
        let throttled = try #require(log.first { $0.status == 429 })
        let sent = try #require(throttled.answered)
        let early = log.filter { $0.t > sent + 0.1 && $0.t < sent + 2 }
        #expect(early.isEmpty, "GETs during the Retry-After window: \(early.map { ($0.range ?? "-", $0.t - sent) })")
        #expect(Self.mostAtOnce(Self.gets(log, "long.flac").filter { $0.t > sent + 2 }) >= 2, "segments did not resume")
    }

    /// Ctrl-C while four segments run: every stream stops, what arrived is checkpointed (only bytes still in
    /// flight are lost), and the next pull fetches exactly the missing bytes.
    @Test func interruptStopsEverySegmentAndKeepsTheirBytes() throws {
        let fixture = try Fixture(seed: 35, files: [("Big/long.flac", 8 << 20)], rate: 512 << 10, pull: Self.pull)
        defer { fixture.cleanup() }
        let pull = try fixture.env.start(["pull"])
        #expect(try eventuallyBlocking { try fixture.server.stats()["bytes"] ?? 0 > 1 << 20 })
        pull.signal(SIGINT)
        let r = try pull.wait(timeout: 15)
        #expect(r.status == 130, "Ctrl-C exits 130: \(r.stderr)")
        #expect(r.stderr.contains("interrupted"), "stderr: \(r.stderr)")
        try fixture.server.settle()
        let served = try fixture.server.stats()["bytes"] ?? 0
        let cached = try fixture.env.cachedBytes()
        #expect(served - cached >= 0 && served - cached <= 4 * (64 << 10), "served \(served), kept \(cached)")
        let again = try fixture.env.run(["pull"])
        #expect(again.status == 0, "stderr: \(again.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let refetched = (try fixture.server.stats()["bytes"] ?? 0) - served
        #expect(refetched == Int64(8 << 20) - cached, "the resumed pull fetched \(refetched) bytes, \((8 << 20) - cached) were missing")
    }

    /// `--head-first` with segments: the start sets go first (the first 128 KiB and the tail of each), then big
    /// files in segments.
    @Test func headFirstThenSegments() throws {
        let fixture = try Fixture(seed: 36, files: [("A/long.flac", Self.bigSize), ("B/long.flac", Self.bigSize)],
                                  rate: 4 << 20, pull: Self.pull)
        defer { fixture.cleanup() }
        try Self.pullCompletely(fixture, ["pull", "--head-first=64KiB", "--jobs", "2"])
        let log = try fixture.server.log().sorted { $0.t < $1.t }
        let tailStart = Int64(Self.bigSize - (128 << 10))
        #expect(log.prefix(4).allSatisfy { $0.range == "bytes=0-131071" || $0.rangeStart == tailStart }, "\(log.prefix(4).map(\.range))")
        #expect(log.dropFirst(4).allSatisfy { $0.rangeStart >= 131_072 && $0.rangeStart < tailStart })
        #expect(Self.mostAtOnce(Self.gets(log, "A/long.flac")) >= 2)
    }

    /// The file changes while segments run. With `If-Range` honoured the later answers are 200s of the new
    /// version; a server that ignores `If-Range` sends new bytes as 206s with the new ETag. Either way the file
    /// restarts from 0 exactly once and ends as the new version entirely, or fails clearly — never mixed.
    @Test(arguments: ["mutate", "mutate_ignoring_if_range"])
    func fileChangedDuringSegments(variant: String) throws {
        var faults = #"[{"path": "changing", "kind": "none", "count": 3}, {"path": "changing", "kind": "mutate", "count": 1}"#
        if variant == "mutate_ignoring_if_range" { faults += #", {"path": "changing", "kind": "ignore_if_range", "count": -1}"# }
        faults += "]"
        var fixture = try Fixture(seed: 34, files: [("changing.flac", Self.bigSize), ("steady.mp3", 200_000)],
                                  rate: 4 << 20, faults: faults, pull: Self.pull)
        defer { fixture.cleanup() }
        let old = try #require(fixture.library.files["changing.flac"])
        let new = Data(old.map { $0 ^ 0x5A })
        let r = try fixture.env.run(["pull"])
        fixture.expectNewVersionOrCleanFailure(r, path: "changing.flac", new: new)
        let log = Self.gets(try fixture.server.log(), "changing.flac")
        let mutated = try #require(log.dropFirst(3).first, "fewer than 4 GETs: \(log.map { $0.range ?? "-" })")
        let fromZero = log.filter { $0.t > mutated.t && $0.rangeStart == 0 }
        #expect(fromZero.count <= 1, "the file restarted \(fromZero.count) times")
        if r.status == 0 { #expect(fromZero.count == 1) }

        fixture.library.files["changing.flac"] = new
        let again = try fixture.env.run(["pull"])
        #expect(again.status == 0, "stderr: \(again.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
    }

    /// A provider whose links expire (the Yandex fake: an href answers 410 after a few GETs) with a hash
    /// (SHA-256): every expiry is resolved once for the file, not once per stream, and the hash of bytes that
    /// arrived out of order is right. A provider whose hash does not match fails the file after one refetch.
    @Test(arguments: [false, true])
    func expiringLinksAndHashWithSegments(wrongHash: Bool) async throws {
        let size = (3 << 20) + 777
        let maxUses = 5
        let fake = try await Env.yandexFake([
            "files": [["path": "Music/Big/long.flac", "size": size, "seed": 7, "corrupt_hashes": wrongHash]],
            "href_max_uses": maxUses,
        ])
        defer { fake.stop() }
        let env = try Env(remoteLines: Env.yandexLines(fake), pull: Self.pull)
        defer { env.cleanup() }
        let r = try env.run(["pull"])
        let track = env.tracks.appendingPathComponent("Music/Big/long.flac")
        let log = try await CurlTransport().send(HTTPRequest(url: fake.baseURL().appendingPathComponent("_log")))
        let rows = try JSONSerialization.jsonObject(with: log.body) as? [[String: Any]] ?? []
        func status(_ row: [String: Any]) -> Int { (row["status"] as? NSNumber)?.intValue ?? 0 }
        let links = rows.filter { $0["server"] as? String == "api" && $0["path"] as? String == "/v1/disk/resources/download" }
        let answered = rows.filter { $0["server"] as? String == "download" && (status($0) == 200 || status($0) == 206) }
        let expired = rows.filter { $0["server"] as? String == "download" && status($0) == 410 }
        #expect(!expired.isEmpty, "no link expired; the test proves nothing")
        // Each link serves `maxUses` GETs; one resolution per expiry means no link more than needed.
        let fetches = wrongHash ? 2 : 1
        #expect(links.count <= (answered.count + maxUses - 1) / maxUses + fetches - 1,
                "\(links.count) links for \(answered.count) GETs (\(expired.count) refused)")
        if wrongHash {
            #expect(r.status == 1, "stderr: \(r.stderr)")
            #expect(r.stderr.contains("long.flac") && r.stderr.contains("sha256"), "stderr: \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: track.path))
        } else {
            #expect(r.status == 0, "stderr: \(r.stderr)")
            let data = try Data(contentsOf: track)
            #expect(data == Self.yandexContent(path: "Music/Big/long.flac", size: size, seed: 7))
        }
    }

    /// The bytes yandex_fake.py serves for a file: SHA-256 digests of "seed:path:i", concatenated.
    static func yandexContent(path: String, size: Int, seed: Int) -> Data {
        var out = Data()
        var i = 0
        while out.count < size {
            let hex = contentHash(of: Data("\(seed):\(path):\(i)".utf8), kind: .sha256)
            var bytes = [UInt8]()
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                bytes.append(UInt8(hex[index ..< next], radix: 16) ?? 0)
                index = next
            }
            out.append(contentsOf: bytes)
            i += 1
        }
        return out.prefix(size)
    }

    /// The most answers whose [t, end] intervals overlap at one moment (the fake's clock).
    static func mostAtOnce(_ gets: [Served]) -> Int {
        var events: [(Double, Int)] = []
        for g in gets {
            events.append((g.t, 1))
            events.append((g.end ?? .infinity, -1))
        }
        events.sort { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }
        var now = 0, most = 0
        for (_, delta) in events {
            now += delta
            most = max(most, now)
        }
        return most
    }
}
