#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import CloudSyncServer
import Foundation
import Synchronization
import Testing
import TestSupport

@Suite(.serialized) struct ServeTests {
    static let size = 1_300_000

    /// Range requests return exactly the source bytes whether the track is complete, partial or missing.
    @Test func rangesReturnSourceBytesForCachedPartialAndMissingTracks() async throws {
        let files = ["A/cached.mp3": sourceBytes(Self.size, seed: 1), "A/partial.flac": sourceBytes(Self.size, seed: 2),
                     "A/missing.ogg": sourceBytes(Self.size, seed: 3)]
        let f = try Fixture(files: files)
        try await f.cacheCompletely("A/cached.mp3")
        try f.cachePartially("A/partial.flac", [0 ..< 100_000, 300_000 ..< 400_000])
        let n = Self.size
        let table: [(String?, Int, Range<Int>)] = [
            (nil, 200, 0 ..< n),
            ("bytes=0-0", 206, 0 ..< 1),
            ("bytes=100-199", 206, 100 ..< 200),
            ("bytes=99990-100010", 206, 99_990 ..< 100_011),
            ("bytes=350000-", 206, 350_000 ..< n),
            ("bytes=-1000", 206, n - 1000 ..< n),
            ("bytes=1000000-1999999", 206, 1_000_000 ..< n),
            ("bytes=0-1,5-6", 200, 0 ..< n),
        ]
        let c = Checks()
        try await offPool {
            for path in files.keys.sorted() {
                let client = try RawClient(port: f.server.port)
                let source = files[path]!
                for (range, status, slice) in table {
                    let response = try client.get("/tracks/music/\(path)", headers: range.map { ["Range: \($0)"] } ?? [])
                    c.expect(response.status == status, "\(path) \(range ?? "-")")
                    c.expect(response.body == source.subdata(in: slice), "\(path) \(range ?? "-")")
                    c.expect(response.headers["accept-ranges"] == "bytes")
                    if status == 206 {
                        c.expect(response.headers["content-range"] == "bytes \(slice.lowerBound)-\(slice.upperBound - 1)/\(n)")
                    }
                }
                let unsatisfiable = try client.get("/tracks/music/\(path)", headers: ["Range: bytes=\(n)-"])
                c.expect(unsatisfiable.status == 416)
                c.expect(unsatisfiable.headers["content-range"] == "bytes */\(n)")
                let head = try client.get("/tracks/music/\(path)", method: "HEAD")
                c.expect(head.status == 200)
                c.expect(head.headers["content-length"] == String(n))
                c.expect(head.headers["etag"]?.hasPrefix("\"cs-") == true)
                c.expect(head.headers["last-modified"] == "Tue, 14 Nov 2023 22:13:20 GMT")
                // If-Range with a stale validator: the whole (current) file.
                let stale = try client.get("/tracks/music/\(path)", headers: ["Range: bytes=5-9", "If-Range: \"old\""])
                c.expect(stale.status == 200)
                c.expect(stale.body == source)
                let fresh = try client.get("/tracks/music/\(path)", headers: ["Range: bytes=5-9", "If-Range: \(head.headers["etag"] ?? "")"])
                c.expect(fresh.status == 206)
                c.expect(fresh.body == source.subdata(in: 5 ..< 10))
            }
        }
        #expect(c.all.isEmpty, "\(c.all)")
        #expect(f.origin.gets("A_cached.mp3") == 0, "a complete track never goes to the cloud")
        #expect(f.origin.bytes("A_partial.flac") <= Self.size - 200_000, "cached ranges of a partial track are not fetched again")
        #expect(f.origin.refused == 0)
        let port = f.server.port
        let types = try await offPool { try RawClient(port: port).get("/tracks/music/A/partial.flac", method: "HEAD").headers["content-type"] }
        #expect(types == "audio/flac")
        // Fully fetched on demand → verified (SHA-256) and promoted like a pulled track.
        #expect(try await eventually { try f.cache.entry(remote: "music", path: "A/missing.ogg")?.state == .complete })
        #expect(try await eventually { try f.cache.entry(remote: "music", path: "A/partial.flac")?.state == .complete })
    }

