import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Testing
@testable import WebDAV

/// The library the real-server fixtures were captured from (Tests/servers/start-webdav.sh serving it):
/// file i has 256·(i+1) bytes; cover.jpg is not audio.
private let capturedLibrary: [(String, Int64)] = [
    ("a b.mp3", 256), ("hash#1.flac", 512), ("100% pure.ogg", 768), ("c+d&e.mp3", 1024), ("[2020] live.opus", 1280),
    ("it's \"quoted\".m4a", 1536), ("Кино — Группа крови.mp3", 1792), ("東京事変.flac", 2048), ("🎵 emoji.mp3", 2304),
]

struct FixtureCase: CustomTestStringConvertible, Sendable {
    var file: String
    var mirrored: String
    var root = ""
    var folder: [String] = []
    var requestURL: String
    var files: [String: Int64]
    var subfolders: [[String]] = []
    var warnings = 0

    var testDescription: String { file }
}

private let capturedRoot = Dictionary(uniqueKeysWithValues: capturedLibrary)

let fixtureCases: [FixtureCase] = ["rclone", "apache", "nginx"].flatMap { server in
    [
        FixtureCase(file: "\(server)-root.xml", mirrored: "http://127.0.0.1:8080/dav/", requestURL: "http://127.0.0.1:8080/dav/",
                    files: capturedRoot, subfolders: [["Artist [x]"]]),
        FixtureCase(file: "\(server)-artist.xml", mirrored: "http://127.0.0.1:8080/dav", folder: ["Artist [x]"],
                    requestURL: "http://127.0.0.1:8080/dav/Artist%20%5Bx%5D/", files: [:], subfolders: [["Artist [x]", "Album #1"]]),
    ]
} + [
    FixtureCase(file: "nextcloud.xml", mirrored: "https://cloud.example.com/remote.php/dav/files/u/", root: "Music",
                requestURL: "https://cloud.example.com/remote.php/dav/files/u/Music/",
                files: ["c+d&e [1] it's.flac": 4_194_304, "untagged": 10], subfolders: [["Live (2020)"]]),
    FixtureCase(file: "iis-fullurl.xml", mirrored: "https://files.example.com/Shared/Music/",
                requestURL: "https://files.example.com/Shared/Music/", files: ["01 Intro.wma": 31337], subfolders: [["Album One"]]),
    FixtureCase(file: "synology.xml", mirrored: "http://nas.local:5005/music/", requestURL: "http://nas.local:5005/music/",
                files: ["テスト.m4a": 2048], subfolders: [["Sub Dir"]]),
    FixtureCase(file: "default-namespace-relative.xml", mirrored: "http://h/dav/", requestURL: "http://h/dav/",
                files: ["bänd 🎸.ogg": 77, "Q&A & more.mp3": 12, "weird-date.mp3": 1]),
    FixtureCase(file: "escaping-root.xml", mirrored: "http://h/dav/Music/", requestURL: "http://h/dav/Music/",
                files: ["ok.mp3": 3], warnings: 6),
]

