import CloudSyncCore
import CloudSyncHTTP
import Foundation
import TestSupport
import Testing
@testable import Dropbox
@testable import GoogleDrive
@testable import OneDrive
@testable import WebDAV
@testable import YandexDisk

// One conformance suite for every provider (#24.4): the same library, the same cases, each provider against its
// fake (WebDAV: real rclone serve webdav, Apache and nginx). A case that a provider's declared capabilities rule out
// is skipped and named in the output ("conformance: skip ..."), never silently.

/// The library every subject serves: hostile names (spaces, `&+#%;='`, brackets, non-Latin scripts, emoji, deep
/// folders) and one file that is not audio.
enum ConformanceLibrary {
    static let audio: [(path: String, size: Int)] = [
        ("Artist/Album (Deluxe) [2020]/01 - Intro & Outro.mp3", 97),
        ("Artist/Album (Deluxe) [2020]/02 - 100% +plus+ #hash.flac", 130),
        ("Кино/Группа крови/Кукушка.mp3", 61),
        ("semi;colon=equals'quote.mp3", 33),
        ("🎵 emoji/space  two.mp3", 44),
        ("deep/a/b/c/d/e/track.mp3", 75),
        ("Artist/Album (Deluxe) [2020]/03 tail.mp3", 1),
    ]
    static let other = "Artist/notes.txt"
    static var paths: Set<String> { Set(audio.map(\.path)) }
}

/// One provider set up against its server with `ConformanceLibrary`, listing in tiny pages.
protocol ConformanceSubject: Sendable {
    var name: String { get }
    var provider: any Provider { get }
    var transport: any Transport { get }
    /// The bytes of `path` where the suite can know them (files the test wrote); else the listing's hash is checked.
    func expectedBytes(_ path: String) -> [UInt8]?
    /// After this, the content host refuses each download link after one GET (410/404), so every further range
    /// needs a re-resolved link. False when the provider's downloads carry no expiring link.
    func refuseLinksAfterOneUse() async throws -> Bool
    /// The waits the provider's pacer was asked for.
    var sleeps: SleepRecorder { get }
    /// Makes the next listing call answer 429 with `Retry-After: 1`; false when the server cannot be told to.
    func throttleNextListingCall() async throws -> Bool
    /// Makes the current access token be refused (401) from now on, so the provider must refresh it through the
    /// fake's token endpoint; false when the provider has no refreshable token (WebDAV's Basic auth).
    func expireToken() async throws -> Bool
    /// Deletes `delete` and moves `move` to `to` (a root-level name) on the server, keeping the moved file's identity
    /// where the API has one; false when the server cannot be changed.
    func deleteAndMove(delete: String, move: String, to: String) async throws -> Bool
    /// Gives `path` other bytes of the same size on the server, and a new version (ETag, rev, hashes): a file edited
    /// while it downloads. Fakes: the op "modify" of the fakes' one control protocol (Tests/Fakes/fake_control.py).
    func changeContent(of path: String) async throws
    /// The requests the fake answered (its fake_control.py log); nil for a real server.
    func requests() async throws -> [FakeRequest]?
    func stop()
}

/// Builds each subject; `kind` selects WebDAV's real server.
enum ConformanceSubjects {
    static let names = ["dropbox", "gdrive", "onedrive", "yandex", "webdav-rclone", "webdav-apache", "webdav-nginx"]

    static func start(_ name: String) async throws -> any ConformanceSubject {
        switch name {
        case "dropbox": return try await DropboxSubject.start()
        case "gdrive": return try await DriveSubject.start()
        case "onedrive": return try await OneDriveSubject.start()
        case "yandex": return try await YandexSubject.start()
        default: return try await WebDAVSubject.start(String(name.dropFirst("webdav-".count)))
        }
    }
}

struct DropboxSubject: ConformanceSubject {
    let fake: DropboxFake
    let provider: any Provider
    let sleeps: SleepRecorder
    var name: String { "dropbox" }
    var transport: any Transport { fake.transport }

