#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import CloudSyncCore
import CloudSyncServer
import Foundation
import Testing
import TestSupport

/// serve as an attack surface (issue #19): DNS rebinding, tokens, the bound address in URLs, hostile sizes.
@Suite(.serialized) struct ServeSecurityTests {
    /// A page whose name rebinds to 127.0.0.1 sends its own Host: without a token, serve refuses it before
    /// touching the index or the cloud; playlists never echo the Host.
    @Test func rebindingHostsAreRefusedWithoutAToken() async throws {
        let f = try Fixture(files: ["A/song.mp3": sourceBytes(300_000, seed: 3)])
        let c = Checks()
        try await offPool {
            for target in ["/", "/playlist.m3u", "/tracks/music/A/song.mp3"] {
                let evil = try RawClient(port: f.server.port)
                evil.send("GET \(target) HTTP/1.1\r\nHost: rebind.evil.example:\(f.server.port)\r\n\r\n")
                let r = try evil.readResponse()
                c.expect(r.status == 403, "\(target): \(r.status)")
                c.expect(!String(decoding: r.body, as: UTF8.self).contains("song"), "\(target) leaked the library")
            }
            for host in ["localhost:\(f.server.port)", "127.0.0.1", "[::1]:\(f.server.port)"] {
                let ok = try RawClient(port: f.server.port)
                ok.send("GET /playlist.m3u HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                let r = try ok.readResponse()
                c.expect(r.status == 200, "\(host): \(r.status)")
                // URLs carry the address the client connected to, not the Host it sent.
                c.expect(String(decoding: r.body, as: UTF8.self).contains("http://127.0.0.1:\(f.server.port)/tracks/music/A/song.mp3"))
            }
        }
        #expect(c.all.isEmpty, "\(c.all)")
        #expect(f.origin.gets("A_song.mp3") == 0, "a refused request made serve fetch from the cloud")

        // With a token any name may be used (the token is the protection), as a password too.
        let token = "0123456789abcdef-token"
        let t = try Fixture(files: ["A/song.mp3": sourceBytes(1000, seed: 4)], options: ServerOptions(port: 0, token: token))
        try await t.cacheCompletely("A/song.mp3")
        let basic = Data("mpd:\(token)".utf8).base64EncodedString()
        let wrong = Data("mpd:not-the-token-at-all".utf8).base64EncodedString()
        let statuses = try await offPool { () -> [Int] in
            try [("Authorization: Bearer \(token)", 200), ("Authorization: Basic \(basic)", 200), ("Authorization: Basic \(wrong)", 401)]
                .map { header, _ in
                    let client = try RawClient(port: t.server.port)
                    client.send("GET /tracks/music/A/song.mp3 HTTP/1.1\r\nHost: music.example\r\n\(header)\r\n\r\n")
                    return try client.readResponse().status
                }
        }
        #expect(statuses == [200, 200, 401])
    }

    /// An index entry of Int64.max bytes (a hostile listing) and `Range: bytes=-1` used to kill serve with an
    /// overflow trap; now every request gets an answer and serve keeps serving.
    @Test func aHostileSizeNeverCrashesServe() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-huge")
        try FileManager.default.createDirectory(at: dir.file("library"), withIntermediateDirectories: true)
        try Data("ok".utf8).write(to: dir.file("library/ok.mp3"))
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL)
        #expect(try env.run(["ls", "--remote", "lib"]).status == 0)
        let cache = try Cache.open(root: env.cacheDir)
        _ = try cache.upsert(remote: "lib", files: [RemoteFile(path: "huge.mp3", size: .max, modified: Date(timeIntervalSince1970: 1_700_000_000),
                                                               revision: "x")])
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let c = Checks()
        try await offPool {
            let requests: [[String]] = [["Range: bytes=-1"], ["Range: bytes=9223372036854775806-"], ["Range: bytes=0-"], [],
                                        ["Range: bytes=9223372036854775807-"], ["Range: bytes=-9223372036854775807"]]
            for headers in requests {
                let client = try RawClient(port: port)
                client.send("GET /tracks/lib/huge.mp3 HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n")
                let r = try client.readResponseUntilCut()
                c.expect([206, 200, 416, 502, 503].contains(r.status), "\(headers): \(r.status)")
                if r.status == 206 || r.status == 200 { c.expect(r.body.count < 1 << 30) }
            }
            let head = try RawClient(port: port).get("/tracks/lib/huge.mp3", method: "HEAD")
            c.expect(head.status == 200 && head.headers["content-length"] == String(Int64.max), "\(head.headers)")
            c.expect(try RawClient(port: port).get("/").status == 200)
            c.expect(try RawClient(port: port).get("/playlist.m3u").status == 200)
            let ok = try RawClient(port: port).get("/tracks/lib/ok.mp3")
            c.expect(ok.status == 200 && ok.body == Data("ok".utf8))
        }
        #expect(c.all.isEmpty, "\(c.all)")
        #expect(serve.process.isRunning, "serve died")
    }

    @Test func bindAndTokenOptions() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-opts")
        try FileManager.default.createDirectory(at: dir.file("library"), withIntermediateDirectories: true)
        let env = try BinaryEnv(davURL: "http://127.0.0.1:9/dav/")
        // IPv6 loopback: one pair of brackets in the URL.
        let (v6, v6Port) = try await env.serve(["--bind", "[::1]"])
        let line = try await v6.waitForLine(prefix: "listening on ")
        #expect(line == "http://[::1]:\(v6Port)/")
        v6.stop()
        // A short token is refused anywhere; off loopback a token is required.
        let short = try env.run(["serve", "--port", "0", "--bind", "0.0.0.0", "--token", "x"])
        #expect(short.status == 2)
        #expect(short.stderr.contains("at least 16"), "\(short.stderr)")
        #expect(try env.run(["serve", "--port", "0", "--bind", "0.0.0.0"]).status == 2)
        #expect(try env.run(["serve", "--port", "0", "--token", "env:NOT_SET_ANYWHERE"]).status == 2)
        // The token from a file, kept out of `ps`.
        let token = "a-token-from-a-file-0123456789"
        try (token + "\n").write(to: dir.file("token"), atomically: true, encoding: .utf8)
        let (fromFile, port) = try await env.serve(["--token", "file:\(dir.file("token").path)"])
        defer { fromFile.stop() }
        let statuses = try await offPool {
            (try RawClient(port: port).get("/").status, try RawClient(port: port).get("/?token=\(token)").status)
        }
        #expect(statuses == (401, 200))
    }
}
