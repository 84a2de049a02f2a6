import CloudSyncCore
import CloudSyncHTTP
import Foundation
import TestSupport
import Testing
@testable import YandexDisk

/// A library with audio at several depths, non-audio files beside it, and hostile names.
private var yandexLibrary: [[String: Any]] { [
    ["path": "Music/Мумий Тролль/Владивосток 2000.mp3", "size": 70_001],
    ["path": "Music/Sigur Rós/Hoppípolla.flac", "size": 90_000],
    ["path": "Music/Sigur Rós/cover.jpg", "size": 300],
    ["path": "Music/日本/曲 #1 & 50% + more?.ogg", "size": 65_536],
    ["path": "Music/AC+DC/Back in Black.m4a", "size": 1],
    ["path": "Music/empty.opus", "size": 0],
    ["path": "Music/notes.txt", "size": 12],
    ["path": "Music/Album.cue", "size": 40],
    ["path": "Podcasts/ep1.mp3", "size": 2048],
    ["path": "Documents/report.pdf", "size": 99],
    ["path": "Music/DSD/track.dsf", "size": 128],
] }

private let audioUnderDisk: Set<String> = [
    "Music/Мумий Тролль/Владивосток 2000.mp3", "Music/Sigur Rós/Hoppípolla.flac", "Music/日本/曲 #1 & 50% + more?.ogg",
    "Music/AC+DC/Back in Black.m4a", "Music/empty.opus", "Podcasts/ep1.mp3",
]