    static func start() async throws -> DropboxSubject {
        var files: [[String: Any]] = ConformanceLibrary.audio.map { ["path": "/" + $0.path, "size": $0.size] }
        files.append(["path": "/" + ConformanceLibrary.other, "size": 5])
        let fake = try await DropboxFake(["page_size": 2, "files": files, "client_id": "app-key"])
        let options = DropboxOptions(remoteName: "db", apiURL: fake.base, contentURL: fake.base,
                                     tokenURL: fake.base.appendingPathComponent("oauth2/token"), pageLimit: 2)
        let refresher = OAuthRefresher(remoteName: "db", tokens: TokenSet(accessToken: "access-1", refreshToken: "refresh-1"),
                                       client: options.oauthClient(clientID: "app-key"), transport: fake.transport) { _ in }
        let sleeps = SleepRecorder(sleepingAtMost: 0.05)
        let provider = DropboxProvider(options: options, transport: fake.transport, pacer: sleeps.pacer(),
                                       tokens: refresher, audio: AudioFilter(), logger: .silent)
        return DropboxSubject(fake: fake, provider: provider, sleeps: sleeps)
    }
    func expectedBytes(_ path: String) -> [UInt8]? { nil }
    func refuseLinksAfterOneUse() async throws -> Bool { false }
    func throttleNextListingCall() async throws -> Bool {
        try await fake.control(["op": "fail", "route": "files/list_folder", "status": 429, "count": 1, "retry_after": 1, "where": "header"])
        return true
    }
    func expireToken() async throws -> Bool {
        try await fake.control(["op": "expire_token"])
        return true
    }
    /// The fake has no move: a delete and an add, as Dropbox's feed reports a move (deleted + file entries).
    func deleteAndMove(delete: String, move: String, to: String) async throws -> Bool {
        let size = ConformanceLibrary.audio.first { $0.path == move }?.size ?? 1
        try await fake.control(["op": "delete", "path": "/" + delete])
        try await fake.control(["op": "delete", "path": "/" + move])
        try await fake.control(["op": "add", "path": "/" + to, "size": size])
        return true
    }
    func changeContent(of path: String) async throws {
        try await fake.control(["op": "modify", "path": "/" + path, "size": ConformanceLibrary.audio.first { $0.path == path }?.size ?? 1])
    }
    func requests() async throws -> [FakeRequest]? { try await fake.requests() }
    func stop() { fake.stop() }
}

struct DriveSubject: ConformanceSubject {
    let fake: DriveFake
    let provider: any Provider
    let sleeps: SleepRecorder
    var name: String { "gdrive" }
    var transport: any Transport { fake.transport }

    static func start() async throws -> DriveSubject {
        let root = "0AROOTFOLDERID"
        var items: [[String: Any]] = []
        var folders: [String: String] = ["": root]
        func folderID(_ path: String) -> String {
            if let id = folders[path] { return id }
            let parent = path.split(separator: "/").dropLast().joined(separator: "/")
            let parentID = folderID(parent)
            let id = "fold\(folders.count)x"
            folders[path] = id
            items.append(["id": id, "name": String(path.split(separator: "/").last ?? ""), "mimeType": "application/vnd.google-apps.folder",
                          "parents": [parentID]])
            return id
        }
        for (i, f) in (ConformanceLibrary.audio + [(ConformanceLibrary.other, 5)]).enumerated() {
            let parts = f.path.split(separator: "/")
            let parent = folderID(parts.dropLast().joined(separator: "/"))
            items.append(["id": "file\(i)x", "name": String(parts.last ?? ""), "parents": [parent], "size": f.size,
                          "mimeType": f.path.hasSuffix(".txt") ? "text/plain" : "audio/mpeg"])
        }
        let fake = try await DriveFake(["rootId": root, "items": items])
        let harness = try DriveHarness(fake, pageSize: 2)
        return DriveSubject(fake: fake, provider: harness.provider, sleeps: harness.sleeps)
    }
    func expectedBytes(_ path: String) -> [UInt8]? { nil }
    func refuseLinksAfterOneUse() async throws -> Bool { false }
    func throttleNextListingCall() async throws -> Bool {
        try await fake.control([["op": "fail", "path": "/drive/v3/files", "status": 429, "reason": "rateLimitExceeded", "count": 1, "retryAfter": 1]])
        return true
    }
    func expireToken() async throws -> Bool {
        try await fake.control([["op": "expireToken"]])
        return true
    }
    func id(_ path: String) throws -> String {
        "file\(try #require(ConformanceLibrary.audio.firstIndex { $0.path == path }))x"
    }
    func deleteAndMove(delete: String, move: String, to: String) async throws -> Bool {
        try await fake.control([["op": "delete", "id": try id(delete)],
                                ["op": "update", "id": try id(move), "parents": ["0AROOTFOLDERID"], "name": to]])
        return true
    }
    func changeContent(of path: String) async throws { try await fake.control([["op": "modify", "id": try id(path)]]) }
    func requests() async throws -> [FakeRequest]? { try await fake.requests() }
    func stop() { fake.stop() }
}

