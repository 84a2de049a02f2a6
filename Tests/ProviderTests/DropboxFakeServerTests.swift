import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import Dropbox

// MARK: - Support (Dropbox-prefixed: other providers' test files share this module)

/// Tests/Fakes/dropbox_fake.py, started for one test and stopped by `stop()` (stdin closed, then terminated).
final class DropboxFake: Sendable {
    private let fake: PythonFake
    let transport: CurlTransport

    var base: URL { fake.baseURL() }

    /// Starts the fake with `spec` (see the script's docstring). Fails clearly when python3 is missing or the
    /// port does not come within 15 s.
    init(_ spec: [String: Any]) async throws {
        fake = try await PythonFake.start("dropbox_fake.py", spec: spec)
        transport = try CurlTransport()
    }

    func stop() { fake.stop() }

    func control(_ op: [String: Any]) async throws {
        try await fake.control([op], via: transport)
    }

    struct LogEntry: Decodable {
        var method: String
        var route: String
        var status: Int
        var content_type: String?
        var arg: String?
        var range: String?
        var body_length: Int
    }

    func log() async throws -> [LogEntry] { try await fake.log(via: transport) }
    func requests() async throws -> [FakeRequest] { try await fake.log(via: transport) }

    func calls(_ route: String) async throws -> Int { try await log().filter { $0.route == route }.count }

    /// The raw bytes of `rev:<rev>` or a `path_lower`, from the fake's test-only endpoint.
    func content(_ key: String) async throws -> [UInt8] {
        var comps = URLComponents(url: base.appendingPathComponent("_content"), resolvingAgainstBaseURL: false)!
        comps.queryItems = [URLQueryItem(name: "path", value: key)]
        let response = try await transport.send(HTTPRequest(url: comps.url!))
        #expect(response.status == 200)
        return [UInt8](response.body)
    }

    func provider(root: String = "Music", tokens: (any TokenSource)? = nil, pacer: Pacer? = nil) -> DropboxProvider {
        let options = DropboxOptions(remoteName: "db", root: root, apiURL: base, contentURL: base,
                                     tokenURL: base.appendingPathComponent("oauth2/token"), pageLimit: 2000)
        return DropboxProvider(options: options, transport: transport, pacer: pacer ?? SleepRecorder().pacer(),
                               tokens: tokens ?? StaticTokenSource(token: "access-1", remoteName: "db"),
                               audio: AudioFilter(), logger: .silent)
    }
}

/// Runs `body` with a fresh fake, stopping it afterwards (also when `body` throws).
func withDropboxFake<T>(_ spec: [String: Any], _ body: (DropboxFake) async throws -> T) async throws -> T {
    let fake = try await DropboxFake(spec)
    defer { fake.stop() }
    return try await body(fake)
}

private let bigSize = 4 * 1024 * 1024 + 123_457

/// The library the tests list: audio under /Music (some in non-Latin folders), non-audio, a non-downloadable
/// file, an empty file, one over 4 MiB, and audio outside the root.
private var library: [String: Any] { [
    "page_size": 3,
    "list_non_downloadable": true,
    "folders": ["/Music/Empty Folder"],
    "files": [
        ["path": "/Music/Rock/a.mp3", "size": 1000],
        ["path": "/Music/Rock/b.FLAC", "size": 2048],
        ["path": "/Music/Jazz/c.ogg", "size": 777],
        ["path": "/Music/notes.txt", "size": 10],
        ["path": "/Music/paper.mp3", "size": 5, "downloadable": false],
        ["path": "/Music/Кино/Группа крови.mp3", "size": 4321],
        ["path": "/Music/東京/曲.flac", "size": 999],
        ["path": "/Music/Emoji 🎵/song 🎸.opus", "size": 3333],
        ["path": "/Music/empty.mp3", "size": 0],
        ["path": "/Music/Big.wav", "size": bigSize],
        ["path": "/Other/outside.mp3", "size": 10],
    ],
] }

private let libraryAudio: Set<String> = [
    "Rock/a.mp3", "Rock/b.FLAC", "Jazz/c.ogg", "Кино/Группа крови.mp3", "東京/曲.flac", "Emoji 🎵/song 🎸.opus",
    "empty.mp3", "Big.wav",
]

// MARK: - Tests