    /// The tracks clients have open (which serve's budget leaves alone, ``OpenTracks``): counted per connection
    /// until it lets go — it asks for another track, or closes — whatever serves them: a remote serve fetches for,
    /// and one served from the cache only (before, only the first was counted, so the budget could shrink a
    /// cached-only track under its player, which then got an error). A claim counts once, however often released.
    @Test func tracksOpenThroughServeAreCountedUntilTheirConnectionLetsGo() async throws {
        let f = try Fixture(files: ["a.mp3": sourceBytes(100_000, seed: 1), "b.mp3": sourceBytes(100_000, seed: 2)])
        try await f.cacheCompletely("a.mp3")
        try await f.cacheCompletely("b.mp3")
        let cachedOnly = TrackServer(cache: f.cache, sources: [:], unavailable: ["music": "no token stored"], options: ServerOptions(port: 0))
        try cachedOnly.start()
        defer { cachedOnly.stop() }
        let a = RemotePath(remote: "music", path: "a.mp3"), b = RemotePath(remote: "music", path: "b.mp3")
        for server in [f.server, cachedOnly] {
            let port = server.port
            let one = try RawClient(port: port), two = try RawClient(port: port)
            let before = server.openTracks.closesSoFar
            for client in [one, two] {
                #expect(try await offPool { try client.get("/tracks/music/a.mp3", headers: ["Range: bytes=0-9"]).status } == 206)
            }
            #expect(server.openTracks.tracks == [a])
            #expect(try await offPool { try one.get("/tracks/music/b.mp3", headers: ["Range: bytes=0-9"]).status } == 206)
            #expect(server.openTracks.tracks == [a, b], "the second connection still holds a")
            two.hangUp()
            #expect(await eventually { server.openTracks.tracks == [b] })
            one.hangUp()
            #expect(await eventually { server.openTracks.tracks.isEmpty })
            #expect(server.openTracks.closesSoFar == before + 3)
        }
        let claim = f.server.openTracks.open(a), before = f.server.openTracks.closesSoFar
        claim.release()
        claim.release()
        #expect(f.server.openTracks.tracks.isEmpty && f.server.openTracks.closesSoFar == before + 1)
    }