@Suite("Yandex.Disk against the fake API")
struct YandexProviderTests {
    @Test("flat audio list, page size 2: exactly the audio files, one request per page, OAuth everywhere")
    func flatListing() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let provider = fake.provider(pageSize: 2)
            #expect(provider.usesFlatListing)
            let files = try await yandexListing(provider)
            // .dsf is "unknown" to Yandex's media_type: the flat list cannot see it (documented trade-off).
            #expect(Set(files.keys) == audioUnderDisk)
            let f = try #require(files["Music/Sigur Rós/Hoppípolla.flac"])
            #expect(f.size == 90_000)
            #expect(f.providerID?.hasPrefix("4000000001:") == true)
            #expect(!f.revision.isEmpty && Int64(f.revision) != nil)
            #expect(f.hashes.map(\.kind) == [.sha256, .md5])
            #expect(f.mimeType == "audio/flac")
            #expect(f.downloadHint == "disk:/Music/Sigur Rós/Hoppípolla.flac")
            #expect(f.modified.timeIntervalSince1970 > 1_700_000_000)
            let log = try await fake.log()
            let listing = log.filter { $0.path == "/v1/disk/resources/files" }
            // 6 audio files in pages of 2: 2, 2, 2, then an empty page ends it (no total in FilesResourceList).
            #expect(listing.count == 4)
            #expect(listing.map { $0.query["offset"] } == ["0", "2", "4", "6"])
            #expect(listing.allSatisfy { $0.query["limit"] == "2" && $0.query["media_type"] == "audio" && $0.query["fields"] == YandexAPI.filesFields })
            #expect(log.filter { $0.path == "/v1/disk/resources" }.isEmpty, "no folder walk for the whole disk")
            #expect(log.allSatisfy { $0.auth_scheme == "OAuth" })
        }
    }

    @Test("flat list without a total ends at an empty page, not a short one: a server capping its pages loses no track")
    func flatShortPageDoesNotEnd() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let files = try await yandexListing(fake.provider(pageSize: 4))
            #expect(Set(files.keys) == audioUnderDisk)
            let listing = try await fake.log().filter { $0.path == "/v1/disk/resources/files" }
            #expect(listing.map { $0.query["offset"] } == ["0", "4", "6"])
        }
        // Pages of at most 2 while the answers say "limit": 4 (before, the first short page ended the list: 2 tracks).
        try await YandexFake.with(["files": yandexLibrary, "max_limit": 2]) { fake in
            let files = try await yandexListing(fake.provider(pageSize: 4))
            #expect(Set(files.keys) == audioUnderDisk)
        }
    }

    @Test("folder walk with short pages pages on offset/total and returns exactly the audio files", arguments: ["Music", "/Music/", "disk:/Music"])
    func folderWalk(root: String) async throws {
        try await YandexFake.with(["files": yandexLibrary, "short_pages": true, "dirs": ["Music/Empty/Deeper"]]) { fake in
            let provider = fake.provider(root: root, pageSize: 2)
            #expect(!provider.usesFlatListing)
            let files = try await yandexListing(provider)
            #expect(Set(files.keys) == [
                "Мумий Тролль/Владивосток 2000.mp3", "Sigur Rós/Hoppípolla.flac", "日本/曲 #1 & 50% + more?.ogg",
                "AC+DC/Back in Black.m4a", "empty.opus", "DSD/track.dsf",
            ])
            #expect(files["empty.opus"]?.size == 0)
            let log = try await fake.log()
            let pages = log.filter { $0.path == "/v1/disk/resources" }
            #expect(pages.allSatisfy { $0.status == 200 && $0.auth_scheme == "OAuth" && $0.query["fields"] == YandexAPI.folderFields })
            // Music has 9 children served one per page (short pages): offsets 0...8 — never stopped at a short page.
            let musicOffsets = pages.filter { $0.query["path"] == "disk:/Music" }.compactMap { $0.query["offset"].flatMap(Int.init) }
            #expect(musicOffsets.sorted() == Array(0..<9))
            #expect(pages.contains { $0.query["path"] == "disk:/Music/Empty/Deeper" })
            #expect(log.filter { $0.path == "/v1/disk/resources/files" }.isEmpty)
        }
    }

    @Test("whole disk with flat listing off walks every folder and finds extensions Yandex does not class as audio")
    func wholeDiskWalk() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let files = try await yandexListing(fake.provider(pageSize: 3, flatListing: false))
            #expect(Set(files.keys) == audioUnderDisk.union(["Music/DSD/track.dsf"]))
        }
    }

    @Test("a folder deeper than walkLimits.maxDepth is not listed and is reported; shallower ones are")
    func walkDepthCap() async throws {
        let spec: [String: Any] = ["files": [
            ["path": "Music/top.mp3", "size": 10], ["path": "Music/A/one.mp3", "size": 11],
            ["path": "Music/A/B/two.mp3", "size": 12], ["path": "Music/A/B/C/three.mp3", "size": 13],
        ]]
        try await YandexFake.with(spec) { fake in
            let logs = LogRecorder()
            let provider = fake.provider(root: "Music", logs: logs, walkLimits: WalkLimits(maxDepth: 1))
            let pages = try await listingPages(provider)
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == ["top.mp3", "A/one.mp3"])
            #expect(pages.flatMap(\.skippedFolders) == ["A/B"])
            #expect(logs.warnings.contains { $0.contains("'A/B'") && $0.contains("deeper than 1 folders") }, "\(logs.warnings)")
            let asked = try await fake.log().filter { $0.path == "/v1/disk/resources" }.compactMap { $0.query["path"] }
            #expect(!asked.contains { $0.hasPrefix("disk:/Music/A/B") }, "\(asked)")
        }
    }

    @Test("more folders than walkLimits.maxFolders end the walk with a clear error")
    func walkFolderCap() async throws {
        let files: [[String: Any]] = (0 ..< 30).map { ["path": "Music/Folder \($0)/t.mp3", "size": 5] }
        try await YandexFake.with(["files": files]) { fake in
            let provider = fake.provider(root: "Music", walkLimits: WalkLimits(maxFolders: 10))
            let error = await #expect(throws: ProviderError.self) { _ = try await yandexListing(provider) }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("more than 10 folders under 'Music'") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("Set root") == true)
            let walked = try await fake.log().filter { $0.path == "/v1/disk/resources" }.count
            #expect(walked <= 10, "the walk stopped at the cap (\(walked) folder pages)")
        }
    }

    @Test("a missing root is .notFound naming the root; a file as root is .configuration")
    func missingRoot() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let error = await #expect(throws: ProviderError.self) { _ = try await yandexListing(fake.provider(root: "Музыка")) }
            #expect(error?.code == .notFound)
            #expect(error?.message.contains("'Музыка'") == true)
            #expect(error?.message.contains("root") == true)
            let fileRoot = await #expect(throws: ProviderError.self) { _ = try await yandexListing(fake.provider(root: "Podcasts/ep1.mp3")) }
            #expect(fileRoot?.code == .configuration)
        }
    }

    @Test("non-ASCII library: identical bytes, hashes verified, one href per file for many ranges, OAuth on both hosts")
    func downloads() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let provider = fake.provider()
            let files = try await yandexListing(provider)
            for file in files.values.sorted(by: { $0.path < $1.path }) {
                let bytes = try await yandexDownload(provider, file, transport: fake.transport, chunk: 8192)
                #expect(bytes.count == Int(file.size))
                let sha = try #require(file.hashes.first { $0.kind == .sha256 })
                let md5 = try #require(file.hashes.first { $0.kind == .md5 })
                #expect(yandexHash(bytes, .sha256) == sha.value, "\(file.path)")
                #expect(yandexHash(bytes, .md5) == md5.value, "\(file.path)")
            }
            let log = try await fake.log()
            let links = log.filter { $0.path == "/v1/disk/resources/download" }
            #expect(links.count == files.count, "one href per file")
            #expect(Set(links.compactMap(\.file)) == Set(files.values.compactMap { $0.downloadHint.map { String($0.dropFirst("disk:/".count)) } }))
            let gets = log.filter { $0.server == "download" }
            // Ranges: ceil(size/8192) each, none for the 0-byte file.
            let expected = files.values.reduce(0) { $0 + Int(($1.size + 8191) / 8192) }
            #expect(gets.count == expected)
            #expect(gets.allSatisfy { $0.status == 206 && $0.auth_scheme == "OAuth" && $0.auth_token == "test-access-token" })
            #expect(gets.allSatisfy { $0.host == "localhost:\(fake.downloadPort)" })
            #expect(log.filter { $0.server == "api" }.allSatisfy { $0.host == "127.0.0.1:\(fake.apiPort)" })
        }
    }

    @Test("an href that expires mid-file is resolved again and the download continues from the same offset", arguments: [410, 403, 404])
    func hrefExpiry(status: Int) async throws {
        try await YandexFake.with(["files": yandexLibrary, "href_max_uses": 3, "href_expired_status": status]) { fake in
            let provider = fake.provider()
            let files = try await yandexListing(provider)
            let file = try #require(files["Music/Sigur Rós/Hoppípolla.flac"])
            let bytes = try await yandexDownload(provider, file, transport: fake.transport, chunk: 10_000)
            #expect(yandexHash(bytes, .sha256) == file.hashes.first { $0.kind == .sha256 }?.value)
            let log = try await fake.log()
            // 9 ranges, 3 per href → 3 hrefs; 2 refusals.
            #expect(log.filter { $0.path == "/v1/disk/resources/download" }.count == 3)
            let gets = log.filter { $0.server == "download" }
            #expect(gets.filter { $0.status == status }.count == 2)
            let ok = gets.filter { $0.status == 206 }.compactMap(\.range)
            #expect(ok == (0..<9).map { "bytes=\($0 * 10_000)-\(min(90_000, ($0 + 1) * 10_000) - 1)" })
            // The range refused is asked again with the new href, from the same offset.
            let refusedRanges = gets.filter { $0.status == status }.compactMap(\.range)
            #expect(refusedRanges == ["bytes=30000-39999", "bytes=60000-69999"])
        }
    }

    @Test("the fake refuses Bearer with 401 UnauthorizedError, which maps to .tokenExpired")
    func bearerRefused() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let url = try #require(URL(string: "http://127.0.0.1:\(fake.apiPort)/v1/disk/resources?path=disk%3A%2F"))
            let response = try await fake.transport.send(HTTPRequest(url: url, headers: ["Authorization": "Bearer test-access-token"]))
            #expect(response.status == 401)
            let error = YandexDiskProvider.classify(response, remoteName: "yd")
            #expect(error?.code == .tokenExpired)
            #expect(error?.message.contains("UnauthorizedError") == true)
        }
    }

    @Test("a refused token that cannot be refreshed ends as .unauthorized with the login hint")
    func unauthorized() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let provider = fake.provider(tokens: StaticTokenSource(token: "wrong", remoteName: "yd"))
            let error = await #expect(throws: ProviderError.self) { _ = try await yandexListing(provider) }
            #expect(error?.code == .unauthorized)
            #expect(error?.message.contains("cloudsync login yd") == true)
            #expect(error?.message.contains("wrong") == false, "no token in messages")
        }
    }

    @Test("token expiry mid-listing refreshes once through token_url and continues")
    func tokenExpiryDuringListing() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let tokens = fake.refresher()
            let provider = fake.provider(root: "Music", pageSize: 2, tokens: tokens)
            var seen: [String: RemoteFile] = [:]
            var pages = 0
            for try await page in provider.listAudio(cursor: nil) {
                pages += 1
                if pages == 1 { try await fake.control(["op": "expire_token"]) }
                for f in page.upserts { seen[f.path] = f }
            }
            #expect(seen.count == 6)
            let log = try await fake.log()
            #expect(log.filter { $0.path == "/token" }.count == 1)
            #expect(log.contains { $0.status == 401 })
            let fresh = await tokens.current.accessToken
            #expect(fresh.hasPrefix("refreshed-"))
            #expect(log.last { $0.path == "/v1/disk/resources" }?.auth_token == fresh)
        }
    }

    @Test("token expiry mid-download: the download host's 401 refreshes the token, a new href continues the file")
    func tokenExpiryDuringDownload() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let tokens = fake.refresher()
            let provider = fake.provider(tokens: tokens)
            let files = try await yandexListing(provider)
            let file = try #require(files["Music/Мумий Тролль/Владивосток 2000.mp3"])
            let bytes = try await yandexDownload(provider, file, transport: fake.transport, chunk: 16_384) { ranges in
                if ranges == 2 { try await fake.control(["op": "expire_token"]) }
            }
            #expect(yandexHash(bytes, .sha256) == file.hashes.first { $0.kind == .sha256 }?.value)
            let log = try await fake.log()
            #expect(log.filter { $0.path == "/token" }.count == 1)
            #expect(log.filter { $0.path == "/v1/disk/resources/download" }.count == 2)
            let refused = log.filter { $0.server == "download" && $0.status == 401 }
            #expect(refused.map(\.range) == ["bytes=32768-49151"])
            let fresh = await tokens.current.accessToken
            #expect(log.last { $0.server == "download" }?.auth_token == fresh)
        }
    }

    @Test("429 with Retry-After is honoured by the pacer; 503 without it backs off; both continue")
    func throttling() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let sleeps = SleepRecorder()
            let provider = fake.provider(pageSize: 2, pacer: sleeps.pacer())
            try await fake.control(["op": "throttle", "count": 2, "status": 429, "retry_after": "1"])
            let files = try await yandexListing(provider)
            #expect(Set(files.keys) == audioUnderDisk)
            // The pause is measured from when the 429 arrived, so the sleep is Retry-After minus a few microseconds.
            #expect(sleeps.recorded.filter { $0 > 0.9 && $0 <= 1 }.count >= 2, "slept \(sleeps.recorded)")
            try await fake.control(["op": "throttle", "count": 1, "status": 503, "retry_after": NSNull()])
            let again = try await yandexListing(provider)
            #expect(again.count == files.count)
            let log = try await fake.log()
            #expect(log.filter { $0.status == 429 }.count == 2)
            #expect(log.filter { $0.status == 503 }.count == 1)
        }
    }

    @Test("rate limiting that outlasts the retries surfaces as .rateLimited with retryAfter")
    func throttlingExhausted() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let sleeps = SleepRecorder()
            let provider = fake.provider(pacer: sleeps.pacer(retries: 1))
            try await fake.control(["op": "throttle", "count": 5, "status": 429, "retry_after": "0"])
            let error = await #expect(throws: ProviderError.self) { _ = try await yandexListing(provider) }
            #expect(error?.code == .rateLimited)
            #expect(error?.retryAfter == 0)
        }
    }

    @Test("a file deleted after the listing resolves to .notFound telling to pull again")
    func downloadOfMissingFile() async throws {
        try await YandexFake.with(["files": yandexLibrary]) { fake in
            let provider = fake.provider()
            let ghost = RemoteFile(path: "Music/gone.mp3", size: 10, modified: Date(), downloadHint: "disk:/Music/gone.mp3")
            let error = await #expect(throws: ProviderError.self) { _ = try await provider.resolveDownload(for: ghost) }
            #expect(error?.code == .notFound)
            #expect(error?.message.contains("cloudsync pull") == true)
        }
    }
}

@Suite("CurlTransport against the Yandex fake")
struct YandexFakeTransportTests {
    /// Headers and JSON bodies arrive intact through the real transport (CRLF handling regression).
    @Test("CurlTransport reads the fake's JSON answers")
    func curlReadsFake() async throws {
        try await YandexFake.with(["files": [["path": "a.mp3", "size": 3]]]) { fake in
            let curl = try CurlTransport()
            let response = try await curl.send(HTTPRequest(url: fake.apiURL.appendingPathComponent("_log")))
            #expect(response.headers["Content-Type"] == "application/json; charset=utf-8")
            #expect((try? JSONSerialization.jsonObject(with: response.body)) is [Any])
        }
    }
}
