import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import OneDrive

/// The library the fake serves: audio by extension, by MIME type and by the `audio` facet; things to skip.
private func library(style: String = "personal", extra: [String: Any] = [:]) -> [String: Any] {
    var spec: [String: Any] = [
        "style": style,
        "page_size": 3,
        "items": [
            ["path": "Music/Artist A/01 Song.mp3", "size": 70_000, "mime": "audio/mpeg"],
            ["path": "Music/Artist A/02 Song.flac", "size": 3000, "mime": "audio/flac"],
            ["path": "Music/Artist A/cover.jpg", "size": 500, "mime": "image/jpeg"],
            ["path": "Music/Artist B/Album/track.m4a", "size": 2500, "mime": "audio/mp4"],
            ["path": "Music/Voice/memo.bin", "size": 800, "audio": true],
            ["path": "Music/Mime/noext", "size": 900, "mime": "audio/ogg"],
            ["path": "Music/Notebook.mp3", "size": 100, "package": true],
            ["path": "Music/evil.mp3", "size": 100, "mime": "audio/mpeg", "malware": true],
            ["path": "Music/Empty/"],
            ["path": "Podcasts/ep1.mp3", "size": 1200, "mime": "audio/mpeg"],
        ] as [[String: Any]],
    ]
    spec.merge(extra) { $1 }
    return spec
}

private let libraryAudio: Set<String> = [
    "Artist A/01 Song.mp3", "Artist A/02 Song.flac", "Artist B/Album/track.m4a", "Voice/memo.bin", "Mime/noext",
]

private func paths(_ pages: [ListingPage]) -> Set<String> { Set(pages.flatMap(\.upserts).map(\.path)) }
private func deleted(_ pages: [ListingPage]) -> Set<String> {
    Set(pages.flatMap(\.deletions).compactMap { if case .path(let p) = $0 { p } else { nil } })
}

@Suite("OneDrive provider against the fake Graph server", .serialized, .timeLimit(.minutes(2)))
struct OneDriveFakeServerTests {
    @Test("full listing: several delta pages, items under the root only, packages/malware/non-audio skipped")
    func fullListing() async throws {
        try await withOneDriveFake(library()) { fake in
            let provider = fake.provider(root: "/music")
            let pages = try await listingPages(provider, cursor: nil)
            #expect(paths(pages) == libraryAudio)
            #expect(pages.allSatisfy { $0.kind == .full && $0.deletions.isEmpty })
            #expect(pages.last?.cursor != nil)
            #expect(pages.dropLast().allSatisfy { $0.cursor == nil })
            let song = try #require(pages.flatMap(\.upserts).first { $0.path == "Artist A/01 Song.mp3" })
            #expect(song.size == 70_000)
            #expect(song.providerID?.isEmpty == false)
            #expect(song.hashes.map(\.kind) == [.quickXor, .sha1])
            #expect(song.hashes.first { $0.kind == .sha1 }.map { $0.value == $0.value.lowercased() } == true)
            #expect(song.revision == song.hashes.first?.value)
            #expect(song.mimeType == "audio/mpeg")
            let log = try await fake.log().filter { $0.path.contains("/delta") }
            // root + 8 folders + 9 files = 18 items in pages of 3 → 6 delta calls, each authenticated.
            #expect(log.count == 6)
            #expect(log.allSatisfy { $0.auth })
            #expect(log.first?.query.contains("$select=") == true)
        }
    }

