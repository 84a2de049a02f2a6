@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Testing
@testable import CloudSyncServer

@Suite struct RangeHeaderTests {
    static let cases: [(String?, Int64, ByteRangeRequest)] = [
        (nil, 1000, .whole),
        ("bytes=0-99", 1000, .partial(0 ..< 100)),
        ("bytes=100-", 1000, .partial(100 ..< 1000)),
        ("bytes=-100", 1000, .partial(900 ..< 1000)),
        ("bytes=-5000", 1000, .partial(0 ..< 1000)),
        ("bytes=990-5000", 1000, .partial(990 ..< 1000)),
        ("bytes=999-999", 1000, .partial(999 ..< 1000)),
        ("BYTES = 5-9", 1000, .whole),
        ("Bytes=5-9", 1000, .partial(5 ..< 10)),
        ("bytes=1000-", 1000, .unsatisfiable),
        ("bytes=1000-2000", 1000, .unsatisfiable),
        ("bytes=-0", 1000, .unsatisfiable),
        ("bytes=0-", 0, .unsatisfiable),
        ("bytes=-1", 0, .unsatisfiable),
        ("bytes=0-1,5-6", 1000, .whole),
        ("bytes=9-5", 1000, .whole),
        ("bytes=a-b", 1000, .whole),
        ("bytes=-", 1000, .whole),
        ("items=0-1", 1000, .whole),
        ("bytes=99999999999999999999-", 1000, .whole),
        ("bytes=+5-9", 1000, .whole),
        // A hostile size in the index (Int64.max): nothing overflows.
        ("bytes=-1", .max, .partial(.max - 1 ..< .max)),
        ("bytes=9223372036854775806-", .max, .partial(.max - 1 ..< .max)),
        ("bytes=0-9223372036854775807", .max, .partial(0 ..< .max)),
        ("bytes=9223372036854775807-", .max, .unsatisfiable),
        ("bytes=9223372036854775808-", 1000, .whole),
        ("bytes=5-9223372036854775807", 1000, .partial(5 ..< 1000)),
        ("bytes=-9223372036854775807", 1000, .partial(0 ..< 1000)),
        ("bytes=0-0", -1, .unsatisfiable),
    ]

    @Test(arguments: cases.indices)
    func resolves(_ i: Int) {
        let (header, size, expected) = Self.cases[i]
        #expect(ByteRangeRequest.resolve(header, size: size) == expected, "Range: \(header ?? "nil")")
    }
}

@Suite struct RequestParserTests {
    static func parse(_ text: String, limits: RequestLimits = RequestLimits()) -> Result<RequestHead, RequestError> {
        let bytes = Array(text.utf8)
        guard let end = RequestParser.headEnd(in: bytes) else { return .failure(RequestError(status: 0, reason: "incomplete")) }
        do { return .success(try RequestParser.parse(bytes[0 ..< end], limits: limits)) } catch { return .failure(error) }
    }