@Suite("WebDAV multistatus parsing")
struct WebDAVParsingTests {
    @Test("fixtures list exactly the expected audio files and subfolders", arguments: fixtureCases)
    func fixture(_ c: FixtureCase) async throws {
        let logs = LogCollector()
        let provider = try makeProvider(url: c.mirrored, root: c.root, logs: logs)
        let entries = try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture(c.file))
        let base = try provider.baseLocation()
        let (files, subfolders) = provider.interpret(entries, folder: c.folder, requestURL: try #require(URL(string: c.requestURL)), base: base)
        #expect(Dictionary(files.map { ($0.path, $0.size) }, uniquingKeysWith: { a, _ in a }) == c.files)
        #expect(files.count == c.files.count)
        #expect(subfolders.sorted { $0.joined() < $1.joined() } == c.subfolders)
        #expect(logs.warnings.count == c.warnings, "\(logs.warnings)")
        for file in files {
            // Every download URL is fully percent-encoded (only unreserved characters and %XX after the prefix)
            // and names the listed file again.
            let url = try await provider.resolveDownload(for: file).url.absoluteString
            #expect(url.hasPrefix(base.urlPrefix))
            let tail = url.dropFirst(base.urlPrefix.count)
            #expect(tail.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-._~%/".contains($0)) }, "\(url)")
            #expect(WebDAVPath.resolve(href: url, requestPath: "/").map { Array($0.suffix(file.path.split(separator: "/").count)) }
                    == file.path.split(separator: "/").map(String.init))
        }
    }

    @Test("real-server captures carry the properties each server is known to send")
    func serverProperties() throws {
        let apache = try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture("apache-root.xml"))
        let apacheFile = try #require(apache.first { $0.href.hasSuffix("a%20b.mp3") })
        #expect(apacheFile.etag?.hasPrefix("\"") == true)
        #expect(apacheFile.contentType == "audio/mpeg")
        #expect(apache.first { $0.href == "/dav/c+d&e.mp3" } != nil, "&amp; in an href is unescaped")
        let nginx = try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture("nginx-root.xml"))
        #expect(nginx.allSatisfy { $0.etag == nil && $0.contentType == nil }, "nginx dav-ext sends neither getetag nor getcontenttype")
        #expect(nginx.contains { $0.href == "/dav/Artist%20[x]/" && $0.isCollection })
        let rclone = try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture("rclone-root.xml"))
        #expect(rclone.filter { !$0.isCollection }.allSatisfy { $0.etag != nil && $0.checksums.isEmpty && $0.lastModified != nil })
        // A collection's 404 propstat (getcontentlength etc.) does not blank the 200 one.
        #expect(rclone.first { $0.href == "/dav/" }?.lastModified == "Mon, 30 Nov 2026 21:45:01 GMT")
    }

    @Test("Nextcloud: checksums become hashes, ETag kept verbatim, MIME kept, capabilities learn the kinds")
    func nextcloudDetails() async throws {
        let provider = try makeProvider(url: "https://cloud.example.com/remote.php/dav/files/u/Music/")
        #expect(provider.capabilities.hashKinds.isEmpty)
        #expect(provider.capabilities.hasChangeFeed == false)
        let entries = try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture("nextcloud.xml"))
        let (files, _) = provider.interpret(entries, folder: [], requestURL: try #require(URL(string: "https://cloud.example.com/remote.php/dav/files/u/Music/")),
                                            base: try provider.baseLocation())
        let flac = try #require(files.first { $0.path.hasSuffix(".flac") })
        #expect(flac.hashes == [ContentHash(kind: .sha1, value: "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"),
                                ContentHash(kind: .md5, value: "9e107d9d372bb6826bd81d3542a419d6")])
        #expect(flac.revision == "\"0bfa2d6ad1e3c4a1b2c3d4e5f6a7b8c9\"")
        #expect(flac.mimeType == "audio/flac")
        #expect(flac.modified == Date(timeIntervalSince1970: 1_796_072_124))
        #expect(flac.downloadHint == nil, "the download URL is built from the path under the current url, never stored")
        #expect(try await provider.resolveDownload(for: flac).url.absoluteString
                == "https://cloud.example.com/remote.php/dav/files/u/Music/c%2Bd%26e%20%5B1%5D%20it%27s.flac")
        #expect(provider.capabilities.hashKinds == [.sha1, .md5])
        let untagged = try #require(files.first { $0.path == "untagged" })
        #expect(untagged.mimeType == "audio/mpeg", "a file without extension counts as audio by its content type")
    }

    @Test("unparseable getlastmodified falls back to the epoch; weak ETags are no If-Range validator")
    func fallbacks() async throws {
        let provider = try makeProvider(url: "http://h/dav/")
        let entries = try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture("default-namespace-relative.xml"))
        let (files, _) = provider.interpret(entries, folder: [], requestURL: try #require(URL(string: "http://h/dav/")), base: try provider.baseLocation())
        #expect(files.first { $0.path == "weird-date.mp3" }?.modified == Date(timeIntervalSince1970: 0))
        #expect(files.first { $0.path == "Q&A & more.mp3" }?.modified == Date(timeIntervalSince1970: 1_796_072_124))
        let iis = try makeProvider(url: "https://files.example.com/Shared/Music/")
        let wma = RemoteFile(path: "01 Intro.wma", size: 31337, modified: Date(), revision: "W/\"80f3b6a4a0c5d91:0\"")
        #expect(try await iis.resolveDownload(for: wma).etag == nil)
        var strong = wma
        strong.revision = "\"abc\""
        #expect(try await iis.resolveDownload(for: strong).etag == "\"abc\"")
    }

    @Test("malformed or foreign bodies throw, never crash",
          arguments: ["malformed-truncated.xml", "malformed-mismatched.xml", "not-multistatus.html", "wrong-namespace.xml", "empty.xml"])
    func malformed(_ file: String) throws {
        #expect(throws: WebDAVAPI.ParseError.self) { try WebDAVAPI.parseMultistatus(try WebDAVTestPaths.fixture(file)) }
    }

    /// A folder's body, whole or in small pieces, below and far above the size the reader parses only at the end:
    /// the same files either way, and a body cut short fails at `finish`.
    @Test("the folder reader lists the same files whether the body comes whole or in pieces, small or over 1 MiB",
          arguments: [10, 12_000])
    func folderReaderPieces(_ count: Int) throws {
        let provider = try makeProvider(url: "http://h/dav/", root: "", logs: LogCollector())
        let url = try #require(URL(string: "http://h/dav/"))
        var xml = #"<?xml version="1.0" encoding="utf-8"?><d:multistatus xmlns:d="DAV:">"#
        xml += "<d:response><d:href>/dav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop>"
        xml += "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        for i in 0 ..< count {
            xml += "<d:response><d:href>/dav/Track%20\(i)%20with%20a%20name%20long%20enough%20to%20matter.mp3</d:href><d:propstat><d:prop>"
            xml += "<d:resourcetype/><d:getcontentlength>\(1000 + i)</d:getcontentlength>"
            xml += "<d:getlastmodified>Sun, 06 Dec 2026 06:00:00 GMT</d:getlastmodified><d:getetag>\"e\(i)\"</d:getetag>"
            xml += "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        }
        xml += "</d:multistatus>"
        let body = Array(xml.utf8)
        #expect(count < 100 || body.count > 2 * FolderReader.deferredBytes, "the big case must pass the deferred size")
        func read(pieces: Int, upTo end: Int? = nil) throws -> FolderContents {
            let reader = try FolderReader(provider: provider, folder: [], requestURL: url, base: try provider.baseLocation())
            var offset = 0
            let limit = end ?? body.count
            while offset < limit {
                let next = min(limit, offset + pieces)
                try body[offset ..< next].withUnsafeBytes { try reader.write($0) }
                offset = next
            }
            return try reader.finish()
        }
        let whole = try read(pieces: body.count)
        #expect(whole.files.count == count)
        #expect(Set(whole.files.map(\.size)) == Set((0 ..< count).map { Int64(1000 + $0) }))
        let pieces = try read(pieces: 16 << 10)
        #expect(pieces.files.map(\.path) == whole.files.map(\.path))
        #expect(pieces.files.map(\.size) == whole.files.map(\.size))
        #expect(throws: (any Error).self) { try read(pieces: 16 << 10, upTo: body.count - 20) }
    }

    @Test("the PROPFIND body asks for the six properties and is well-formed")
    func propfindBody() throws {
        let text = String(decoding: WebDAVAPI.propfindBody, as: UTF8.self)
        for prop in ["resourcetype", "getcontentlength", "getlastmodified", "getetag", "getcontenttype", "oc:checksums"] {
            #expect(text.contains("<\(prop.contains(":") ? prop : "d:" + prop)/>"))
        }
        #expect(text.contains("xmlns:oc=\"http://owncloud.org/ns\""))
    }
}