    @Test("changes from the deltaLink: add, modify, delete, move, folder rename, folder delete, nothing", arguments: ["personal", "business"])
    func changeFeed(style: String) async throws {
        try await withOneDriveFake(library(style: style, extra: ["duplicate": true])) { fake in
            let provider = fake.provider()
            let first = try await listingPages(provider, cursor: nil)
            var cursor = try #require(first.last?.cursor)

            try await fake.control(["op": "add", "path": "Music/Artist A/03 New.mp3", "size": 4000, "mime": "audio/mpeg"])
            try await fake.control(["op": "modify", "path": "Music/Artist A/01 Song.mp3", "size": 6000])
            try await fake.control(["op": "delete", "path": "Music/Artist A/02 Song.flac"])
            try await fake.control(["op": "move", "path": "Music/Artist B/Album/track.m4a", "to": "Music/Moved/track.m4a"])
            var pages = try await listingPages(provider, cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .changes })
            #expect(paths(pages) == ["Artist A/03 New.mp3", "Artist A/01 Song.mp3", "Moved/track.m4a"])
            #expect(pages.flatMap(\.upserts).first { $0.path == "Artist A/01 Song.mp3" }?.size == 6000)
            #expect(deleted(pages) == ["Artist A/02 Song.flac", "Artist B/Album/track.m4a"])
            cursor = try #require(pages.last?.cursor)

            // The feed names only the renamed folder; its files move with it. ep1 moves in, noext moves out.
            try await fake.control(["op": "move", "path": "Music/Artist A", "to": "Music/Artist Z"])
            try await fake.control(["op": "move", "path": "Podcasts/ep1.mp3", "to": "Music/ep1.mp3"])
            try await fake.control(["op": "move", "path": "Music/Mime/noext", "to": "Podcasts/noext"])
            pages = try await listingPages(provider, cursor: cursor)
            #expect(paths(pages) == ["Artist Z/01 Song.mp3", "Artist Z/03 New.mp3", "ep1.mp3"])
            #expect(deleted(pages) == ["Artist A/01 Song.mp3", "Artist A/03 New.mp3", "Mime/noext"])
            let renamedLog = try await fake.log().filter { $0.path.contains("/delta") }
            #expect(renamedLog.contains { $0.path.contains("delta(token=") && $0.query.contains("$select=") }, "the deltaLink is followed verbatim")
            cursor = try #require(pages.last?.cursor)

            // Only the folder is reported deleted; its files go with it.
            try await fake.control(["op": "delete", "path": "Music/Artist Z"])
            pages = try await listingPages(provider, cursor: cursor)
            #expect(paths(pages).isEmpty)
            #expect(deleted(pages) == ["Artist Z/01 Song.mp3", "Artist Z/03 New.mp3"])
            cursor = try #require(pages.last?.cursor)

            pages = try await listingPages(provider, cursor: cursor)
            #expect(pages.count == 1)
            #expect(pages[0].kind == .changes && pages[0].upserts.isEmpty && pages[0].deletions.isEmpty && pages[0].cursor != nil)
        }
    }

    @Test("410 resyncRequired on the deltaLink gives a full listing")
    func resync() async throws {
        try await withOneDriveFake(library()) { fake in
            let provider = fake.provider()
            let cursor = try #require(try await listingPages(provider, cursor: nil).last?.cursor)
            try await fake.control(["op": "expire_tokens"])
            try await fake.control(["op": "delete", "path": "Music/Voice/memo.bin"])
            let pages = try await listingPages(provider, cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(paths(pages) == libraryAudio.subtracting(["Voice/memo.bin"]))
            #expect(pages.last?.cursor != nil)
        }
    }

    @Test("a cursor made for another root or an unreadable one gives a full listing")
    func foreignCursor() async throws {
        try await withOneDriveFake(library()) { fake in
            let whole = fake.provider(root: "")
            let cursor = try #require(try await listingPages(whole, cursor: nil).last?.cursor)
            let music = fake.provider(root: "Music")
            let pages = try await listingPages(music, cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(paths(pages) == libraryAudio)
            let garbage = try await listingPages(music, cursor: "not json")
            #expect(paths(garbage) == libraryAudio && garbage.allSatisfy { $0.kind == .full })
            let all = try await listingPages(whole, cursor: nil)
            #expect(paths(all) == Set(libraryAudio.map { "Music/" + $0 }).union(["Podcasts/ep1.mp3"]))
        }
    }

    @Test("a root that does not exist is .notFound, not an empty listing")
    func missingRoot() async throws {
        try await withOneDriveFake(library()) { fake in
            do {
                _ = try await listingPages(fake.provider(root: "/Nope"), cursor: nil)
                Issue.record("listing a missing root succeeded")
            } catch let error as ProviderError {
                #expect(error.code == .notFound)
                #expect(error.message.contains("set root"))
            }
        }
    }

    @Test("download through the pre-authenticated URL: no Authorization sent, ranges, quickXorHash verified")
    func preauthenticatedDownload() async throws {
        try await withOneDriveFake(library()) { fake in
            let provider = fake.provider()
            let files = try await listingPages(provider, cursor: nil).flatMap(\.upserts)
            let song = try #require(files.first { $0.path == "Artist A/01 Song.mp3" })
            let request = try await provider.resolveDownload(for: song)
            #expect(request.headers.isEmpty)
            #expect(request.sendsAuthOnRedirect == false)
            #expect(request.url.port == fake.contentPort)
            #expect(request.expiresAt != nil)
            let (bytes, resolves) = try await oneDriveDownload(song, provider: provider, transport: fake.transport, chunk: 16_384)
            #expect(resolves == 1)
            #expect(bytes == (try await fake.bytes(of: try #require(song.providerID))))
            var hasher = makeHasher(for: .quickXor)
            bytes.withUnsafeBytes { hasher.update($0) }
            #expect(hasher.finalize() == song.hashes.first { $0.kind == .quickXor }?.value)
            let sha1 = contentHash(of: Data(bytes), kind: .sha1)
            #expect(sha1 == song.hashes.first { $0.kind == .sha1 }?.value)
            let log = try await fake.log()
            let content = log.filter { $0.srv == "content" }
            #expect(content.count == 5)
            #expect(content.allSatisfy { !$0.auth && $0.range?.hasPrefix("bytes=") == true && $0.range?.hasPrefix("bytes=-") == false })
            #expect(log.filter { $0.srv == "api" && $0.path.contains("/items/") }.count == 2, "one Graph call per resolve")
        }
    }

    @Test("without the downloadUrl annotation: /content with the token, its 302 followed without it")
    func contentFallback() async throws {
        try await withOneDriveFake(library(extra: ["download_url": false])) { fake in
            let provider = fake.provider()
            let song = try #require(try await listingPages(provider, cursor: nil).flatMap(\.upserts).first { $0.path == "Artist A/01 Song.mp3" })
            let request = try await provider.resolveDownload(for: song)
            #expect(request.url.path.hasSuffix("/content"))
            #expect(request.headers.contains { $0.name == "Authorization" && $0.value == "Bearer at-0" })
            #expect(request.sendsAuthOnRedirect == false)
            let (bytes, _) = try await oneDriveDownload(song, provider: provider, transport: fake.transport, chunk: 32_768)
            #expect(contentHash(of: Data(bytes), kind: .quickXor) == song.hashes.first?.value)
            let log = try await fake.log()
            #expect(log.filter { $0.path.hasSuffix("/content") }.allSatisfy { $0.auth })
            let content = log.filter { $0.srv == "content" }
            #expect(content.count == 3)
            #expect(content.allSatisfy { !$0.auth }, "the content host rejects Authorization with 401, and never saw it")
        }
    }

    @Test("a pre-authenticated URL that stops working mid-file is resolved again and the file completes", arguments: [410, 403, 401])
    func linkExpiry(status: Int) async throws {
        try await withOneDriveFake(library(extra: ["link_uses": 2, "link_status": status])) { fake in
            let provider = fake.provider()
            let song = try #require(try await listingPages(provider, cursor: nil).flatMap(\.upserts).first { $0.path == "Artist A/01 Song.mp3" })
            let (bytes, resolves) = try await oneDriveDownload(song, provider: provider, transport: fake.transport, chunk: 10_000)
            #expect(resolves == 4, "7 ranges with 2 uses per URL")
            #expect(bytes.count == 70_000)
            #expect(contentHash(of: Data(bytes), kind: .quickXor) == song.hashes.first?.value)
        }
    }

    @Test("an expired access token is refreshed through the token endpoint; the rotated refresh token is persisted and used")
    func tokenRotation() async throws {
        try await withOneDriveFake(library(extra: ["token_uses": 2])) { fake in
            let persisted = Mutex<[TokenSet]>([])
            let options = OneDriveOptions(remoteName: "od", root: "/Music", apiURL: fake.apiURL, tokenURL: fake.tokenURL)
            let refresher = OAuthRefresher(remoteName: "od", tokens: TokenSet(accessToken: "at-0", refreshToken: "rt-0"),
                                           client: options.oauthClient(clientID: "cid"), transport: fake.transport) { set in
                persisted.withLock { $0.append(set) }
            }
            let provider = fake.provider(tokens: refresher)
            let pages = try await listingPages(provider, cursor: nil)
            #expect(paths(pages) == libraryAudio)
            let sets = persisted.withLock { $0 }
            // 6 delta calls, 2 per token: two refreshes, each with the refresh token the previous one handed out.
            #expect(sets.map(\.refreshToken) == ["rt-1", "rt-2"])
            #expect(sets.map(\.accessToken) == ["at-1", "at-2"])
            #expect(await refresher.current.refreshToken == "rt-2")
            let log = try await fake.log()
            #expect(log.filter { $0.path.hasSuffix("/token") }.count == 2)
        }
    }

    @Test("a 401 on the /content fallback refreshes the token that was refused, then resolves again")
    func contentTokenExpiry() async throws {
        try await withOneDriveFake(library(extra: ["download_url": false, "token_uses": 2])) { fake in
            let persisted = Mutex<[TokenSet]>([])
            let options = OneDriveOptions(remoteName: "od", root: "/Music", apiURL: fake.apiURL, tokenURL: fake.tokenURL)
            let refresher = OAuthRefresher(remoteName: "od", tokens: TokenSet(accessToken: "at-0", refreshToken: "rt-0"),
                                           client: options.oauthClient(clientID: "cid"), transport: fake.transport) { set in
                persisted.withLock { $0.append(set) }
            }
            let provider = fake.provider(tokens: refresher)
            let song = RemoteFile(path: "x.mp3", providerID: try await fake.control(["op": "add", "path": "Music/x.mp3", "size": 50_000]),
                                  size: 50_000, modified: Date())
            let (bytes, resolves) = try await oneDriveDownload(song, provider: provider, transport: fake.transport, chunk: 20_000)
            #expect(bytes.count == 50_000)
            #expect(resolves >= 2)
            #expect(persisted.withLock { $0 }.isEmpty == false)
        }
    }

    @Test("429 with Retry-After is waited out through the pacer")
    func rateLimited() async throws {
        try await withOneDriveFake(library(extra: ["ratelimit": 1])) { fake in
            let sleeps = SleepRecorder()
            let pages = try await listingPages(fake.provider(pacer: sleeps.pacer()), cursor: nil)
            #expect(paths(pages) == libraryAudio)
            #expect(sleeps.recorded.contains { $0 > 0.5 && $0 <= 1.0 }, "waited for Retry-After: 1 (\(sleeps.recorded))")
        }
    }

    @Test("a deleted item's download is .notFound with advice to list again")
    func deletedItem() async throws {
        try await withOneDriveFake(library()) { fake in
            let provider = fake.provider()
            let song = try #require(try await listingPages(provider, cursor: nil).flatMap(\.upserts).first { $0.path == "Mime/noext" })
            try await fake.control(["op": "delete", "path": "Music/Mime/noext"])
            do {
                _ = try await provider.resolveDownload(for: song)
                Issue.record("resolving a deleted item succeeded")
            } catch let error as ProviderError {
                #expect(error.code == .notFound)
                #expect(error.message.contains("cloudsync pull"))
            }
        }
    }
}