    static let refusals: [(String, Int)] = [
        ("GET /x HTTP/1.1\r\n\r\n", 400),  // no Host
        ("GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ("GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        ("GET /x FTP/1.0\r\n\r\n", 400),
        ("GET  /x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /x\r\n\r\n", 400),
        ("GET http://h/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("G(T /x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost : a\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\u{01}\r\n\r\n", 400),
        ("GET /x\u{0} HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        ("PROPFIND /x HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n", 413),
        ("PROPFIND /x HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400),
        ("PROPFIND /x HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
        ("GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", 400),
        ("GET /\(String(repeating: "a", count: 5000)) HTTP/1.1\r\nHost: a\r\n\r\n", 414),
        ("GET /x HTTP/1.1\r\nHost: a\r\nX: \(String(repeating: "b", count: 9000))\r\n\r\n", 431),
        ("GET /x HTTP/1.1\r\nHost: a\r\n" + String(repeating: "X-A: 1\r\n", count: 70) + "\r\n", 431),
    ]

    @Test(arguments: refusals.indices)
    func refuses(_ i: Int) {
        let (text, status) = Self.refusals[i]
        switch Self.parse(text) {
        case .success(let head): Issue.record("accepted \(head.method) \(head.target) for case \(i)")
        case .failure(let error): #expect(error.status == status, "case \(i): \(error.reason)")
        }
    }

    @Test func acceptsBareLineFeedsAndHTTP10() throws {
        let head = try Self.parse("\r\nGET /tracks/a/b?x=1 HTTP/1.0\nRange:  bytes=0-1 \n\n").get()
        #expect(head.method == "GET")
        #expect(head.path == "/tracks/a/b")
        #expect(head.query == "x=1")
        #expect(head.header("range") == "bytes=0-1")
        #expect(head.keepAlive == false)
        let kept = try Self.parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").get()
        #expect(kept.keepAlive)
        let closing = try Self.parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").get()
        #expect(closing.keepAlive == false)
    }

    @Test func partialHeadLimits() {
        #expect(throws: RequestError.self) { try RequestParser.checkPartial(Array(repeating: 0x61, count: 4097), limits: RequestLimits()) }
        #expect(throws: RequestError.self) {
            try RequestParser.checkPartial(Array("GET / HTTP/1.1\r\n".utf8) + Array(repeating: 0x61, count: 8200), limits: RequestLimits())
        }
        #expect(throws: Never.self) { try RequestParser.checkPartial(Array("GET / HTTP/1.1\r\nHost: a\r\n".utf8), limits: RequestLimits()) }
    }
}

@Suite struct TrackPathTests {
    static let table: [(String, TrackPaths.Parsed)] = [
        ("music/Album/a%20b.mp3", .track(remote: "music", path: "Album/a b.mp3")),
        ("music/%D0%9A%D0%B8%D0%BD%D0%BE.mp3", .track(remote: "music", path: "Кино.mp3")),
        ("my%2Fremote/x.mp3", .track(remote: "my/remote", path: "x.mp3")),
        ("music/AC%5CDC.mp3", .track(remote: "music", path: "AC\\DC.mp3")),
        ("music/a+b.mp3", .track(remote: "music", path: "a+b.mp3")),
        ("music/../etc/passwd", .refused),
        ("music/%2e%2e/%2E%2E/etc/passwd", .refused),
        ("music/a/%2e%2e%2fb", .refused),
        ("music/..%5C..%5Cwindows", .refused),
        ("music/a\\..\\b", .refused),
        ("music/./a.mp3", .refused),
        ("../x.mp3", .refused),
        ("%2e%2e/x.mp3", .refused),
        ("music/a%00.mp3", .refused),
        ("music/a%0A.mp3", .refused),
        ("music//a.mp3", .refused),
        ("music/", .refused),
        ("music", .refused),
        ("/a.mp3", .refused),
        ("music/" + String(repeating: "a", count: 5000), .refused),
        ("music/%zz.mp3", .malformed),
        ("music/%4", .malformed),
        ("music/%C3%28.mp3", .malformed),
    ]

    @Test(arguments: table.indices)
    func parses(_ i: Int) {
        let (encoded, expected) = Self.table[i]
        #expect(TrackPaths.parse(afterPrefix: encoded[...]) == expected, "\(encoded)")
    }

    @Test func encodingRoundTrips() {
        for (remote, path) in [("music", "A/b c/Кино & 東京 🎵.opus"), ("my/remote", "x%y+z?#.mp3"), ("r", "AC\\DC/it's.ogg")] {
            let url = TrackPaths.urlPath(remote: remote, path: path)
            #expect(url.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
            #expect(TrackPaths.parse(afterPrefix: url.dropFirst("/tracks/".count)) == .track(remote: remote, path: path))
        }
    }

    @Test func queryItems() {
        let items = TrackPaths.queryItems("remote=my+music&cached=1&token=a%2Bb&bad=%zz")
        #expect(items.map(\.0) == ["remote", "cached", "token"])
        #expect(items.map(\.1) == ["my music", "1", "a+b"])
    }
}

@Suite struct PagesTests {
    @Test func playlistTitlesAndURLs() throws {
        let m3u = Playlist.m3u([], baseURL: "http://127.0.0.1:8765")
        #expect(m3u == "#EXTM3U\n")
        #expect(Playlist.title(of: "Artist/Album/01 Song.flac") == "01 Song")
        #expect(Playlist.title(of: "weird\nname.mp3") == "weird name")
        #expect(Playlist.title(of: "noext") == "noext")
    }

    @Test func htmlEscapesEverything() {
        #expect(Markup.escape("<script>alert('x')</script> & \"q\"") == "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;")
        #expect(Markup.escape("a\u{1}b\u{FFFE}c\td") == "a\u{FFFD}b\u{FFFD}c\td", "characters XML cannot carry")
    }

    /// Tags are remote input: the index page escapes them like names, and a playlist line never breaks.
    @Test func hostileTagsInTheIndexPageAndPlaylist() {
        let tags = #"{"album":"<i>A</i>","artist":"<script>x</script>","title":"T\nitle & \"q\""}"#
        let row = CacheEntryInfo(remote: "r", file: RemoteFile(path: "a.mp3", size: 10, modified: Date(timeIntervalSince1970: 0)),
                                 state: .missing, presentBytes: 0, localPath: "r/a.mp3", tracksURL: URL(fileURLWithPath: "/tmp/t"),
                                 pinned: false, lastAccess: Date(timeIntervalSince1970: 0), startSet: nil, headPresent: false,
                                 added: Date(timeIntervalSince1970: 0), lastPlayed: nil, outdatedTrackBytes: 0, tags: tags, duration: 65.4)
        let html = IndexPage.html([row], remotes: ["r"], unavailable: [:], token: nil)
        #expect(html.contains("<td>1:05</td><td>&lt;script&gt;x&lt;/script&gt; – T itle &amp; &quot;q&quot;</td><td>&lt;i&gt;A&lt;/i&gt;</td>"), "\(html)")
        #expect(!html.contains("<script>") && !html.contains("<i>"))
        #expect(Playlist.m3u([row], baseURL: "http://h") == "#EXTM3U\n#EXTINF:65,<script>x</script> - T itle & \"q\"\nhttp://h/tracks/r/a.mp3\n")
    }

    @Test func constantTimeTokenComparison() {
        #expect(TrackServer.constantTimeEqual(Array("secret".utf8), Array("secret".utf8)))
        #expect(!TrackServer.constantTimeEqual(Array("secret".utf8), Array("secreT".utf8)))
        #expect(!TrackServer.constantTimeEqual(Array("secret".utf8), Array("secret2".utf8)))
        #expect(!TrackServer.constantTimeEqual([], Array("x".utf8)))
    }

    @Test func validatorsFollowTheFingerprint() {
        let a = RemoteFile(path: "a.mp3", size: 10, modified: Date(timeIntervalSince1970: 1_700_000_000), revision: "r1")
        var b = a
        b.revision = "r2"
        #expect(TrackMetadata.etag(for: a) != TrackMetadata.etag(for: b))
        #expect(TrackMetadata.etag(for: a) == TrackMetadata.etag(for: a))
        #expect(TrackMetadata.httpDate(a.modified) == "Tue, 14 Nov 2023 22:13:20 GMT")
        #expect(TrackMetadata.ifRangeMatches(TrackMetadata.etag(for: a), file: a))
        #expect(!TrackMetadata.ifRangeMatches(TrackMetadata.etag(for: b), file: a))
        #expect(TrackMetadata.ifRangeMatches("Tue, 14 Nov 2023 22:13:20 GMT", file: a))
        #expect(!TrackMetadata.ifRangeMatches("W/" + TrackMetadata.etag(for: a), file: a))
        #expect(TrackMetadata.contentType(for: a) == "audio/mpeg")
    }

    @Test func loopbackDetection() {
        #expect(ListeningSocket.isLoopback("127.0.0.1"))
        #expect(ListeningSocket.isLoopback("127.1.2.3"))
        #expect(ListeningSocket.isLoopback("::1"))
        #expect(!ListeningSocket.isLoopback("0.0.0.0"))
        #expect(!ListeningSocket.isLoopback("192.168.1.2"))
        #expect(!ListeningSocket.isLoopback("::"))
        #expect(throws: ServerError.self) { try ServerOptions(bind: "0.0.0.0").validate() }
        #expect(throws: Never.self) { try ServerOptions(bind: "0.0.0.0", token: "long-random-token").validate() }
    }
}

@Suite struct HostHeaderTests {
    static let cases: [(String?, Bool)] = [
        (nil, true), ("127.0.0.1", true), ("127.0.0.1:8765", true), ("127.1.2.3:80", true), ("localhost", true),
        ("LocalHost:8765", true), ("localhost.", true), ("[::1]", true), ("[::1]:8765", true),
        ("evil.example", false), ("evil.example:8765", false), ("127.0.0.1.evil.example", false), ("localhost.evil", false),
        ("10.0.0.1", false), ("0.0.0.0", false), ("[::2]:8765", false), ("[::ffff:127.0.0.1]", false), ("127.0.0.1:", false),
        ("127.0.0.1:80:80", false), ("127.0.0.1:x", false), ("[::1", false), ("[::1]x", false), ("", false), ("::1", false),
        ("0x7f000001", false), ("2130706433", false),
    ]

    @Test(arguments: cases.indices)
    func loopbackHost(_ i: Int) {
        let (host, expected) = Self.cases[i]
        #expect(TrackServer.isLoopbackHost(host) == expected, "Host: \(host ?? "nil")")
    }
}

@Suite struct ServerOptionsTests {
    @Test func tokensMustBeLongAndVisible() {
        #expect(throws: ServerError.self) { try ServerOptions(bind: "0.0.0.0", token: "x").validate() }
        #expect(throws: ServerError.self) { try ServerOptions(bind: "127.0.0.1", token: "fifteen-chars-x").validate() }
        #expect(throws: ServerError.self) { try ServerOptions(bind: "127.0.0.1", token: "sixteen chars ok").validate() }
        #expect(throws: ServerError.self) { try ServerOptions(bind: "0.0.0.0").validate() }
        #expect(throws: Never.self) { try ServerOptions(bind: "0.0.0.0", token: "0123456789abcdef").validate() }
        #expect(throws: Never.self) { try ServerOptions(bind: "[::1]").validate() }
    }

    @Test func boundAddressInURLs() {
        #expect(ServerOptions(bind: "[::1]").urlHost == "[::1]")
        #expect(ServerOptions(bind: "::1").urlHost == "[::1]")
        #expect(ServerOptions(bind: "127.0.0.1").urlHost == "127.0.0.1")
    }
}

@Suite struct ContentTypeTests {
    @Test(arguments: [("A/b.MP3", "mp3"), ("a.b/c.flac", "flac"), ("a.b/c", ""), ("noext", ""), ("A/.hidden", ""), ("x.", ""),
                      ("Ёлка/東京 🎵.Opus", "opus"), ("a/b.tar.gz", "gz")])
    func extensionIsReadFromTheLastComponent(_ path: String, _ ext: String) {
        #expect(TrackMetadata.extensionOf(path) == ext, "\(path)")
    }
}

/// Which clients `serve` keeps an offline response open for rather than cut (`ClientQuirks`): mpd 0.21 to 0.23.12
/// by its `User-Agent`, nothing else.
@Suite struct ClientQuirksTests {
    @Test(arguments: [
        ("Music Player Daemon 0.23.12", [0, 23, 12], true),
        ("Music Player Daemon 0.23.5", [0, 23, 5], true),
        ("Music Player Daemon 0.22.11", [0, 22, 11], true),
        ("Music Player Daemon 0.21", [0, 21], true),
        ("Music Player Daemon 0.21.0", [0, 21, 0], true),
        ("Music Player Daemon 0.20.23", [0, 20, 23], false),
        ("Music Player Daemon 0.23.13", [0, 23, 13], false),
        ("Music Player Daemon 0.23.16", [0, 23, 16], false),
        ("Music Player Daemon 0.24.5", [0, 24, 5], false),
        ("Music Player Daemon 0.24~git", [0, 24], false),
        ("Music Player Daemon 0.23.12 (extra)", [0, 23, 12], true),
        ("Music Player Daemon 0.23.12a", [0, 23, 12], true),
        ("Music Player Daemon 1.0", [1, 0], false),
        ("Music Player Daemon 99999999999999999999.1", nil, false),
        ("Music Player Daemon ", nil, false),
        ("Music Player Daemon x", nil, false),
        ("music player daemon 0.23.12", nil, false),
        ("Lavf/59.27.100", nil, false),
        ("VLC/3.0.18 LibVLC/3.0.18", nil, false),
        ("", nil, false),
    ] as [(String, [Int]?, Bool)])
    func mpdBefore02313FreezesOnACut(userAgent: String, version: [Int]?, freezes: Bool) {
        #expect(ClientQuirks.mpdVersion(userAgent) == version)
        #expect(ClientQuirks.freezesOnCutBody(userAgent: userAgent) == freezes)
    }

    @Test func noUserAgentNoQuirk() {
        #expect(!ClientQuirks.freezesOnCutBody(userAgent: nil))
    }
}