@Suite("WebDAV paths, dates, auth and statuses")
struct WebDAVUnitTests {
    @Test("hrefs resolve to decoded segments", arguments: [
        ("/dav/a%20b.mp3", "/dav/", ["dav", "a b.mp3"]),
        ("/dav/Artist%20[x]/", "/dav/", ["dav", "Artist [x]"]),
        ("/dav/%5bx%5d/c+d&e.mp3", "/dav/", ["dav", "[x]", "c+d&e.mp3"]),
        ("https://h.example:8443/dav/x.mp3?version=2#frag", "/dav/", ["dav", "x.mp3"]),
        ("//h.example/dav/x.mp3", "/dav/", ["dav", "x.mp3"]),
        ("x%20y.mp3", "/dav/sub/", ["dav", "sub", "x y.mp3"]),
        ("./", "/dav/sub/", ["dav", "sub"]),
        ("../up.mp3", "/dav/sub/", ["dav", "up.mp3"]),
        ("/dav//double//slash.mp3", "/", ["dav", "double", "slash.mp3"]),
    ])
    func resolve(_ c: (String, String, [String])) {
        #expect(WebDAVPath.resolve(href: c.0, requestPath: c.1) == c.2)
    }

    @Test("hostile hrefs do not resolve", arguments: ["/dav/%2e%2e/x", "/dav/a%2Fb", "/dav/%00", "/dav/bad%Z1", "/dav/%C3%28", "/../x"])
    func hostile(_ href: String) {
        #expect(WebDAVPath.resolve(href: href, requestPath: "/dav/") == nil)
    }