struct OneDriveSubject: ConformanceSubject {
    let fake: OneDriveFake
    let provider: any Provider
    let sleeps: SleepRecorder
    var name: String { "onedrive" }
    var transport: any Transport { fake.transport }

    static func start() async throws -> OneDriveSubject {
        var items: [[String: Any]] = ConformanceLibrary.audio.map { ["path": "Music/" + $0.path, "size": $0.size] }
        items.append(["path": "Music/" + ConformanceLibrary.other, "size": 5, "mime": "text/plain"])
        let fake = try await OneDriveFake(["items": items, "page_size": 2])
        let options = OneDriveOptions(remoteName: "od", root: "/Music", apiURL: fake.apiURL, tokenURL: fake.tokenURL)
        let refresher = OAuthRefresher(remoteName: "od", tokens: TokenSet(accessToken: "at-0", refreshToken: "rt-0"),
                                       client: options.oauthClient(clientID: "cid"), transport: fake.transport) { _ in }
        let sleeps = SleepRecorder(sleepingAtMost: 0.05)
        return OneDriveSubject(fake: fake, provider: fake.provider(root: "/Music", tokens: refresher, pacer: sleeps.pacer()), sleeps: sleeps)
    }
    func throttleNextListingCall() async throws -> Bool {
        try await fake.control(["op": "set", "values": ["ratelimit": 1]])
        return true
    }
    /// The token expires after one more Graph call.
    func expireToken() async throws -> Bool {
        try await fake.control(["op": "set", "values": ["token_uses": 1]])
        return true
    }
    func deleteAndMove(delete: String, move: String, to: String) async throws -> Bool {
        try await fake.control(["op": "delete", "path": "Music/" + delete])
        try await fake.control(["op": "move", "path": "Music/" + move, "to": "Music/" + to])
        return true
    }
    func changeContent(of path: String) async throws { try await fake.control(["op": "modify", "path": "Music/" + path]) }
    func requests() async throws -> [FakeRequest]? { try await fake.requests() }
    func expectedBytes(_ path: String) -> [UInt8]? { nil }
    func refuseLinksAfterOneUse() async throws -> Bool {
        try await fake.control(["op": "set", "values": ["link_uses": 1, "link_status": 410]])
        return true
    }
    func stop() { fake.stop() }
}

struct YandexSubject: ConformanceSubject {
    let fake: YandexFake
    let provider: any Provider
    let sleeps: SleepRecorder
    var name: String { "yandex" }
    var transport: any Transport { fake.transport }

