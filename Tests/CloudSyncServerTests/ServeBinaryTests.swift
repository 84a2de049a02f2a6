#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// `cloudsync serve` (the built binary) against files_fake.py: the client first, and a fast failure when the
/// cloud is gone. Byte counts come from the fake's request log; latencies are measured and printed, never
/// asserted tightly.
@Suite(.serialized) struct ServeBinaryTests {
    /// 300 KiB/s: a slow cloud, as in issue #17.
    static let rate = 300 << 10

    /// A library of `files` (path → size) of seeded bytes under a temporary directory.
    static func library(_ files: [(String, Int)], in dir: TemporaryDirectory) throws -> [String: Data] {
        var contents: [String: Data] = [:]
        var random = SeededRandom(seed: 17)
        for (path, size) in files {
            let url = dir.file("library/\(path)")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            let data = random.bytes(size)
            try data.write(to: url)
            contents[path] = data
        }
        return contents
    }

    @Test func tailReadAndSeekFetchOnlyWhatTheyAskOnAThrottledCloud() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-tail")
        let size = 6 << 20
        let contents = try Self.library([("Album/a.mp3", size), ("Album/b.flac", size)], in: dir)
        let fake = try await FilesFake(root: dir.file("library"), rate: Self.rate)
        defer { fake.stop() }
        let (env, serve, port) = try await BinaryEnv.serving(fake)
        defer { serve.stop(); withExtendedLifetime(env) {} }

        // The last 128 bytes (an ID3v1 read) of an uncached track.
        let (tail, tailSeconds) = try await offPool {
            try timed { try RawClient(port: port).get("/tracks/lib/Album/a.mp3", headers: ["Range: bytes=-128"]) }
        }
        #expect(tail.status == 206)
        #expect(tail.body == contents["Album/a.mp3"]?.suffix(128))
        let tailBytes = try fake.bytes(of: "Album/a.mp3")
        #expect(tailBytes <= 64 << 10, "a 128-byte tail read transferred \(tailBytes) bytes from the cloud")