    @Test("the Authorization header for each auth kind")
    func authorization() {
        let url = URL(fileURLWithPath: "/")
        #expect(WebDAVOptions(remoteName: "r", url: url, user: "demo", password: "pä:ss").authorization
                == "Basic " + Data("demo:pä:ss".utf8).base64EncodedString())
        #expect(WebDAVOptions(remoteName: "r", url: url, user: "demo", password: "pä:ss").authorization == "Basic ZGVtbzpww6Q6c3M=")
        #expect(WebDAVOptions(remoteName: "r", url: url, auth: .bearer("t1")).authorization == "Bearer t1")
        #expect(WebDAVOptions(remoteName: "r", url: url, auth: .oauth("t2")).authorization == "OAuth t2")
        #expect(WebDAVOptions(remoteName: "r", url: url).authorization == nil)
    }

    @Test("statuses map to error codes", arguments: [
        (207, nil), (200, ProviderError.Code.invalidResponse), (401, .unauthorized), (403, .forbidden), (404, .notFound),
        (409, .notFound), (423, .transient), (425, .transient), (429, .rateLimited), (500, .transient), (502, .transient),
        (503, .rateLimited), (504, .transient), (509, .transient), (405, .configuration), (400, .invalidResponse),
    ] as [(Int, ProviderError.Code?)])
    func statuses(_ c: (Int, ProviderError.Code?)) throws {
        let head = HTTPResponseHead(status: c.0, headers: ["Retry-After": "7"], url: try #require(URL(string: "https://h.example/dav/?token=secret")))
        let error = WebDAVProvider.classify(HTTPResponse(head: head, body: Data()), host: "h.example", remoteName: "music")
        #expect(error?.code == c.1)
        #expect(error?.message.contains("secret") != true)
        if c.0 == 429 || c.0 == 503 { #expect(error?.retryAfter == 7) }
        if c.0 == 401 {
            #expect(error?.message == "WebDAV server at h.example refused the credentials for remote music: check user/password (or password_command)")
            let none = WebDAVProvider.classify(HTTPResponse(head: head, body: Data()), host: "h.example", remoteName: "music",
                                               sentCredentials: false)
            #expect(none?.code == .unauthorized)
            #expect(none?.message == "WebDAV server at h.example asks for a password and remote music has none: run cloudsync login music (or set password / password_command)")
        }
    }

    @Test("an HTML page where a listing was due names a network's login page")
    func htmlInsteadOfMultistatus() throws {
        let url = try #require(URL(string: "http://nas.local/dav/"))
        let page = HTTPResponseHead(status: 200, headers: ["Content-Type": "text/html"], url: url)
        let error = try #require(WebDAVProvider.classify(HTTPResponse(head: page, body: Data()), host: "nas.local", remoteName: "music"))
        #expect(error.code == .invalidResponse)
        #expect(error.message.contains("an HTML page came where a 207 Multi-Status was due") && error.message.contains("login page"))
        let plain = HTTPResponseHead(status: 200, headers: ["Content-Type": "text/plain"], url: url)
        let other = try #require(WebDAVProvider.classify(HTTPResponse(head: plain, body: Data()), host: "nas.local", remoteName: "music"))
        #expect(other.message.hasSuffix("a 207 Multi-Status was due; check that url points at a WebDAV collection"))
    }

    @Test("resolveDownload builds the encoded resource URL with auth and never calls the network")
    func resolveDownload() async throws {
        let provider = try makeProvider(url: "https://cloud.example.com/remote.php/dav/files/me%40x.com/", root: "Music/Rock & Roll")
        let file = RemoteFile(path: "A [1]/it's #1.mp3", size: 1, modified: Date(), revision: "\"e1\"")
        let request = try await provider.resolveDownload(for: file)
        #expect(request.url.absoluteString == "https://cloud.example.com/remote.php/dav/files/me%40x.com/Music/Rock%20%26%20Roll/A%20%5B1%5D/it%27s%20%231.mp3")
        #expect(request.method == "GET")
        #expect(request.headers.count == 1 && request.headers[0].name == "Authorization")
        #expect(request.sendsAuthOnRedirect == false)
        #expect(request.etag == "\"e1\"")
        await #expect(throws: ProviderError.self) {
            try await provider.resolveDownload(for: RemoteFile(path: "../x.mp3", size: 1, modified: Date()))
        }
    }

    @Test("a url that is not http(s) is a configuration error")
    func badURL() async throws {
        let provider = try makeProvider(url: "ftp://h/dav/")
        await #expect { try await collectPages(provider) } throws: { ($0 as? ProviderError)?.code == .configuration }
    }
}