    static func start() async throws -> YandexSubject {
        var files: [[String: Any]] = ConformanceLibrary.audio.map { ["path": $0.path, "size": $0.size] }
        files.append(["path": ConformanceLibrary.other, "size": 5])
        let fake = try await YandexFake(["files": files, "href_max_uses": 1, "href_expired_status": 410])
        let sleeps = SleepRecorder(sleepingAtMost: 0.05)
        return YandexSubject(fake: fake, provider: fake.provider(pageSize: 2, tokens: fake.refresher(), pacer: sleeps.pacer()), sleeps: sleeps)
    }
    func throttleNextListingCall() async throws -> Bool {
        try await fake.control(["op": "throttle", "count": 1, "status": 429, "retry_after": "1", "target": "api"])
        return true
    }
    func expireToken() async throws -> Bool {
        try await fake.control(["op": "expire_token"])
        return true
    }
    func deleteAndMove(delete: String, move: String, to: String) async throws -> Bool {
        try await fake.control(["op": "delete", "path": delete])
        try await fake.control(["op": "move", "from": move, "to": to])
        return true
    }
    func changeContent(of path: String) async throws { try await fake.control(["op": "modify", "path": path]) }
    func requests() async throws -> [FakeRequest]? { try await fake.requests() }
    func expectedBytes(_ path: String) -> [UInt8]? { nil }
    /// The spec already makes every href answer 410 after one GET.
    func refuseLinksAfterOneUse() async throws -> Bool { true }
    func stop() { fake.stop() }
}

final class WebDAVSubject: ConformanceSubject, @unchecked Sendable {
    let server: RealWebDAVServer
    let dir: URL
    let provider: any Provider
    let transport: any Transport
    let kind: String
    let sleeps = SleepRecorder(sleepingAtMost: 0.05)
    var name: String { "webdav-\(kind)" }

    init(kind: String, server: RealWebDAVServer, dir: URL, provider: any Provider, transport: any Transport) {
        self.kind = kind
        self.server = server
        self.dir = dir
        self.provider = provider
        self.transport = transport
    }

    static func content(_ path: String, size: Int) -> [UInt8] {
        let seed = Array(path.utf8)
        return (0..<size).map { seed[$0 % seed.count] &+ UInt8(truncatingIfNeeded: $0) }
    }

    static func start(_ kind: String) async throws -> WebDAVSubject {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)")
        for f in ConformanceLibrary.audio + [(ConformanceLibrary.other, 5)] {
            let url = dir.appendingPathComponent(f.path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(content(f.path, size: f.size)).write(to: url)
        }
        let server = try await RealWebDAVServer.start(kind, serving: dir, freshListings: true)
        let transport = try CurlTransport()
        return WebDAVSubject(kind: kind, server: server, dir: dir, provider: try makeProvider(url: server.url, transport: transport),
                             transport: transport)
    }
    /// A real server cannot be told to throttle (WebDAVFakeServerTests cover Retry-After with the fake).
    func throttleNextListingCall() async throws -> Bool { false }
    /// Basic auth: nothing to refresh.
    func expireToken() async throws -> Bool { false }
    /// Changed in the served folder itself.
    func deleteAndMove(delete: String, move: String, to: String) async throws -> Bool {
        try FileManager.default.removeItem(at: dir.appendingPathComponent(delete))
        try FileManager.default.moveItem(at: dir.appendingPathComponent(move), to: dir.appendingPathComponent(to))
        return true
    }
    /// Written in the served folder, its modification time moved on by a minute: nginx and rclone make their ETag
    /// of the time (nginx in whole seconds) and the size, which stays.
    func changeContent(of path: String) async throws {
        let url = dir.appendingPathComponent(path)
        let old = try Data(contentsOf: url)
        let modified = try FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date ?? Date()
        try Data(old.map { $0 ^ 0xFF }).write(to: url)
        try FileManager.default.setAttributes([.modificationDate: modified.addingTimeInterval(60)], ofItemAtPath: url.path)
    }
    func requests() async throws -> [FakeRequest]? { nil }
    func expectedBytes(_ path: String) -> [UInt8]? {
        ConformanceLibrary.audio.first { $0.path == path }.map { Self.content($0.path, size: $0.size) }
    }
    func refuseLinksAfterOneUse() async throws -> Bool { false }
    func stop() {
        server.stop()
        try? FileManager.default.removeItem(at: dir)
    }
}

/// A download by ``conformanceDownload(_:provider:transport:chunk:afterFirstPart:)``.
struct ConformanceDownload {
    var bytes: [UInt8]
    /// Links resolved, the first included.
    var resolutions: Int
    /// Times the file was started over because a new version answered.
    var restarts: Int
    /// The validator the download ended with: the request's strong tag, else the first answer's ETag; nil when the
    /// content host named no version at all.
    var validator: String?
}