@Suite("Dropbox provider against the fake API", .serialized, .timeLimit(.minutes(3)))
struct DropboxFakeServerTests {
    @Test("recursive listing over several pages: exact audio set, root entry skipped, cursor on the last page only")
    func fullListing() async throws {
        try await withDropboxFake(library) { fake in
            let pages = try await listingPages(fake.provider(root: "music"))
            let files = pages.flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == libraryAudio)
            #expect(files.count == libraryAudio.count)
            #expect(pages.allSatisfy { $0.kind == .full && $0.deletions.isEmpty })
            #expect(pages.dropLast().allSatisfy { $0.cursor == nil })
            #expect(pages.last?.cursor != nil)
            let continues = try await fake.calls("files/list_folder/continue")
            #expect(try await fake.calls("files/list_folder") == 1)
            #expect(continues >= 3, "page_size 3 forces several pages")
            #expect(pages.count == continues + 1)
            for file in files {
                #expect(file.providerID?.hasPrefix("id:") == true)
                #expect(!file.revision.isEmpty)
                #expect(file.hashes.first?.kind == .dropbox && file.hashes.first?.value.count == 64)
            }
            #expect(files.first { $0.path == "Big.wav" }?.size == Int64(bigSize))
            #expect(files.first { $0.path == "Rock/a.mp3" }?.modified ?? .distantPast > Date(timeIntervalSince1970: 1_700_000_000))
        }
    }

    @Test("the change feed sees an added file, a modified file and a deleted folder without a full listing")
    func changeFeed() async throws {
        try await withDropboxFake(library) { fake in
            let provider = fake.provider()
            let first = try await listingPages(provider)
            let cursor = try #require(first.last?.cursor)
            let oldA = try #require(first.flatMap(\.upserts).first { $0.path == "Rock/a.mp3" })
            let listCallsBefore = try await fake.calls("files/list_folder")

            try await fake.control(["op": "add", "path": "/Music/Jazz/new.mp3", "size": 50])
            try await fake.control(["op": "modify", "path": "/Music/Rock/a.mp3", "size": 1100])
            try await fake.control(["op": "delete", "path": "/Music/Кино"])
            try await fake.control(["op": "delete", "path": "/Music/東京", "children": true])
            try await fake.control(["op": "add", "path": "/Music/Jazz/short-lived.mp3", "size": 5])
            try await fake.control(["op": "delete", "path": "/Music/Jazz/short-lived.mp3"])
            try await fake.control(["op": "add", "path": "/Other/elsewhere.mp3", "size": 5])

            let pages = try await listingPages(provider, cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .changes })
            let upserts = pages.flatMap(\.upserts)
            #expect(Set(upserts.map(\.path)) == ["Jazz/new.mp3", "Rock/a.mp3"])
            let newA = try #require(upserts.first { $0.path == "Rock/a.mp3" })
            #expect(newA.revision != oldA.revision && newA.size == 1100 && newA.providerID == oldA.providerID)
            let deletions = Set(pages.flatMap(\.deletions))
            #expect(deletions == [.path("Кино"), .path("東京"), .path("東京/曲.flac"), .path("Jazz/short-lived.mp3")])
            #expect(pages.last?.cursor != nil && pages.last?.cursor != cursor)
            if let firstWithUpserts = pages.firstIndex(where: { !$0.upserts.isEmpty }),
               let lastWithDeletions = pages.lastIndex(where: { !$0.deletions.isEmpty }) {
                #expect(lastWithDeletions < firstWithUpserts, "deletions come before upserts")
            }
            #expect(try await fake.calls("files/list_folder") == listCallsBefore, "no full re-listing")

            // Nothing changed since: an empty change page with a cursor.
            let again = try await listingPages(provider, cursor: try #require(pages.last?.cursor))
            #expect(again.count == 1 && again[0].kind == .changes && again[0].upserts.isEmpty && again[0].deletions.isEmpty)
            #expect(try await fake.calls("files/list_folder") == listCallsBefore)
        }
    }

    @Test("409 reset on the cursor falls back to a full listing")
    func resetCursor() async throws {
        try await withDropboxFake(library) { fake in
            let provider = fake.provider()
            let cursor = try #require(try await listingPages(provider).last?.cursor)
            try await fake.control(["op": "reset"])
            let pages = try await listingPages(provider, cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == libraryAudio)
            let log = try await fake.log()
            #expect(log.contains { $0.route == "files/list_folder/continue" && $0.status == 409 })
            #expect(log.filter { $0.route == "files/list_folder" }.count == 2)
        }
    }

    @Test("the root renamed in the change feed is not every track deleted: a full listing says the root is gone, or lists it recreated")
    func rootRenamedInTheFeed() async throws {
        try await withDropboxFake(library) { fake in
            let provider = fake.provider()
            let cursor = try #require(try await listingPages(provider).last?.cursor)
            try await fake.control(["op": "move", "from": "/Music", "to": "/Music2"])
            do {
                let pages = try await listingPages(provider, cursor: cursor)
                Issue.record("a renamed root listed \(pages.flatMap(\.deletions)) instead of failing")
            } catch let error as ProviderError {
                #expect(error.code == .notFound && error.message.contains("the root folder '/Music'"), "\(error)")
            }
            // Recreated under its name: what it holds now, as a full listing (deletions are reconciled from it).
            try await fake.control(["op": "add", "path": "/Music/Fresh/new.mp3", "size": 40])
            let pages = try await listingPages(provider, cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == ["Fresh/new.mp3"])
        }
    }

    @Test("a cursor made for another root is not used: full listing of the new root")
    func rootChanged() async throws {
        try await withDropboxFake(library) { fake in
            let cursor = try #require(try await listingPages(fake.provider(root: "Music")).last?.cursor)
            let pages = try await listingPages(fake.provider(root: "/Music/Rock/"), cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == ["a.mp3", "b.FLAC"])
            #expect(try await fake.calls("files/list_folder") == 2)
            #expect(try await fake.calls("files/list_folder/continue") > 0)
            let whole = try await listingPages(fake.provider(root: ""))
            #expect(Set(whole.flatMap(\.upserts).map(\.path)) == Set(libraryAudio.map { "Music/" + $0 }).union(["Other/outside.mp3"]))
        }
    }

    @Test("downloads of Cyrillic, CJK, emoji, empty and >4 MiB files: ranged, bytes and content_hash verified")
    func downloads() async throws {
        try await withDropboxFake(library) { fake in
            let provider = fake.provider()
            let files = try await listingPages(provider).flatMap(\.upserts)
            for path in ["Кино/Группа крови.mp3", "東京/曲.flac", "Emoji 🎵/song 🎸.opus", "empty.mp3", "Big.wav"] {
                let file = try #require(files.first { $0.path == path })
                for addressing in ["rev", "path"] {
                    var target = file
                    if addressing == "path" { target.revision = "" }
                    let request = try await provider.resolveDownload(for: target)
                    #expect(request.method == "POST")
                    #expect(request.url.path == "/2/files/download")
                    let arg = try #require(request.headers.first { $0.name == "Dropbox-API-Arg" }?.value)
                    #expect(arg.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "header-safe: \(arg)")
                    if addressing == "rev" {
                        #expect(arg == "{\"path\":\"rev:\(file.revision)\"}")
                    } else if path.unicodeScalars.contains(where: { !$0.isASCII }) {
                        #expect(arg.contains("\\u"), "non-ASCII escaped: \(arg)")
                    }
                    var http = HTTPRequest(method: request.method, url: request.url, keepsAuthAcrossHosts: request.sendsAuthOnRedirect)
                    for h in request.headers { http.headers.add(h.name, h.value) }
                    let sink = MemoryByteSink()
                    let size = file.size
                    let ranges: [ClosedRange<Int64>?] = size == 0 ? [nil]
                        : size > 4 << 20 ? [0...(4 << 20) + 99, ((4 << 20) + 100)...(size - 1)] : [0...(size - 1)]
                    for range in ranges {
                        let outcome = try await fake.transport.download(http, range: range, ifRange: nil, into: sink)
                        #expect(outcome.head.status == (range == nil ? 200 : 206), "\(path) \(addressing) → \(outcome.head.status): \(String(decoding: outcome.errorBody, as: UTF8.self))")
                        #expect(!outcome.rangeIgnored)
                    }
                    #expect(sink.bytes == (try await fake.content("rev:\(file.revision)")))
                    var hasher = makeHasher(for: .dropbox)
                    sink.bytes.withUnsafeBytes { hasher.update($0) }
                    #expect(hasher.finalize() == file.hashes.first?.value, "\(path)")
                }
            }
            let downloads = try await fake.log().filter { $0.route == "files/download" }
            #expect(downloads.count == 2 * 6)
            #expect(downloads.allSatisfy { ($0.content_type ?? "").isEmpty && $0.body_length == 0 && $0.method == "POST" },
                    "no Content-Type, no body: \(downloads.map { $0.content_type ?? "nil" })")
        }
    }

    @Test("the fake refuses raw UTF-8 in Dropbox-API-Arg with a plain-text 400, as Dropbox does")
    func rawHeaderRefused() async throws {
        try await withDropboxFake(library) { fake in
            var http = HTTPRequest(method: "POST", url: fake.base.appendingPathComponent("2/files/download"))
            http.headers.add("Authorization", "Bearer access-1")
            http.headers.add("Dropbox-API-Arg", #"{"path":"/Music/Кино/Группа крови.mp3"}"#)
            http.headers.add("Content-Type", "")
            let outcome = try await fake.transport.download(http, range: nil, ifRange: nil, into: MemoryByteSink())
            #expect(outcome.head.status == 400)
            #expect(outcome.head.headers["Content-Type"]?.hasPrefix("text/plain") == true)
            let error = DropboxProvider.classify(status: outcome.head.status, headers: outcome.head.headers, body: outcome.errorBody,
                                                 route: "files/download", remoteName: "db")
            #expect(error?.code == .invalidResponse)
        }
    }

    @Test("expired_access_token: refreshed once through OAuthRefresher for listing and for downloads")
    func tokenRefresh() async throws {
        var spec = library
        spec["expired"] = true
        spec["client_id"] = "app-key"
        try await withDropboxFake(spec) { fake in
            let persisted = Mutex<[TokenSet]>([])
            let refresher = OAuthRefresher(remoteName: "db", tokens: TokenSet(accessToken: "access-1", refreshToken: "refresh-1"),
                                           client: DropboxOptions(remoteName: "db", tokenURL: fake.base.appendingPathComponent("oauth2/token"))
                                               .oauthClient(clientID: "app-key"),
                                           transport: fake.transport) { set in persisted.withLock { $0.append(set) } }
            let provider = fake.provider(tokens: refresher)
            let files = try await listingPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == libraryAudio)
            #expect(try await fake.calls("oauth2/token") == 1)
            let current = await refresher.current
            #expect(current.accessToken == "access-2")
            #expect(current.refreshToken == "refresh-1", "Dropbox returns no new refresh token: the old one stays")
            #expect(persisted.withLock { $0.count } == 1)

            // The download's token expires between resolving and fetching.
            let file = try #require(files.first { $0.path == "Rock/a.mp3" })
            let stale = try await provider.resolveDownload(for: file)
            try await fake.control(["op": "expire_token"])
            func fetch(_ request: DownloadRequest) async throws -> DownloadOutcome {
                var http = HTTPRequest(method: request.method, url: request.url)
                for h in request.headers { http.headers.add(h.name, h.value) }
                return try await fake.transport.download(http, range: 0...(file.size - 1), ifRange: nil, into: MemoryByteSink())
            }
            let refused = try await fetch(stale)
            #expect(refused.head.status == 401)
            #expect(DropboxProvider.classify(status: 401, headers: refused.head.headers, body: refused.errorBody,
                                             route: "files/download", remoteName: "db")?.code == .tokenExpired)
            let fresh = try await provider.resolveDownload(for: file, rejected: stale, status: 401)
            #expect(try await fetch(fresh).head.status == 206)
            #expect(try await fake.calls("oauth2/token") == 2)
        }
    }

    @Test("429 with retry_after in the JSON body, or Retry-After with a plain-text body, and 500s are waited out", arguments: ["body", "text"])
    func rateLimited(where: String) async throws {
        try await withDropboxFake(library) { fake in
            try await fake.control(["op": "fail", "route": "files/list_folder/continue", "status": 429, "count": 1,
                                    "retry_after": 1, "where": `where`])
            try await fake.control(["op": "fail", "route": "files/list_folder", "status": 500, "count": 1])
            let sleeps = SleepRecorder()
            let pages = try await listingPages(fake.provider(pacer: sleeps.pacer()))
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == libraryAudio)
            #expect(sleeps.recorded.contains { $0 > 0.5 && $0 <= 1.0 }, "waited for retry_after 1: \(sleeps.recorded)")
            let log = try await fake.log()
            #expect(log.contains { $0.status == 429 } && log.contains { $0.status == 500 })
        }
    }

    @Test("refused token → .unauthorized naming `cloudsync login`; missing root → .notFound; root is a file → .configuration")
    func errors() async throws {
        try await withDropboxFake(library) { fake in
            await #expect {
                _ = try await listingPages(fake.provider(tokens: StaticTokenSource(token: "bogus", remoteName: "db")))
            } throws: { error in
                let e = error as? ProviderError
                return e?.code == .unauthorized && e?.message.contains("cloudsync login db") == true && e?.message.contains("bogus") == false
            }
            await #expect {
                _ = try await listingPages(fake.provider(root: "/Nope"))
            } throws: { ($0 as? ProviderError)?.code == .notFound }
            await #expect {
                _ = try await listingPages(fake.provider(root: "/Music/Rock/a.mp3"))
            } throws: { ($0 as? ProviderError)?.code == .configuration }
        }
    }
}