        // A seek to the middle: time to the first byte, then the client goes away.
        let middle = size / 2
        let (first, seekSeconds) = try await offPool { () -> (RawClient.Response, Double) in
            let client = try RawClient(port: port)
            return try timed { try client.get("/tracks/lib/Album/b.flac", headers: ["Range: bytes=\(middle)-\(middle)"]) }
        }
        #expect(first.status == 206)
        #expect(first.body == contents["Album/b.flac"]?.subdata(in: middle ..< middle + 1))
        let seekGets = try fake.log().filter { $0.path == "/dav/Album/b.flac" }
        #expect(seekGets.first?.range?.hasPrefix("bytes=\(middle)-") == true, "\(seekGets.map(\.range))")
        #expect(try fake.bytes(of: "Album/b.flac") <= 64 << 10)
        print("serve-seek: tail read of 128 bytes: \(tailBytes) bytes from the cloud in \(String(format: "%.0f", tailSeconds * 1000)) ms; "
            + "seek to the middle: first byte after \(String(format: "%.0f", seekSeconds * 1000)) ms (cloud at \(Self.rate >> 10) KiB/s)")
    }

    /// Bytes `serve` fetches for a player reach it as they arrive, not once a batch fills: the cloud sends the
    /// first 40,000 bytes of an uncached track and then holds the connection, and the player's first KiB comes
    /// back while the cloud's answer is still running (a pull gathers 128 KiB per write; `serve` must not).
    @Test func bytesReachThePlayerWhileTheCloudStalls() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-stall")
        let contents = try Self.library([("Album/a.flac", 2 << 20)], in: dir)
        let fake = try await FilesFake(root: dir.file("library"),
                                       faults: #"[{"path": "a.flac", "kind": "stall", "after": 40000, "seconds": 40, "count": -1}]"#)
        defer { fake.stop() }
        let (env, serve, port) = try await BinaryEnv.serving(fake)
        defer { serve.stop(); withExtendedLifetime(env) {} }
        // RawClient gives up after 10 s without a byte, well inside the 40 s stall: an answer at all proves that
        // serve passed the bytes on while the cloud's answer was still held. (Whether that answer is still running
        // when the log is read is a race: serve may cancel it as soon as the player has its bytes.)
        let first = try await offPool { try RawClient(port: port).get("/tracks/lib/Album/a.flac", headers: ["Range: bytes=0-1023"]) }
        #expect(first.status == 206)
        #expect(first.body == contents["Album/a.flac"]?.prefix(1024))
        // The fault held: no GET of the track got past the stall's 40,000 bytes.
        let gets = try fake.log().filter { $0.path == "/dav/Album/a.flac" }
        #expect(!gets.isEmpty && gets.allSatisfy { $0.bytes <= 40_000 }, "the cloud's answers: \(gets)")
    }

    /// A complete track cut short on disk (a tool, a filesystem repair) is not an I/O error for the player: the
    /// request that meets the end fetches the lost tail again, sends the whole track, and the track is complete
    /// (and the right size) again. In a plaintext and in an encrypted cache.
    @Test(arguments: [false, true]) func aTrackCutShortOnDiskIsMendedByTheRequestThatMeetsIt(encrypted: Bool) async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-cut")
        let size = 1 << 20
        let contents = try Self.library([("Album/cut.flac", size)], in: dir)
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL, extra: encrypted ? "encrypt = true" : "")
        let pulled = try env.run(["pull", "--remote", "lib"])
        #expect(pulled.status == 0, "\(pulled.stderr)")
        let track = env.cacheDir.appendingPathComponent("tracks/lib/Album/cut.flac")
        #expect(truncate(track.path, 300_000) == 0)
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let got = try await offPool { try RawClient(port: port).get("/tracks/lib/Album/cut.flac") }
        #expect(got.status == 200 && got.body == contents["Album/cut.flac"]!, "\(got.status), \(got.body.count) bytes")
        var state: String?
        for _ in 0 ..< 100 {
            state = try InstantStartAcceptanceTests.listing(env).first?["state"] as? String
            if state == "cached" { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(state == "cached", "the track is complete again: \(state ?? "?")")
        serve.stop()
        let verify = try env.run(["cache", "verify"])
        #expect(verify.status == 0, "\(verify.stdout)")
    }

    /// Bytes that fail their check while another writer holds the entry (another process's pull, serve's own
    /// session promoting it) cannot be dropped until it lets go: the request that met them waits for that, then
    /// fetches them, instead of ending the body after two reads of the same bad bytes.
    @Test func damagedBytesHeldByAnotherWriterAreWaitedFor() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-held")
        let size = 1 << 20
        let contents = try Self.library([("Album/held.flac", size)], in: dir)
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL)
        let pulled = try env.run(["pull", "--remote", "lib"])
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(truncate(env.cacheDir.appendingPathComponent("tracks/lib/Album/held.flac").path, 300_000) == 0)
        // Another writer: an open-file-description lock on the entries' bytes of locks/entries.lock, as a writer
        // of another process takes its entry's (F_OFD_SETLK).
        let lockFD = open(env.cacheDir.appendingPathComponent("locks/entries.lock").path, O_RDWR | O_CLOEXEC)
        #expect(lockFD >= 0)
        var held = flock()
        held.l_type = Int16(F_WRLCK)
        held.l_whence = Int16(SEEK_SET)
        held.l_start = 0
        held.l_len = 1 << 20
        #expect(fcntl(lockFD, 37, &held) == 0, "F_OFD_SETLK: errno \(errno)")
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let release = Task.detached {
            try await Task.sleep(for: .milliseconds(1500))
            close(lockFD)
        }
        let got = try await offPool { try RawClient(port: port).get("/tracks/lib/Album/held.flac") }
        try await release.value
        #expect(got.status == 200 && got.body == contents["Album/held.flac"]!, "\(got.status), \(got.body.count) bytes")
        let fetched = try fake.log().filter { $0.path == "/dav/Album/held.flac" && $0.t > 0 }.map(\.range)
        #expect(fetched.contains { $0?.hasPrefix("bytes=262144-") == true || $0?.hasPrefix("bytes=300000-") == true },
                "the lost tail was fetched again: \(fetched)")
    }

    @Test func aNewRequestPreemptsReadAheadInFlight() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-preempt")
        let size = 16 << 20
        let contents = try Self.library([("long.flac", size)], in: dir)
        let fake = try await FilesFake(root: dir.file("library"), rate: 2 * Self.rate)
        defer { fake.stop() }
        let (env, serve, port) = try await BinaryEnv.serving(fake)
        defer { serve.stop(); withExtendedLifetime(env) {} }

        // A player reads the whole track; its read-ahead grows into GETs of a chunk (2 MiB).
        let reader = try RawClient(port: port)
        reader.send("GET /tracks/lib/long.flac HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        Thread.detachNewThread { _ = reader.readUntilClosed() }
        let big = try await eventually(30) {
            try fake.log().contains { ($0.requestedCount ?? 0) >= 1 << 20 && $0.end == nil }
        }
        let started = try fake.log().map(\.range)
        #expect(big, "no read-ahead GET of a chunk started: \(started)")

        // Another client asks for the tail meanwhile: it must not wait behind that GET.
        let (tail, seconds) = try await offPool {
            try timed { try RawClient(port: port).get("/tracks/lib/long.flac", headers: ["Range: bytes=-128"]) }
        }
        #expect(tail.status == 206)
        #expect(tail.body == contents["long.flac"]?.suffix(128))
        // The fake notices a cancelled GET at its next write: wait for the GET that was in flight to end.
        let isCut = { (g: FilesFake.Served) in (g.requestedCount ?? 0) >= 1 << 20 && g.end != nil && g.bytes < (g.requestedCount ?? 0) }
        _ = try await eventually(10) { try fake.log().contains(where: isCut) }
        let log = try fake.log()
        let cut = log.filter(isCut)
        #expect(!cut.isEmpty, "the read-ahead GET in flight was not cancelled for the newer request: \(log.map { ($0.range, $0.bytes) })")
        let tailGet = log.first { $0.range == "bytes=\(size - 128)-\(size - 1)" }
        #expect(tailGet != nil, "\(log.map(\.range))")
        print("serve-seek: a tail read during read-ahead got its bytes after \(String(format: "%.0f", seconds * 1000)) ms; "
            + "read-ahead GETs cancelled for it: \(cut.count)")
        withExtendedLifetime(reader) {}
    }

    /// Head-only tracks (`pull --head-first`, the rest refused), then the cloud stops.
    @Test func stoppedCloudAnswers503AtOnceAndBodiesEndAtTheHole() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-offline")
        let size = 2 << 20, head = 256 << 10
        let contents = try Self.library([("A/one.mp3", size), ("A/two.ogg", size)], in: dir)
        let (fake, env) = try await BinaryEnv.headOnly(root: dir.file("library"), head: head)
        fake.stop()
        let (serve, port) = try await env.serve()
        defer { serve.stop() }

        let c = Checks()
        try await offPool {
            // A range outside the start set: 503 at once, with Retry-After.
            let (hole, seconds) = try timed { try RawClient(port: port).get("/tracks/lib/A/one.mp3", headers: ["Range: bytes=\(size / 2)-"]) }
            c.expect(hole.status == 503, "\(hole.status)")
            c.expect(Int(hole.headers["retry-after"] ?? "") ?? 0 >= 1, "\(hole.headers)")
            c.expect(seconds < 5, "503 after \(seconds) s")
            // Marked offline now: the next one does not even try.
            let (again, secondsAgain) = try timed { try RawClient(port: port).get("/tracks/lib/A/two.ogg", headers: ["Range: bytes=-128"]) }
            c.expect(again.status == 503)
            c.expect(secondsAgain < 5, "second 503 after \(secondsAgain) s")
            // The start set is still served.
            let start = try RawClient(port: port).get("/tracks/lib/A/two.ogg", headers: ["Range: bytes=0-1023"])
            c.expect(start.status == 206)
            c.expect(start.body == contents["A/two.ogg"]?.prefix(1024))
            // A body that runs into the hole ends there.
            let (whole, wholeSeconds) = try timed { () -> RawClient.Response in
                let client = try RawClient(port: port)
                client.send("GET /tracks/lib/A/one.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return try client.readResponseUntilCut()
            }
            c.expect(whole.status == 200)
            c.expect(whole.headers["content-length"] == String(size))
            // The cached head: at least the `head` bytes the pull was allowed, its first request's worth at most.
            c.expect(whole.body.count >= head && whole.body.count < size, "got \(whole.body.count) bytes")
            c.expect(whole.body == contents["A/one.mp3"]?.prefix(whole.body.count), "the body is not the track's first bytes")
            c.expect(wholeSeconds < 5, "the body ended after \(wholeSeconds) s")
            print("serve-offline: 503 for a hole after \(String(format: "%.0f", seconds * 1000)) ms, then \(String(format: "%.0f", secondsAgain * 1000)) ms; "
                + "a whole GET ended at the hole after \(String(format: "%.0f", wholeSeconds * 1000)) ms")
        }
        #expect(c.all.isEmpty, "\(c.all)")
    }

    /// A network that went away without a word (packets dropped: a dead Wi-Fi, a VPN down): the first request for
    /// missing bytes is answered 503 once serve's 10 s connect timeout ends (a pull's is 30 s, which a player
    /// waited through before), and the next at once. curl stands for a player that gives up after 25 s.
    @Test func aBlackHoledCloudIsAnsweredWithinServesConnectTimeout() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-blackhole")
        let size = 2 << 20, head = 256 << 10
        _ = try Self.library([("A/one.mp3", size)], in: dir)
        let (fake, env) = try await BinaryEnv.headOnly(root: dir.file("library"), head: head)
        let port = fake.port
        fake.stop()
        let hole = try await PythonFake.start("blackhole.py", arguments: [String(port)])
        defer { hole.stop() }
        let (serve, servePort) = try await env.serve()
        defer { serve.stop() }
        let url = "http://127.0.0.1:\(servePort)/tracks/lib/A/one.mp3"
        for attempt in ["first", "next"] {
            let out = try Tool.run("curl", ["-s", "-o", "/dev/null", "--max-time", "25", "-H", "Range: bytes=\(size / 2)-",
                                            "-w", "%{http_code}", url], timeout: 60)
            #expect(out.stdout == "503", "\(attempt) request: \(out.stdout) (curl exit \(out.status))")
        }
    }

    /// What players fetch through serve stays within the budget, as a pull keeps it: after tracks are played whole
    /// past it, the lowest-priority tails go (heads stay) and the track played last stays complete.
    @Test func serveKeepsTheCacheWithinItsBudget() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-budget")
        let size = 2 << 20
        let names = (1 ... 5).map { "A/\($0).mp3" }
        let contents = try Self.library(names.map { ($0, size) }, in: dir)
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL, extra: "max_size = \"6MiB\"\nmin_free = \"0B\"")
        let pulled = try env.run(["pull", "--remote", "lib"])
        #expect(pulled.status == 0, "\(pulled.stderr)")
        func status() throws -> (bytes: Int, budget: Int) {
            let out = try env.run(["cache", "status", "--json"]).stdout
            let object = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any] ?? [:]
            return ((object["bytes"] as? NSNumber)?.intValue ?? -1, (object["budget"] as? NSNumber)?.intValue ?? -1)
        }
        let before = try status()
        #expect(before.bytes <= before.budget && before.budget == 6 << 20, "\(before)")
        let rows = try InstantStartAcceptanceTests.listing(env)
        let heads = rows.filter { $0["state"] as? String == "head" }.compactMap { $0["path"] as? String }.sorted()
        #expect(heads.count >= 3, "after the pull: \(rows.map { "\($0["path"] ?? "?") \($0["state"] ?? "?")" })")

        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        // Three head-only tracks played whole, one after the other: 6 MiB more than the pull left.
        for path in heads.prefix(3) {
            let whole = try await offPool { try RawClient(port: port).get("/tracks/lib/\(path)") }
            #expect(whole.status == 200 && whole.body == contents[path], "\(path): \(whole.status), \(whole.body.count) bytes")
            try await Task.sleep(for: .milliseconds(200))
        }
        let within = try await eventually(20) { let now = try status(); return now.bytes <= now.budget }
        let after = try status()
        #expect(within, "the cache holds \(after.bytes) bytes of a \(after.budget) budget")
        let last = try InstantStartAcceptanceTests.listing(env).first { $0["path"] as? String == heads[2] }
        #expect(last?["state"] as? String == "cached", "the track played last: \(last ?? [:])")
        #expect(try InstantStartAcceptanceTests.listing(env).allSatisfy { ["head", "cached"].contains($0["state"] as? String ?? "") })
    }

    /// serve lists nothing itself: a remote never listed offers no track, and serve names it and what to run; a
    /// listing made while it runs shows at once (the index is read per request).
    @Test func aRemoteNeverListedIsNamedAndItsListingShowsWithoutARestart() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-unlisted")
        _ = try Self.library([("A/one.mp3", 64 << 10)], in: dir)
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL)
        let log = dir.file("serve.log")
        let (serve, port) = try await env.serve(["--log-file", log.path])
        defer { serve.stop() }
        let empty = try await offPool { try RawClient(port: port).get("/playlist.m3u") }
        #expect(String(decoding: empty.body, as: UTF8.self) == "#EXTM3U\n")
        let warned = await eventually {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            return text.contains("lib: no track of this remote is in the index yet") && text.contains("run 'cloudsync ls --remote lib'")
        }
        #expect(warned, "\((try? String(contentsOf: log, encoding: .utf8)) ?? "no log")")
        let listed = try env.run(["ls", "--remote", "lib"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let playlist = try await offPool { try RawClient(port: port).get("/playlist.m3u") }
        #expect(String(decoding: playlist.body, as: UTF8.self).contains("http://127.0.0.1:\(port)/tracks/lib/A/one.mp3"))
    }

    /// The network comes back: a response waiting at the hole goes on (held, as for mpd 0.23.12, which freezes on
    /// a cut), and after the cloud was away long enough for the background probe to back off (its next turn
    /// 8 s away), the first request for missing bytes probes at once and is served, not answered 503 until then.
    @Test func aCloudThatComesBackIsUsedByTheNextRequest() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-comeback")
        let size = 2 << 20, head = 256 << 10
        let contents = try Self.library([("A/one.mp3", size), ("A/two.ogg", size)], in: dir)
        let (headFake, env) = try await BinaryEnv.headOnly(root: dir.file("library"), head: head)
        let cloudPort = headFake.port
        headFake.stop()
        let (serve, port) = try await env.serve()
        defer { serve.stop() }

        // A whole GET by mpd 0.23.12 reaches the hole with the cloud away, waits there, and goes on once it is back.
        let held = try RawClient(port: port)
        held.send("GET /tracks/lib/A/one.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Music Player Daemon 0.23.12\r\n\r\n")
        async let reading = offPool { try held.readResponseUntilCut() }
        try await Task.sleep(for: .seconds(3))
        var cloud = try await FilesFake(root: dir.file("library"), port: cloudPort)
        let whole = try await reading
        #expect(whole.status == 200)
        #expect(whole.body == contents["A/one.mp3"], "\(whole.body.count) of \(size) bytes, or other bytes")

        // Away again, for 8 s: a request for missing bytes gets 503 at once, with Retry-After 1.
        cloud.stop()
        let first = try await offPool { try RawClient(port: port).get("/tracks/lib/A/two.ogg", headers: ["Range: bytes=\(size / 2)-"]) }
        #expect(first.status == 503)
        #expect(first.headers["retry-after"] == "1", "\(first.headers)")
        try await Task.sleep(for: .seconds(8))
        cloud = try await FilesFake(root: dir.file("library"), port: cloudPort)
        defer { cloud.stop() }
        let (back, seconds) = try await offPool {
            try timed { try RawClient(port: port).get("/tracks/lib/A/two.ogg", headers: ["Range: bytes=\(size / 2)-"]) }
        }
        #expect(back.status == 206, "\(back.status) \(String(decoding: back.body.prefix(300), as: UTF8.self))")
        #expect(back.body == contents["A/two.ogg"]?.suffix(from: size / 2))
        #expect(seconds < 5, "served after \(seconds) s")
        print("serve-comeback: the first request after the cloud came back was served in \(String(format: "%.0f", seconds * 1000)) ms")
    }

    /// A track replaced in the cloud by another of the same size after its head was cached: the response that
    /// sent the old head ends there (the new version's bytes never follow the old one's: a player would play a
    /// splice, a copy would be corrupt without an error); the next request gets the new version whole, verified.
    @Test func aTrackThatChangesInTheCloudIsNeverSplicedIntoAResponse() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-changed")
        let size = 2 << 20, head = 256 << 10
        let contents = try Self.library([("A/one.mp3", size)], in: dir)
        let (fake, env) = try await BinaryEnv.headOnly(root: dir.file("library"), head: head)
        defer { fake.stop() }
        try fake.setFaults("[]")
        var random = SeededRandom(seed: 91)
        let replaced = random.bytes(size)
        try replaced.write(to: dir.file("library/A/one.mp3"))
        let old = try #require(contents["A/one.mp3"])
        let (serve, port) = try await env.serve()
        defer { serve.stop() }

        let c = Checks()
        try await offPool {
            let client = try RawClient(port: port)
            client.send("GET /tracks/lib/A/one.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let first = try client.readResponseUntilCut()
            c.expect(first.status == 200 && first.headers["content-length"] == String(size), "\(first.status) \(first.headers)")
            c.expect(first.body.count >= head && first.body.count < size, "the response went on past the old head: \(first.body.count) bytes")
            c.expect(first.body == old.prefix(first.body.count), "the response holds bytes of the new version after the old head")
            let again = try RawClient(port: port).get("/tracks/lib/A/one.mp3")
            c.expect(again.status == 200 && again.body == replaced, "the next request: \(again.status), \(again.body.count) bytes, new version: \(again.body == replaced)")
        }
        #expect(c.all.isEmpty, "\(c.all)")
    }
}

extension FilesFake.Served {
    /// Bytes asked for by `Range: bytes=a-b`, nil without a closed range.
    var requestedCount: Int64? {
        guard let range, range.hasPrefix("bytes="), let dash = range.firstIndex(of: "-") else { return nil }
        guard let a = Int64(range[range.index(range.startIndex, offsetBy: 6) ..< dash]),
              let b = Int64(range[range.index(after: dash)...]) else { return nil }
        return b - a + 1
    }
}