/// Downloads `file` as the engine does (FileFetcher): one resolved request reused for every `chunk`-sized range with
/// `If-Range` (the request's strong tag, else the first answer's); a refused link (401/403/404/410) re-resolved
/// through `resolveDownload(for:rejected:status:)` and the same offset asked again; an answer of another version (an
/// ETag other than the known one, e.g. the 200 of an `If-Range` that no longer matches) drops the bytes and starts
/// over from 0; a total size other than the listed one throws "changed size". `afterFirstPart` runs once, after the
/// first range has arrived.
func conformanceDownload(_ file: RemoteFile, provider: any Provider, transport: any Transport, chunk: Int64,
                         afterFirstPart: (() async throws -> Void)? = nil) async throws -> ConformanceDownload {
    var sink = MemoryByteSink()
    var request = try await provider.resolveDownload(for: file)
    var result = ConformanceDownload(bytes: [], resolutions: 1, restarts: 0, validator: request.etag)
    var hook = afterFirstPart
    var offset: Int64 = 0
    while offset < file.size {
        let range = offset...min(file.size - 1, offset + chunk - 1)
        let http = HTTPRequest(method: request.method, url: request.url, headers: HTTPHeaders(request.headers),
                               keepsAuthAcrossHosts: request.sendsAuthOnRedirect)
        let outcome = try await transport.download(http, range: range, ifRange: result.validator.flatMap(EntityTag.ifRangeValidator),
                                                   into: sink)
        switch outcome.head.status {
        case 200, 206:
            if let total = outcome.totalSize, total != file.size {
                throw ProviderError(.invalidResponse, "\(file.path) changed size on the server during download (\(total) bytes now, \(file.size) listed)")
            }
            let answered = outcome.head.headers["ETag"]
            if let known = result.validator, let answered, !EntityTag.sameVersion(known, answered) {
                guard result.restarts < 2 else { throw ProviderError(.invalidResponse, "\(file.path) kept changing during download") }
                result.restarts += 1
                result.validator = answered
                sink = MemoryByteSink()
                offset = 0
                continue
            }
            if result.validator == nil { result.validator = answered }
            if outcome.head.status == 206 {
                #expect(outcome.delivered == range.lowerBound..<(range.upperBound + 1), "\(file.path): \(outcome.delivered) for \(range)")
                #expect(outcome.totalSize == file.size, "\(file.path): Content-Range total")
                offset = range.upperBound + 1
            } else {
                offset = max(offset + 1, outcome.delivered.upperBound)
            }
            if let run = hook {
                hook = nil
                try await run()
            }
        case 401, 403, 404, 410:
            guard result.resolutions < 2 * Int(file.size / chunk + 2) else {
                throw ProviderError(.linkExpired, "\(file.path): refused again after \(result.resolutions) resolutions")
            }
            request = try await provider.resolveDownload(for: file, rejected: request, status: outcome.head.status)
            result.resolutions += 1
        default:
            throw ProviderError(.invalidResponse, "\(file.path): HTTP \(outcome.head.status) at offset \(offset)")
        }
    }
    result.bytes = sink.bytes
    return result
}

/// The digest of `bytes` of `kind`, as providers print it.
func conformanceDigest(_ bytes: [UInt8], _ kind: HashKind) -> String {
    var hasher = makeHasher(for: kind)
    bytes.withUnsafeBytes { hasher.update($0) }
    return hasher.finalize()
}

func conformanceSkip(_ subject: any ConformanceSubject, _ test: String, _ reason: String) {
    print("conformance: skip \(subject.name) \(test): \(reason)")
}

/// The tests run in parallel, the cases of each (one per subject) one after another: at most one server per test
/// at a time. Serialized as a whole, the suite took ~3 minutes with the machine's CPU three quarters idle (each
/// case mostly waits for its server to start and answer).
@Suite("Provider conformance: the same cases for every provider", .timeLimit(.minutes(5)))
struct ProviderConformanceTests {
    func with(_ name: String, _ body: (any ConformanceSubject) async throws -> Void) async throws {
        let subject = try await ConformanceSubjects.start(name)
        defer { subject.stop() }
        try await body(subject)
    }