    /// Two clients asking for the same missing track at once share one fetch: each byte leaves the origin once.
    @Test func missingTrackIsFetchedOnceForTwoClients() async throws {
        let data = sourceBytes(3 << 20, seed: 9)
        let f = try Fixture(files: ["song.mp3": data])
        let port = f.server.port
        let bodies = Locked<[Data]>([])
        for _ in 0 ..< 2 {
            Thread.detachNewThread {
                let body = (try? RawClient(port: port).get("/tracks/music/song.mp3").body) ?? Data()
                bodies.withLock { $0.append(body) }
            }
        }
        #expect(await eventually { bodies.withLock { $0.count } == 2 })
        #expect(bodies.withLock { $0.allSatisfy { $0 == data } })
        #expect(f.origin.bytes("song.mp3") == data.count, "each byte fetched once")
        // GETs grow from one block (64 KiB) to a chunk (256 KiB here) as the clients read on.
        #expect(f.origin.gets("song.mp3") <= (data.count + (256 << 10) - 1) / (256 << 10) + 4, "\(f.origin.gets("song.mp3")) GETs")
        #expect(try await eventually { try f.cache.entry(remote: "music", path: "song.mp3")?.state == .complete })
        #expect(FileManager.default.contentsEqual(atPath: f.cache.tracksURL.appendingPathComponent("music/song.mp3").path,
                                                 andPath: { let u = f.directory.file("expected"); try? data.write(to: u); return u.path }()))
    }

    /// A client that reads a missing track as fast as it arrives (ffmpeg probing, mpd filling its buffer, a copy
    /// over /dav/) reads on into a hole each time a fetch session has fetched its window and retired. The next
    /// session starts at once: neither the attach just made nor the retired session's writer, still letting go
    /// of its lock, counts as another process's writer, which is waited for a takeover interval (10 minutes
    /// here, so a wait shows as a body cut by the client's 10 s read timeout). Before, each such hole cost up to
    /// a second: 1.9 MB from a local server took 1–10 s.
    @Test func aFastReaderNeverWaitsForItsOwnRetiredSessions() async throws {
        let tracks = (0 ..< 3).map { ("fast\($0).flac", sourceBytes(3 << 20, seed: 12 + UInt64($0))) }
        let f = try Fixture(files: Dictionary(uniqueKeysWithValues: tracks),
                            onDemandOptions: OnDemandOptions(chunkSize: 256 << 10, takeoverInterval: .seconds(600)))
        let port = f.server.port
        for (path, data) in tracks {
            let body = try await offPool { try RawClient(port: port).get("/tracks/music/\(path)").body }
            let whole = body == data  // (a Bool: Testing's diff of two 3 MiB collections would take minutes)
            #expect(whole, "\(path): \(body.count) of \(data.count) bytes")
        }
        let sessions = f.logLines.withLock { $0.filter { $0.contains("on demand") }.count }
        #expect(sessions > tracks.count, "each track came in one session: nothing was tested")
        #expect(!f.logLines.withLock { $0.contains { $0.contains("being written by another process") } })
    }

    /// A fetch session retires once it has fetched its window. When the player's stream next needs those bytes —
    /// still waiting in that request, or asking again on the same connection — its view of the index may be
    /// older than the session (re-read every `indexPollInterval`; 10 minutes here, so it stays stale): it finds
    /// them missing and opens another session, which finds nothing to fetch. That session must let the entry's
    /// writer lock go at once. Before, nothing retired it while the player kept its connection open, and a
    /// second `serve` on the same cache answered nothing for that track: its reader waited for checkpoints that
    /// never came (the soak's 30 s hangs; with the default 50 ms a race).
    @Test func aSessionWithNothingToFetchLetsTheEntryGo() async throws {
        let data = sourceBytes(1 << 20, seed: 21)
        let f = try Fixture(files: ["again.mp3": data],
                            onDemandOptions: OnDemandOptions(chunkSize: 64 << 10, blockSize: 64 << 10, readAhead: 64 << 10,
                                                             indexPollInterval: .seconds(600)))
        let free = { () -> Bool in
            guard let writer = try? f.cache.openWriter(remote: "music", path: "again.mp3", wait: false) else { return false }
            writer.close()
            return true
        }
        let client = try RawClient(port: f.server.port)
        let first = try await offPool { try client.get("/tracks/music/again.mp3", headers: ["Range: bytes=0-1023"]) }
        #expect(first.status == 206 && first.body == data.prefix(1024))
        // The session that fetched the bytes has retired (another writer can take the entry), and the connection
        // stays open.
        #expect(await eventually(10, free))
        let second = try await offPool { try client.get("/tracks/music/again.mp3", headers: ["Range: bytes=0-1023"]) }
        #expect(second.status == 206 && second.body == data.prefix(1024))
        let sessions = f.logLines.withLock { $0.filter { $0.contains("on demand") }.count }
        #expect(sessions == 2, "no session found its bytes already there: nothing was tested")
        #expect(free(), "the session with nothing to fetch still holds the entry")
        #expect(f.origin.gets("again.mp3") == 1)
        withExtendedLifetime(client) {}
    }

    /// A complete track whose file was deleted from tracks/ (by hand, to free space) is fetched again and played:
    /// before, serve answered 502 "open failed … No such file" until `cache verify` ran.
    @Test func aCompleteTrackDeletedFromTheDiskIsFetchedAgain() async throws {
        let data = sourceBytes(300_000, seed: 5)
        let f = try Fixture(files: ["Album/kept.mp3": data])
        try await f.cacheCompletely("Album/kept.mp3")
        try FileManager.default.removeItem(at: f.cache.tracksURL.appendingPathComponent("music/Album"))
        let response = try await offPool { try RawClient(port: f.server.port).get("/tracks/music/Album/kept.mp3") }
        #expect(response.status == 200)
        #expect(response.body == data)
        #expect(f.origin.gets("Album_kept.mp3") >= 1)
        #expect(try await eventually { try f.cache.entry(remote: "music", path: "Album/kept.mp3")?.state == .complete })
    }

    /// A track deleted from the cloud since the last listing: the player gets 404 as soon as the fetch fails, not
    /// a 504 after the first-byte timeout while the fetch is repeated every takeover interval (the session that
    /// failed retires at once, and its error used to be looked at only while it was open). The next request
    /// tries again, once.
    @Test func aFetchThatFailsEndsTheRequestAtOnce() async throws {
        let data = sourceBytes(300_000, seed: 3)
        let f = try Fixture(files: ["here.mp3": data, "gone.mp3": data], gone: ["gone.mp3"],
                            options: ServerOptions(port: 0, firstByteTimeout: .seconds(20)))
        let port = f.server.port
        for round in 1 ... 2 {
            let started = ContinuousClock.now
            let response = try await offPool { try RawClient(port: port).get("/tracks/music/gone.mp3") }
            #expect(response.status == 404, "round \(round): \(response.status) after \(ContinuousClock.now - started)")
            #expect(String(decoding: response.body, as: UTF8.self).contains("music:gone.mp3: downloading gone.mp3"))
            // The link is resolved again once after a 404 (links expire), then the fetch gives up.
            let gets = f.origin.gets("gone.mp3")
            #expect(gets >= round && gets <= 2 * round, "\(gets) GETs of a file gone after \(round) requests")
            #expect(f.logLines.withLock { $0.filter { $0.contains("fetching music:gone.mp3 failed") }.count } == round)
        }
        #expect(try await offPool { try RawClient(port: port).get("/tracks/music/here.mp3").body } == data)
    }

    /// A missing track is fetched and served while every thread of Swift's cooperative pool is blocked (by other
    /// code of the process): serve's fetches run on a thread of their own. (Before, a GET here waited for a
    /// cooperative thread, and under a loaded test run a client saw no response head for 10 s.)
    @Test func missingTrackIsServedWhileTheCooperativePoolIsBlocked() async throws {
        let data = sourceBytes(700_000, seed: 12)
        let f = try Fixture(files: ["blocked.opus": data])
        let port = f.server.port
        let outcome = try await offPool { () -> (body: Data?, blockersRan: Bool) in
            let width = ProcessInfo.processInfo.activeProcessorCount
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            for _ in 0 ..< width {
                Task.detached {
                    started.signal()
                    release.wait()
                }
            }
            defer { for _ in 0 ..< width { release.signal() } }
            // Every cooperative thread now waits (other tests may hold some first: wait for ours to start).
            var running = 0
            for _ in 0 ..< width where started.wait(timeout: .now() + 60) == .success { running += 1 }
            guard running == width else { return (nil, false) }
            return (try RawClient(port: port).get("/tracks/music/blocked.opus", headers: ["Range: bytes=300000-"]).body, true)
        }
        #expect(outcome.blockersRan, "the tasks that block the pool never started")
        #expect(outcome.body == data.subdata(in: 300_000 ..< data.count))
        #expect(f.origin.gets("blocked.opus") >= 1)
    }

    /// A client that asks for a little and leaves gets its read-ahead (2 chunks), not the whole track.
    @Test func disconnectEndsReadAhead() async throws {
        let data = sourceBytes(6 << 20, seed: 4)
        let f = try Fixture(files: ["long.flac": data])
        let port = f.server.port
        let first = try await offPool { try RawClient(port: port).get("/tracks/music/long.flac", headers: ["Range: bytes=0-999"]).body }
        #expect(first == data.subdata(in: 0 ..< 1000))
        #expect(await eventually { f.onDemand.activeSessions == 0 })
        #expect(f.origin.bytes("long.flac") <= 3 * (256 << 10), "fetched \(f.origin.bytes("long.flac")) bytes")
        // The session leaves the map first, then closes its writer, whose last checkpoint commits the bytes.
        #expect(try await eventually { try f.cache.entry(remote: "music", path: "long.flac")?.state == .partial })
    }

    /// While another writer (a pull) holds the entry, serve waits for its checkpoints instead of fetching.
    @Test func waitsForAnotherWritersCheckpoints() async throws {
        let data = sourceBytes(500_000, seed: 5)
        let f = try Fixture(files: ["held.mp3": data])
        let writer = try f.cache.openWriter(remote: "music", path: "held.mp3")
        let port = f.server.port
        let response = Locked<RawClient.Response?>(nil)
        let thread = Thread {
            let r = try? RawClient(port: port).get("/tracks/music/held.mp3", headers: ["Range: bytes=1000-1999"])
            response.withLock { $0 = r }
        }
        thread.start()
        try await Task.sleep(for: .milliseconds(300))
        #expect(response.withLock { $0 } == nil, "nothing can be answered before the writer checkpoints")
        try data.withUnsafeBytes { try writer.write($0, at: 0) }
        try writer.checkpoint()
        #expect(await eventually { response.withLock { $0 } != nil })
        #expect(response.withLock { $0?.body } == data.subdata(in: 1000 ..< 2000))
        #expect(f.origin.gets("held.mp3") == 0, "serve did not fetch what the other writer was fetching")
        writer.close()
    }

    /// Hostile and malformed requests get 4xx/5xx without reaching outside the cache, and the server keeps going.
    @Test func traversalAndMalformedRequests() async throws {
        let f = try Fixture(files: ["ok.mp3": sourceBytes(1000, seed: 6)])
        try await f.cacheCompletely("ok.mp3")
        let long = String(repeating: "a", count: 5000)
        let table: [(String, Int)] = [
            ("GET /tracks/music/../../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music/%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music/..%5C..%5Cetc%5Cpasswd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music/ok.mp3%00.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/%2e%2e/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music//etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music/./ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /tracks/music/\(long) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414),
            ("GET /tracks/music/%zz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
            ("GET /tracks/other/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("GET /../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("POST /tracks/music/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405),
            ("DELETE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405),
            ("GET /tracks/music/ok.mp3 HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 505),
            ("GET /tracks/music/ok.mp3 HTTP/1.1\r\n\r\n", 400),
            ("HELLO\r\n\r\n", 400),
            ("GET /x\u{1} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
            ("GET /tracks/music/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: \(String(repeating: "b", count: 9000))\r\n\r\n", 431),
            ("GET /tracks/music/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            ("GET /tracks/music/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 70000\r\n\r\n0123456789", 413),
            // A small body is read and ignored by GET (WebDAV clients send bodies; PROPFIND reads them).
            ("GET /tracks/music/ok.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n0123456789", 200),
        ]
        let c = Checks()
        try await offPool {
            for (request, status) in table {
                let client = try RawClient(port: f.server.port)
                client.send(request)
                let response = try client.readResponse()
                c.expect(response.status == status, "\(request.prefix(60))")
                c.expect(!response.body.contains(Data("root:".utf8)))
            }
            // A raw NUL in the request line.
            let nul = try RawClient(port: f.server.port)
            nul.send(Array("GET /tracks/music/ok".utf8) + [0] + Array(".mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            c.expect(try nul.readResponse().status == 400)
            // Still serving.
            let ok = try RawClient(port: f.server.port).get("/tracks/music/ok.mp3")
            c.expect(ok.status == 200)
            c.expect(ok.body == f.contents["ok.mp3"])
        }
        #expect(c.all.isEmpty, "\(c.all)")
    }

    /// 200 connections at once each get their bytes; a 257th beyond a small limit gets 503.
    @Test func manyConcurrentConnections() async throws {
        let data = sourceBytes(400_000, seed: 7)
        let f = try Fixture(files: ["x.mp3": data])
        try await f.cacheCompletely("x.mp3")
        let c = Checks()
        try await offPool {
            var clients: [RawClient] = []
            for _ in 0 ..< 200 { clients.append(try RawClient(port: f.server.port)) }
            for (i, client) in clients.enumerated() {
                client.send("GET /tracks/music/x.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=\(i * 1000)-\(i * 1000 + 1999)\r\n\r\n")
            }
            for (i, client) in clients.enumerated() {
                let r = try client.readResponse()
                c.expect(r.status == 206)
                c.expect(r.body == data.subdata(in: i * 1000 ..< i * 1000 + 2000))
            }
            clients.removeAll()
        }
        #expect(c.all.isEmpty, "\(c.all)")
        #expect(await eventually { f.server.openConnections == 0 })

        let small = try Fixture(files: ["x.mp3": data], options: ServerOptions(port: 0, maxConnections: 2))
        let smallPort = small.server.port
        let refused = try await offPool { () -> Int in
            let a = try RawClient(port: smallPort), b = try RawClient(port: smallPort)
            _ = try a.get("/"); _ = try b.get("/")
            let third = try RawClient(port: smallPort)
            return try withExtendedLifetime((a, b)) { try third.readResponse().status }
        }
        #expect(refused == 503)
    }

    /// A client vanishing mid-body or stalling in its head never takes the server down.
    @Test func vanishingAndSlowClients() async throws {
        let data = sourceBytes(8 << 20, seed: 8)
        let f = try Fixture(files: ["big.wav": data], options: ServerOptions(port: 0, headerTimeout: .milliseconds(300)))
        try await f.cacheCompletely("big.wav")
        let c = Checks()
        try await offPool {
            for _ in 0 ..< 5 {
                let client = try RawClient(port: f.server.port)
                client.send("GET /tracks/music/big.wav HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                var chunk = [UInt8](repeating: 0, count: 1000)
                _ = recv(client.fd, &chunk, chunk.count, 0)
            }
            let slow = try RawClient(port: f.server.port)
            slow.send("GET /tracks/music/big.wav HTTP/1.1\r\nHo")
            let answer = String(decoding: slow.readUntilClosed(), as: UTF8.self)
            c.expect(answer.hasPrefix("HTTP/1.1 408"))
        }
        #expect(c.all.isEmpty, "\(c.all)")
        #expect(await eventually { f.server.openConnections == 0 })
        let port = f.server.port
        let r = try await offPool { try RawClient(port: port).get("/tracks/music/big.wav", headers: ["Range: bytes=-10"]) }
        #expect(r.body == data.subdata(in: data.count - 10 ..< data.count))
    }

    @Test func tokenIsRequiredAndNeverLogged() async throws {
        let token = "s3cret-token-value"
        let f = try Fixture(files: ["t.mp3": sourceBytes(100, seed: 9)], options: ServerOptions(port: 0, token: token))
        try await f.cacheCompletely("t.mp3")
        let c = Checks()
        try await offPool {
            c.expect(try RawClient(port: f.server.port).get("/tracks/music/t.mp3").status == 401)
            c.expect(try RawClient(port: f.server.port).get("/tracks/music/t.mp3?token=wrong").status == 401)
            c.expect(try RawClient(port: f.server.port).get("/tracks/music/t.mp3?token=\(token)").status == 200)
            c.expect(try RawClient(port: f.server.port).get("/tracks/music/t.mp3", headers: ["Authorization: Bearer \(token)"]).status == 200)
            let playlist = try RawClient(port: f.server.port).get("/playlist.m3u?token=\(token)")
            c.expect(String(decoding: playlist.body, as: UTF8.self).contains("/tracks/music/t.mp3?token=\(token)"))
        }
        #expect(c.all.isEmpty, "\(c.all)")
        let lines = f.logLines.withLock { $0 }
        #expect(lines.contains { $0.contains("GET /tracks/music/t.mp3 200") })
        #expect(!lines.contains { $0.contains(token) })
    }

    @Test func playlistAndIndex() async throws {
        let f = try Fixture(files: ["A/one.mp3": sourceBytes(10, seed: 1), "B/<b>&\"two\".flac": sourceBytes(10, seed: 2)])
        try await f.cacheCompletely("A/one.mp3")
        let c = Checks()
        try await offPool {
            let all = String(decoding: try RawClient(port: f.server.port).get("/playlist.m3u").body, as: UTF8.self)
            c.expect(all == """
            #EXTM3U
            #EXTINF:-1,one
            http://127.0.0.1:\(f.server.port)/tracks/music/A/one.mp3
            #EXTINF:-1,<b>&"two"
            http://127.0.0.1:\(f.server.port)/tracks/music/B/%3Cb%3E%26%22two%22.flac

            """)
            let cached = String(decoding: try RawClient(port: f.server.port).get("/playlist.m3u?cached=1&remote=music").body, as: UTF8.self)
            c.expect(cached.components(separatedBy: "#EXTINF").count == 2)
            c.expect(try RawClient(port: f.server.port).get("/playlist.m3u?remote=nope").status == 404)
            let index = try RawClient(port: f.server.port).get("/")
            c.expect(index.status == 200)
            let html = String(decoding: index.body, as: UTF8.self)
            c.expect(html.contains("&lt;b&gt;&amp;&quot;two&quot;.flac"))
            c.expect(!html.contains("<b>&"))
            c.expect(!html.lowercased().contains("<script"))
            c.expect(html.contains("cached"))
        }
        #expect(c.all.isEmpty, "\(c.all)")
    }
}