    func fullListing(_ subject: any ConformanceSubject) async throws -> [ListingPage] {
        var pages: [ListingPage] = []
        for try await page in subject.provider.listAudio(cursor: nil) { pages.append(page) }
        return pages
    }

    @Test("a full listing in tiny pages holds every audio file once, hostile names intact, sizes and declared hashes",
          .serialized, arguments: ConformanceSubjects.names)
    func listing(_ name: String) async throws {
        try await with(name) { subject in
            let pages = try await fullListing(subject)
            let files = pages.flatMap(\.upserts)
            let capabilities = subject.provider.capabilities
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(Set(files.map(\.path)) == ConformanceLibrary.paths, """
                \(name) missing: \(ConformanceLibrary.paths.subtracting(files.map(\.path)).sorted())
                extra: \(Set(files.map(\.path)).subtracting(ConformanceLibrary.paths).sorted())
                """)
            #expect(files.count == ConformanceLibrary.audio.count, "\(name): each file listed once")
            for (path, size) in ConformanceLibrary.audio {
                #expect(files.first { $0.path == path }?.size == Int64(size), "\(name) \(path)")
            }
            // The cursor is on the last page only, and only a provider with a change feed hands one out.
            #expect(pages.dropLast().allSatisfy { $0.cursor == nil })
            #expect((pages.last?.cursor != nil) == capabilities.hasChangeFeed, "\(name): cursor vs hasChangeFeed")
            if capabilities.hashKinds.isEmpty {
                conformanceSkip(subject, "hashes", "declares no hash kinds")
            } else {
                for file in files {
                    #expect(file.hashes.contains { capabilities.hashKinds.contains($0.kind) }, "\(name) \(file.path): no declared hash")
                }
            }
        }
    }

    @Test("an unchanged remote gives an empty change feed from the cursor", .serialized, arguments: ConformanceSubjects.names)
    func unchangedFeed(_ name: String) async throws {
        try await with(name) { subject in
            guard subject.provider.capabilities.hasChangeFeed else {
                return conformanceSkip(subject, "change feed", "hasChangeFeed is false")
            }
            let cursor = try #require(try await fullListing(subject).last?.cursor)
            var pages: [ListingPage] = []
            for try await page in subject.provider.listAudio(cursor: cursor) { pages.append(page) }
            #expect(pages.allSatisfy { $0.kind == .changes }, "\(name)")
            #expect(pages.flatMap(\.upserts).isEmpty && pages.flatMap(\.deletions).isEmpty, "\(name): \(pages.flatMap(\.upserts).map(\.path))")
            #expect(pages.last?.cursor != nil)
        }
    }

    @Test("ranged downloads with If-Range give the exact bytes, checked by the declared hash or the source",
          .serialized, arguments: ConformanceSubjects.names)
    func rangedDownload(_ name: String) async throws {
        try await with(name) { subject in
            guard subject.provider.capabilities.supportsRanges else {
                return conformanceSkip(subject, "ranged download", "supportsRanges is false")
            }
            let files = try await fullListing(subject).flatMap(\.upserts)
            for file in files {
                let bytes = try await conformanceDownload(file, provider: subject.provider, transport: subject.transport, chunk: 16).bytes
                #expect(bytes.count == Int(file.size), "\(name) \(file.path)")
                if let expected = subject.expectedBytes(file.path) {
                    #expect(bytes == expected, "\(name) \(file.path)")
                } else {
                    let hash = try #require(file.preferredHash, "\(name) \(file.path): neither known bytes nor a hash")
                    #expect(conformanceDigest(bytes, hash.kind) == hash.value, "\(name) \(file.path): \(hash.kind)")
                }
            }
        }
    }

    @Test("a link refused after one use is resolved again and the download continues at the same offset",
          .serialized, arguments: ConformanceSubjects.names)
    func refusedLink(_ name: String) async throws {
        try await with(name) { subject in
            guard try await subject.refuseLinksAfterOneUse() else {
                return conformanceSkip(subject, "refused link", "its downloads are not links that expire (token or Basic auth on the content host)")
            }
            let files = try await fullListing(subject).flatMap(\.upserts)
            let file = try #require(files.max { $0.size < $1.size })
            let download = try await conformanceDownload(file, provider: subject.provider, transport: subject.transport, chunk: 32)
            let bytes = download.bytes
            #expect(bytes.count == Int(file.size))
            #expect(download.resolutions > 1, "\(name): the link was never refused")
            if let hash = file.preferredHash {
                #expect(conformanceDigest(bytes, hash.kind) == hash.value, "\(name) \(file.path)")
            }
        }
    }

    @Test("a file changed mid-download never yields bytes of two versions: the listed one throughout, a restart on the new one, or a changed error",
          .serialized, arguments: ConformanceSubjects.names)
    func changedMidDownload(_ name: String) async throws {
        try await with(name) { subject in
            guard subject.provider.capabilities.supportsRanges else {
                return conformanceSkip(subject, "changed mid-download", "supportsRanges is false")
            }
            let path = ConformanceLibrary.audio[1].path
            let file = try #require(try await fullListing(subject).flatMap(\.upserts).first { $0.path == path })
            let old = try await conformanceDownload(file, provider: subject.provider, transport: subject.transport, chunk: file.size).bytes
            let logged = try await subject.requests()?.count ?? 0
            var outcome: Result<ConformanceDownload, any Error>
            do {
                outcome = .success(try await conformanceDownload(file, provider: subject.provider, transport: subject.transport, chunk: 32) {
                    try await subject.changeContent(of: path)
                })
            } catch {
                outcome = .failure(error)
            }
            let ranged = try await subject.requests()?.dropFirst(logged).filter { $0.range != nil }
            let relisted = try #require(try await fullListing(subject).flatMap(\.upserts).first { $0.path == path })
            let new = try await conformanceDownload(relisted, provider: subject.provider, transport: subject.transport, chunk: relisted.size).bytes
            #expect(old != new && old.count == new.count, "\(name): the change must give other bytes of the same size")
            #expect(relisted.revision != file.revision || relisted.hashes != file.hashes || relisted.modified != file.modified,
                    "\(name): the listing must show the new version")
            let way: String
            switch outcome {
            case .failure(let error):
                #expect((error as? ProviderError)?.message.contains("changed") == true, "\(name): \(error)")
                way = "failed: \(error)"
            case .success(let download) where download.bytes == old:
                #expect(download.restarts == 0)
                way = "the listed version throughout (the download names its revision)"
            case .success(let download) where download.bytes == new:
                #expect(download.restarts == 1, "\(name): the new version, so it must have started over")
                way = "started over on the new version (an answer with a new ETag)"
                if let ranged {
                    #expect(ranged.dropFirst().allSatisfy { $0.if_range != nil }, "\(name): ranges after the first carry If-Range: \(ranged)")
                }
            case .success(let download):
                // Mixed on the wire: only where nothing named a version; then the listed hash must refuse the bytes,
                // as the engine's verification does (it fetches once more and fails the file).
                #expect(download.validator == nil, "\(name): mixed versions although the content host sent ETag \(download.validator ?? "")")
                let hash = try #require(file.preferredHash, "\(name): mixed versions and no declared hash to refuse them")
                #expect(conformanceDigest(download.bytes, hash.kind) != hash.value)
                way = "no version named on the wire; the mixed bytes fail the listed \(hash.kind) check"
            }
            print("conformance: \(name) changed mid-download: \(way)")
        }
    }

    @Test("429 with Retry-After: the pacer waits what the server said and the listing completes", .serialized, arguments: ConformanceSubjects.names)
    func throttled(_ name: String) async throws {
        try await with(name) { subject in
            guard try await subject.throttleNextListingCall() else {
                return conformanceSkip(subject, "429 Retry-After", "a real server cannot be told to throttle")
            }
            let files = try await fullListing(subject).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == ConformanceLibrary.paths, "\(name)")
            #expect(subject.sleeps.recorded.contains { $0 > 0.5 && $0 <= 1.0 }, "\(name): waits \(subject.sleeps.recorded)")
        }
    }

    @Test("401 → refresh → retry: a refused token is refreshed once and listing and downloads go on", .serialized, arguments: ConformanceSubjects.names)
    func refreshedToken(_ name: String) async throws {
        try await with(name) { subject in
            guard try await subject.expireToken() else {
                return conformanceSkip(subject, "401 refresh", "no refreshable token (Basic auth)")
            }
            let files = try await fullListing(subject).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == ConformanceLibrary.paths, "\(name)")
            _ = try await subject.expireToken()
            let file = try #require(files.max { $0.size < $1.size })
            let bytes = try await conformanceDownload(file, provider: subject.provider, transport: subject.transport, chunk: 64).bytes
            let hash = try #require(file.preferredHash)
            #expect(conformanceDigest(bytes, hash.kind) == hash.value, "\(name) \(file.path)")
        }
    }

    @Test("deleted and moved files: the next listing (from the cursor where a feed is declared) drops and moves them",
          .serialized, arguments: ConformanceSubjects.names)
    func deletedAndMoved(_ name: String) async throws {
        try await with(name) { subject in
            let capabilities = subject.provider.capabilities
            let first = try await fullListing(subject)
            var state = Dictionary(first.flatMap(\.upserts).map { ($0.path, $0) }, uniquingKeysWith: { $1 })
            let gone = ConformanceLibrary.audio[2].path, moved = ConformanceLibrary.audio[0].path, to = "Moved here.mp3"
            guard try await subject.deleteAndMove(delete: gone, move: moved, to: to) else {
                return conformanceSkip(subject, "deleted and moved", "the server cannot be changed")
            }
            var pages: [ListingPage] = []
            for try await page in subject.provider.listAudio(cursor: first.last?.cursor) { pages.append(page) }
            if capabilities.hasChangeFeed {
                #expect(pages.allSatisfy { $0.kind == .changes }, "\(name): a declared change feed lists changes")
            } else {
                #expect(pages.allSatisfy { $0.kind == .full })
            }
            conformanceApply(pages, to: &state, caseInsensitive: capabilities.caseInsensitivePaths)
            let expected = ConformanceLibrary.paths.subtracting([gone, moved]).union([to])
            #expect(Set(state.keys) == expected, """
                \(name) missing: \(expected.subtracting(state.keys).sorted()) extra: \(Set(state.keys).subtracting(expected).sorted())
                """)
        }
    }
}

/// What the engine does with a listing over the files it knows (ARCHITECTURE "Data flow" 3): a `.full` listing
/// replaces them; `.changes` delete by path (a file or a folder, case-insensitively when the provider declares
/// `caseInsensitivePaths`) or provider id, and an upsert of a known provider id at a new path retires the old path.
func conformanceApply(_ pages: [ListingPage], to state: inout [String: RemoteFile], caseInsensitive: Bool) {
    if pages.first?.kind == .full {
        state = Dictionary(pages.flatMap(\.upserts).map { ($0.path, $0) }, uniquingKeysWith: { $1 })
        return
    }
    func same(_ a: String, _ b: String) -> Bool { caseInsensitive ? a.lowercased() == b.lowercased() : a == b }
    for page in pages {
        for deletion in page.deletions {
            switch deletion {
            case .path(let p):
                for key in state.keys where p.isEmpty || same(key, p) || (caseInsensitive ? key.lowercased().hasPrefix(p.lowercased() + "/") : key.hasPrefix(p + "/")) {
                    state[key] = nil
                }
            case .providerID(let id):
                for (key, file) in state where file.providerID == id { state[key] = nil }
            }
        }
        for file in page.upserts {
            if let id = file.providerID {
                for (key, known) in state where known.providerID == id && key != file.path { state[key] = nil }
            }
            state[file.path] = file
        }
    }
}
