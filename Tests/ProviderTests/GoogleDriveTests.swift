import CloudSyncCore
import CloudSyncHTTP
import Foundation
import TestSupport
import Testing
@testable import GoogleDrive

private let rootID = "0AROOTFOLDERID"
private let folderMime = "application/vnd.google-apps.folder"

private func folder(_ id: String, _ name: String, _ parent: String) -> [String: Any] {
    ["id": id, "name": name, "mimeType": folderMime, "parents": [parent]]
}

private func file(_ id: String, _ name: String, _ parent: String, size: Int = 100, mime: String = "audio/mpeg",
                  extra: [String: Any] = [:]) -> [String: Any] {
    var f: [String: Any] = ["id": id, "name": name, "mimeType": mime, "parents": [parent], "size": size]
    for (k, v) in extra { f[k] = v }
    return f
}

/// A nested library under /Music with duplicate names, a trashed file, native docs, a shortcut, non-audio,
/// a look-alike "music" folder and files outside the root.
private func librarySpec(quirks: [String: Any] = [:]) -> [String: Any] {
    [
        "rootId": rootID,
        "quirks": quirks,
        "items": [
            folder("0music", "music", rootID),
            file("w1", "Wrong.mp3", "0music"),
            folder("fMusic", "Music", rootID),
            folder("fOther", "Other", rootID),
            folder("fA", "Artist", "fMusic"),
            folder("fAlb", "Album", "fA"),
            folder("dupA0000x", "Live", "fMusic"),
            folder("dupB0000x", "Live", "fMusic"),
            folder("fQ", "R'n\\R", rootID),
            file("qq1", "Quoted.mp3", "fQ"),
            file("a1", "01 Intro.mp3", "fAlb"),
            file("b2zzzzzzzz9", "01 Intro.mp3", "fAlb", size: 50),
            file("c3", "Song.flac", "fA", size: 70, mime: "application/octet-stream", extra: ["hashes": "md5"]),
            file("t1", "Trashed.mp3", "fAlb", extra: ["trashed": true]),
            ["id": "doc1", "name": "Notes.mp3", "mimeType": "application/vnd.google-apps.document", "parents": ["fMusic"]],
            ["id": "sc1", "name": "Shortcut.mp3", "mimeType": "application/vnd.google-apps.shortcut", "parents": ["fMusic"]],
            file("img", "cover.jpg", "fAlb", size: 10, mime: "image/jpeg"),
            file("x1", "Outside.mp3", "fOther"),
            file("l1", "Track.ogg", "dupA0000x", size: 40, mime: "audio/ogg"),
            file("l2", "Track.ogg", "dupB0000x", size: 41, mime: "audio/ogg"),
            file("z0", "Empty.mp3", "fMusic", size: 0),
            file("q1", "It's \\ odd.mp3", "fMusic", size: 33),
            file("ma", "Audio no ext", "fMusic", size: 30, mime: "audio/x-wav"),
        ],
    ]
}

private let expectedMusic: [String: String] = [
    "Artist/Album/01 Intro.mp3": "a1",
    "Artist/Album/01 Intro (b2zzzzzz).mp3": "b2zzzzzzzz9",
    "Artist/Song.flac": "c3",
    "Live/Track.ogg": "l1",
    "Live (dupB0000)/Track.ogg": "l2",
    "Empty.mp3": "z0",
    "It's \\ odd.mp3": "q1",
    "Audio no ext": "ma",
]

private func byPath(_ pages: [ListingPage]) -> [String: RemoteFile] {
    Dictionary(pages.flatMap(\.upserts).map { ($0.path, $0) }, uniquingKeysWith: { $1 })
}

private func hex(_ kind: HashKind, _ bytes: [UInt8]) -> String { contentHash(of: Data(bytes), kind: kind) }

@Suite("Google Drive against gdrive_fake.py", .serialized)
struct GoogleDriveFakeTests {
    @Test("full listing of a nested library is exact, with a tiny page size, short and empty pages",
          arguments: [GoogleDriveOptions.ListingStrategy.flat, .walk])
    func fullListing(strategy: GoogleDriveOptions.ListingStrategy) async throws {
        try await withDriveFake(librarySpec(quirks: ["emptyPageAfterFirst": true, "shortPages": true])) { fake in
            let h = try DriveHarness(fake, root: "/Music", pageSize: 2, strategy: strategy)
            let pages = try await h.list()
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(pages.last?.cursor != nil)
            #expect(pages.dropLast().allSatisfy { $0.cursor == nil })
            let files = byPath(pages)
            #expect(Set(files.keys) == Set(expectedMusic.keys))
            for (path, id) in expectedMusic { #expect(files[path]?.providerID == id, "\(path)") }
            let a1 = try #require(files["Artist/Album/01 Intro.mp3"])
            let content = driveFakeContent(id: "a1", size: 100)
            #expect(a1.size == 100)
            #expect(a1.hashes.contains(ContentHash(kind: .sha256, value: hex(.sha256, content))))
            #expect(a1.hashes.contains(ContentHash(kind: .md5, value: hex(.md5, content))))
            #expect(a1.revision.hasPrefix("rev"))
            #expect(a1.modified == Date(timeIntervalSince1970: 1714979289.123))
            #expect(files["Artist/Song.flac"]?.preferredHash?.kind == .md5)

            let log = try await fake.log()
            let lists = log.filter { $0.path == "/drive/v3/files" }
            #expect(!lists.isEmpty)
            for entry in lists {
                #expect(entry.query["fields"] == "nextPageToken,files(id,name,parents,mimeType,size,md5Checksum,sha256Checksum,modifiedTime,headRevisionId,trashed)")
                #expect(entry.query["pageSize"] == "2")
                #expect(entry.query["supportsAllDrives"] == "true")
                #expect(entry.query["includeItemsFromAllDrives"] == "true")
                #expect(entry.status == 200)
            }
            let first = try #require(log.firstIndex { $0.path == "/drive/v3/files" })
            let start = try #require(log.firstIndex { $0.path == "/drive/v3/changes/startPageToken" })
            #expect(start < first, "the change token must be taken before the listing starts")
            #expect(lists.contains { $0.query["q"] == "name = 'Music' and 'root' in parents and mimeType = 'application/vnd.google-apps.folder' and trashed=false" })
        }
    }

    @Test("a root path with quotes and backslashes is escaped in q and resolved")
    func quotedRoot() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let pages = try await DriveHarness(fake, root: "/R'n\\R/").list()
            #expect(Set(byPath(pages).keys) == ["Quoted.mp3"])
            let log = try await fake.log()
            #expect(log.contains { $0.query["q"]?.hasPrefix("name = 'R\\'n\\\\R' and") == true })
        }
    }

    @Test("whole drive: 'root' resolves to the real id, files outside every folder included")
    func wholeDrive() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let files = byPath(try await DriveHarness(fake, root: "").list())
            #expect(files["Other/Outside.mp3"]?.providerID == "x1")
            #expect(files["music/Wrong.mp3"]?.providerID == "w1")
            #expect(files["Music/Artist/Album/01 Intro.mp3"]?.providerID == "a1")
            #expect(files.count == expectedMusic.count + 3)
        }
    }

    @Test("a missing root is .notFound naming the folder")
    func missingRoot() async throws {
        try await withDriveFake(librarySpec()) { fake in
            await #expect { try await DriveHarness(fake, root: "/Music/Nope").list() } throws: { error in
                guard let e = error as? ProviderError else { return false }
                return e.code == .notFound && e.message.contains("/Music/Nope")
            }
        }
    }

    @Test("second pull reads the change feed: add, modify, trash, move, folder rename, folder moved in, delete",
          arguments: [GoogleDriveOptions.ListingStrategy.flat, .walk])
    func changeFeed(strategy: GoogleDriveOptions.ListingStrategy) async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music", pageSize: 2, strategy: strategy)
            let cursor = try #require(try await h.list().last?.cursor)
            try await fake.control([
                ["op": "add", "item": file("n1", "New.mp3", "fAlb", size: 10)],
                ["op": "update", "id": "a1", "size": 120],
                ["op": "update", "id": "c3", "trashed": true],
                ["op": "update", "id": "l1", "parents": ["fAlb"]],
                ["op": "update", "id": "fA", "name": "Artist Renamed"],
                ["op": "update", "id": "fOther", "parents": ["fMusic"]],
                ["op": "delete", "id": "z0"],
                ["op": "add", "item": file("n2", "Elsewhere.mp3", "0music")],
                ["op": "update", "id": "img", "name": "cover2.jpg"],
            ])
            let pages = try await h.list(cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .changes })
            let upserts = byPath(pages)
            #expect(Set(upserts.keys) == [
                "Artist Renamed/Album/01 Intro.mp3", "Artist Renamed/Album/01 Intro (b2zzzzzz).mp3",
                "Artist Renamed/Album/New.mp3", "Artist Renamed/Album/Track.ogg", "Other/Outside.mp3",
            ])
            #expect(upserts["Artist Renamed/Album/01 Intro.mp3"]?.size == 120)
            #expect(upserts["Artist Renamed/Album/Track.ogg"]?.providerID == "l1")
            #expect(upserts["Other/Outside.mp3"]?.providerID == "x1")
            #expect(Set(pages.flatMap(\.deletions)) == [.providerID("c3"), .providerID("z0")])
            let log = try await fake.log()
            let changes = log.filter { $0.path == "/drive/v3/changes" }
            #expect(changes.count > 1, "page size 2 must page the change feed")
            for entry in changes {
                #expect(entry.query["includeRemoved"] == "true")
                #expect(entry.query["fields"] == "nextPageToken,newStartPageToken,changes(fileId,removed,file(id,name,parents,mimeType,size,md5Checksum,sha256Checksum,modifiedTime,headRevisionId,trashed))")
                #expect(entry.query["supportsAllDrives"] == "true" && entry.query["includeItemsFromAllDrives"] == "true")
            }

            // Nothing new: one empty `.changes` page with a cursor.
            let next = try #require(pages.last?.cursor)
            let quiet = try await h.list(cursor: next)
            #expect(quiet.count == 1 && quiet[0].kind == .changes && quiet[0].upserts.isEmpty && quiet[0].deletions.isEmpty)
            #expect(quiet[0].cursor != nil)
        }
    }

    @Test("a rejected change token falls back to a full listing")
    func rejectedCursor() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let cursor = try #require(try await h.list().last?.cursor)
            try await fake.control([["op": "add", "item": file("n1", "New.mp3", "fMusic")], ["op": "invalidateChangeTokens"]])
            let pages = try await h.list(cursor: cursor)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(byPath(pages).count == expectedMusic.count + 1)
            let garbage = try await h.list(cursor: "not json")
            #expect(garbage.allSatisfy { $0.kind == .full })
        }
    }

    @Test("a cursor stored before the kit's envelope (`{\"version\":2,…}`) gives one full listing, then changes again")
    func oldCursorFormat() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let cursor = try #require(try await h.list().last?.cursor)
            // The same facts in the spelling of format 2: the maps beside the token, "version" instead of "v".
            let sealed = try #require(try JSONSerialization.jsonObject(with: Data(cursor.utf8)) as? [String: Any])
            let items = try #require(sealed["items"] as? [String: Any])
            let old: [String: Any] = ["version": 2, "root": sealed["root"] ?? "", "pageToken": sealed["pageToken"] ?? "",
                                      "rootID": items["rootID"] ?? "", "folders": items["folders"] ?? [:], "files": items["files"] ?? [:]]
            let oldText = String(decoding: try JSONSerialization.data(withJSONObject: old), as: UTF8.self)
            #expect(throws: CursorEnvelope.Refusal.unreadable) { try DriveTree.open(oldText).get() }
            try await fake.control([["op": "add", "item": file("n1", "New.mp3", "fMusic")]])
            let pages = try await h.list(cursor: oldText)
            #expect(pages.allSatisfy { $0.kind == .full })
            #expect(byPath(pages).count == expectedMusic.count + 1)
            let next = try #require(pages.last?.cursor)
            #expect(try await h.list(cursor: next).allSatisfy { $0.kind == .changes })
        }
    }

    @Test("403 userRateLimitExceeded and 429 back off through the pacer and the listing completes")
    func rateLimits() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music", pageSize: 3)
            try await fake.control([
                ["op": "fail", "path": "/drive/v3/files", "status": 403, "reason": "userRateLimitExceeded", "count": 2],
                ["op": "fail", "path": "/drive/v3/changes/startPageToken", "status": 429, "reason": "rateLimitExceeded", "count": 1, "retryAfter": 1],
            ])
            let pages = try await h.list()
            #expect(Set(byPath(pages).keys) == Set(expectedMusic.keys))
            let log = try await fake.log()
            #expect(log.filter { $0.status == 403 }.count == 2)
            #expect(h.sleeps.recorded.count >= 3)
            // The pause of a 429 is waited out in slices; its first slice is the whole Retry-After.
            #expect(h.sleeps.recorded.contains { $0 > 0.9 && $0 <= 1.0 }, "Retry-After: 1 must be honoured")
        }
    }

    @Test("the token expires mid-listing: refreshed once through the token endpoint, listing completes")
    func tokenRefreshMidRun() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music", pageSize: 2)
            try await fake.control([["op": "expireTokenAfter", "requests": 3]])
            let pages = try await h.list()
            #expect(Set(byPath(pages).keys) == Set(expectedMusic.keys))
            let log = try await fake.log()
            #expect(log.filter { $0.path == "/token" && $0.status == 200 }.count == 1)
            #expect(log.filter { $0.status == 401 }.count == 1)
            #expect(await h.refresher.current.accessToken == "tok-1")
        }
    }

    @Test("a refused refresh is .unauthorized telling the user to log in")
    func refreshRefused() async throws {
        var spec = librarySpec()
        spec["refreshToken"] = "another"
        try await withDriveFake(spec) { fake in
            try await fake.control([["op": "expireToken"]])
            await #expect { try await DriveHarness(fake, root: "/Music").list() } throws: { error in
                guard let e = error as? ProviderError else { return false }
                return e.code == .unauthorized && e.message.contains("cloudsync login")
            }
        }
    }

    @Test("ranged download through CurlTransport, bytes and sha256/md5 verified")
    func download() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let files = byPath(try await h.list())
            for (path, id, size) in [("Artist/Album/01 Intro.mp3", "a1", 100), ("Artist/Song.flac", "c3", 70)] {
                let f = try #require(files[path])
                let request = try await h.provider.resolveDownload(for: f)
                #expect(request.url.path == "/drive/v3/files/\(id)")
                #expect(request.url.query?.contains("alt=media") == true)
                #expect(!request.sendsAuthOnRedirect)
                var http = HTTPRequest(method: request.method, url: request.url)
                for header in request.headers { http.headers.add(header.name, header.value) }
                let sink = MemoryByteSink()
                let first = try await fake.transport.download(http, range: 0...39, ifRange: nil, into: sink)
                let second = try await fake.transport.download(http, range: 40...Int64(size - 1), ifRange: nil, into: sink)
                #expect(first.head.status == 206 && second.head.status == 206)
                #expect(sink.bytes == driveFakeContent(id: id, size: size))
                let expected = try #require(f.preferredHash)
                var hasher = makeHasher(for: expected.kind)
                hasher.update(Data(sink.bytes))
                #expect(hasher.finalize() == expected.value)
            }
            #expect(files["Artist/Song.flac"]?.preferredHash?.kind == .md5)
            #expect(files["Artist/Album/01 Intro.mp3"]?.preferredHash?.kind == .sha256)
            let ranges = try await fake.log().filter { $0.query["alt"] == "media" }.compactMap(\.range)
            #expect(ranges.contains("bytes=0-39") && ranges.contains("bytes=40-99"))
        }
    }

    private func attempt(_ fake: DriveFake, _ request: DownloadRequest, size: Int64) async throws -> DownloadOutcome {
        var http = HTTPRequest(method: request.method, url: request.url)
        for header in request.headers { http.headers.add(header.name, header.value) }
        return try await fake.transport.download(http, range: 0...(size - 1), ifRange: nil, into: MemoryByteSink())
    }

    @Test("401 on a download: resolveDownload(rejected:) refreshes the token")
    func downloadTokenExpiry() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let f = try #require(byPath(try await h.list())["Artist/Album/01 Intro.mp3"])
            let request = try await h.provider.resolveDownload(for: f)
            try await fake.control([["op": "expireToken"]])
            let refused = try await attempt(fake, request, size: f.size)
            #expect(refused.head.status == 401)
            let fresh = try await h.provider.resolveDownload(for: f, rejected: request, status: 401)
            #expect(fresh.headers.contains { $0.name == "Authorization" && $0.value == "Bearer tok-1" })
            #expect(try await attempt(fake, fresh, size: f.size).head.status == 206)
        }
    }

    @Test("403 cannotDownloadAbusiveFile: .forbidden naming the option, or acknowledgeAbuse=true when enabled",
          arguments: [false, true])
    func abusiveFile(acknowledge: Bool) async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music", acknowledgeAbuse: acknowledge)
            let f = try #require(byPath(try await h.list())["Artist/Album/01 Intro.mp3"])
            try await fake.control([["op": "update", "id": "a1", "abusive": true]])
            let request = try await h.provider.resolveDownload(for: f)
            #expect(try await attempt(fake, request, size: f.size).head.status == 403)
            if acknowledge {
                let fresh = try await h.provider.resolveDownload(for: f, rejected: request, status: 403)
                #expect(fresh.url.query?.contains("acknowledgeAbuse=true") == true)
                #expect(try await attempt(fake, fresh, size: f.size).head.status == 206)
            } else {
                await #expect { try await h.provider.resolveDownload(for: f, rejected: request, status: 403) } throws: { error in
                    guard let e = error as? ProviderError else { return false }
                    return e.code == .forbidden && e.message.contains("acknowledge_abuse")
                }
            }
        }
    }

    @Test("403 downloadQuotaExceeded is .quotaExceeded without retries")
    func downloadQuota() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let f = try #require(byPath(try await h.list())["Artist/Album/01 Intro.mp3"])
            try await fake.control([["op": "update", "id": "a1", "quotaExceeded": true], ["op": "clearLog"]])
            let request = try await h.provider.resolveDownload(for: f)
            await #expect { try await h.provider.resolveDownload(for: f, rejected: request, status: 403) } throws: { error in
                (error as? ProviderError)?.code == .quotaExceeded
            }
            #expect(try await fake.log().filter { $0.query["alt"] == "media" }.count == 1, "no hammering")
        }
    }

    @Test("403 rate limit on the content host: the probe backs off, then the same download works")
    func downloadRateLimit() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let f = try #require(byPath(try await h.list())["Artist/Album/01 Intro.mp3"])
            try await fake.control([["op": "fail", "path": "/drive/v3/files/a1", "media": true, "status": 403,
                                     "reason": "userRateLimitExceeded", "count": 2]])
            let request = try await h.provider.resolveDownload(for: f)
            #expect(try await attempt(fake, request, size: f.size).head.status == 403)
            let fresh = try await h.provider.resolveDownload(for: f, rejected: request, status: 403)
            #expect(try await attempt(fake, fresh, size: f.size).head.status == 206)
            #expect(!h.sleeps.recorded.isEmpty)
        }
    }

    @Test("404 on a download of a trashed file is .notFound")
    func downloadTrashed() async throws {
        try await withDriveFake(librarySpec()) { fake in
            let h = try DriveHarness(fake, root: "/Music")
            let f = try #require(byPath(try await h.list())["Artist/Album/01 Intro.mp3"])
            try await fake.control([["op": "update", "id": "a1", "trashed": true]])
            let request = try await h.provider.resolveDownload(for: f)
            await #expect { try await h.provider.resolveDownload(for: f, rejected: request, status: 404) } throws: { error in
                (error as? ProviderError)?.code == .notFound
            }
        }
    }

    @Test("the fake rejects q syntax outside the subset with Drive's 400 invalid body, mapped to .invalidResponse")
    func fakeRejectsUnknownSyntax() async throws {
        try await withDriveFake(librarySpec()) { fake in
            for q in ["modifiedTime > '2020-01-01'", "name = 'a' and", "starred = true", "'x' in owners", "(trashed=false"] {
                let url = try #require(APIURL.make(fake.base, path: "/drive/v3/files", query: [("q", q), ("fields", DriveAPI.listFields)]))
                let response = try await fake.transport.send(HTTPRequest(url: url, headers: ["Authorization": "Bearer tok-0"]))
                #expect(response.status == 400, "\(q)")
                #expect(DriveAPI.reason(of: response) == "invalid")
                #expect(DriveAPI.classify(response, remoteName: "gd")?.code == .invalidResponse)
            }
        }
    }

    /// A walk that keeps finding folders stops at walkLimits.maxFolders with a clear error (#19.12).
    @Test("the folder walk stops at walkLimits.maxFolders")
    func walkFolderCap() async throws {
        try await withDriveFake(["rootId": rootID, "generate": ["files": 1000, "perFolder": 10]]) { fake in
            let harness = try DriveHarness(fake, strategy: .walk, walkLimits: WalkLimits(maxFolders: 50))
            let error = await #expect(throws: ProviderError.self) { try await harness.list() }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("more than 50 folders under the root") == true, "\(error?.message ?? "")")
            // 120 folders in the drive: the flat listing does not walk, so the cap does not apply to it.
            let flat = try DriveHarness(fake, strategy: .flat, walkLimits: WalkLimits(maxFolders: 50))
            #expect(try await flat.list().flatMap(\.upserts).count == 1000)
        }
    }

    /// Request counts of the two strategies on a drive that holds only the music; the numbers are in
    /// docs/gdrive.md.
    @Test("request counts: flat enumeration vs grouped folder walk (1k and 10k files)", arguments: [1000, 10000])
    func requestCounts(files: Int) async throws {
        var counts: [GoogleDriveOptions.ListingStrategy: Int] = [:]
        try await withDriveFake(["rootId": rootID, "generate": ["files": files, "perFolder": 10]]) { fake in
            for strategy in [GoogleDriveOptions.ListingStrategy.flat, .walk] {
                try await fake.control([["op": "clearLog"]])
                let pages = try await DriveHarness(fake, strategy: strategy).list()
                #expect(pages.flatMap(\.upserts).count == files)
                counts[strategy] = try await fake.log().count
            }
        }
        print("gdrive listing of \(files) files in \(files / 10) albums: flat \(counts[.flat] ?? -1) requests, walk \(counts[.walk] ?? -1) requests")
        let albums = files / 10, artists = files / 50, covers = files / 100
        // Flat: startPageToken + files/root + ⌈every item / 1000⌉ pages.
        #expect(counts[.flat] == 2 + (files + albums + artists + covers + 999) / 1000)
        // Walk: startPageToken + files/root + the root + artists and albums 50 folders per query (one page each here).
        #expect(counts[.walk] == 2 + 1 + (artists + 49) / 50 + (albums + 49) / 50)
    }
}

@Suite("Google Drive wire rules")
struct GoogleDriveUnitTests {
    @Test("query literals escape backslash and quote")
    func literal() {
        #expect(DriveAPI.literal("plain") == "'plain'")
        #expect(DriveAPI.literal("Rock 'n' Roll") == "'Rock \\'n\\' Roll'")
        #expect(DriveAPI.literal("a\\b'") == "'a\\\\b\\''")
    }

    @Test("tree diff: a folder rename moves every file below it; a removed duplicate frees its plain name")
    func treeDiff() {
        func f(_ name: String, _ parent: String) -> DriveTree.File {
            DriveTree.File(name: name, parent: parent, size: 1, mimeType: "audio/mpeg", md5: "00", sha256: nil,
                           modified: "2024-01-01T00:00:00Z", revision: "r1")
        }
        var old = DriveTree(root: "Music", rootID: "R", pageToken: "1")
        old.folders = ["F": .init(name: "A", parent: "R"), "G": .init(name: "Sub", parent: "F"), "O": .init(name: "Out", parent: "X")]
        old.files = ["x": f("s.mp3", "F"), "y": f("s.mp3", "F"), "z": f("t.mp3", "G"), "u": f("u.mp3", "R"), "o": f("o.mp3", "O")]
        #expect(old.paths().files == ["x": "A/s.mp3", "y": "A/s (y).mp3", "z": "A/Sub/t.mp3", "u": "u.mp3"])
        var new = old
        new.folders["F"]?.name = "B"
        new.files["x"] = nil
        new.prune()
        #expect(new.folders["O"] == nil && new.files["o"] == nil, "outside the root")
        let diff = new.changes(since: old)
        #expect(diff.upserts.map(\.path) == ["B/Sub/t.mp3", "B/s.mp3"])
        #expect(diff.upserts.map(\.providerID) == ["z", "y"])
        #expect(diff.deletions == [.providerID("x")])
        #expect(new.changes(since: new).upserts.isEmpty)
    }

    @Test("walk queries group folders with or")
    func childrenQuery() {
        #expect(GoogleDriveProvider.childrenQuery(of: ["a"]) == "'a' in parents and trashed=false")
        #expect(GoogleDriveProvider.childrenQuery(of: ["a", "b'c"]) == "('a' in parents or 'b\\'c' in parents) and trashed=false")
    }

    @Test("duplicate names get stable suffixes; the smallest id keeps the name")
    func duplicateNames() {
        let names = DriveTree.Items.distinctNames([
            (id: "zz9", name: "a.mp3", isFolder: false), (id: "aa1", name: "a.mp3", isFolder: false),
            (id: "mm5", name: "a.mp3", isFolder: true), (id: "x", name: "b/c", isFolder: false),
            (id: "y", name: "..", isFolder: true), (id: "q", name: ".hidden", isFolder: false),
            (id: "r", name: ".hidden", isFolder: false),
        ])
        let map = Dictionary(uniqueKeysWithValues: names.map { ($0.0, $0.1) })
        #expect(map == ["aa1": "a.mp3", "mm5": "a.mp3 (mm5)", "zz9": "a (zz9).mp3", "x": "b／c", "y": "．．",
                        "q": ".hidden", "r": ".hidden (r)"])
        // The same siblings in another order get the same names.
        let again = DriveTree.Items.distinctNames([
            (id: "mm5", name: "a.mp3", isFolder: true), (id: "zz9", name: "a.mp3", isFolder: false),
            (id: "aa1", name: "a.mp3", isFolder: false),
        ])
        #expect(Dictionary(uniqueKeysWithValues: again.map { ($0.0, $0.1) }) == ["aa1": "a.mp3", "mm5": "a.mp3 (mm5)", "zz9": "a (zz9).mp3"])
    }

    private static func response(_ status: Int, reason: String?, location: String? = nil, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var body = Data()
        if let reason {
            let loc = location.map { ", \"location\": \"\($0)\", \"locationType\": \"parameter\"" } ?? ""
            body = Data("{\"error\": {\"code\": \(status), \"message\": \"m\", \"errors\": [{\"domain\": \"global\", \"reason\": \"\(reason)\", \"message\": \"m\"\(loc)}]}}".utf8)
        }
        let url = URL(string: "https://www.googleapis.com/drive/v3/files?access_token=secret") ?? URL(fileURLWithPath: "/")
        return HTTPResponse(head: HTTPResponseHead(status: status, headers: headers, url: url), body: body)
    }

    @Test("statuses and reasons map to ProviderError codes", arguments: [
        (401, "authError", nil, ProviderError.Code.tokenExpired),
        (403, "userRateLimitExceeded", nil, .rateLimited),
        (403, "rateLimitExceeded", nil, .rateLimited),
        (429, "rateLimitExceeded", nil, .rateLimited),
        (429, nil, nil, .rateLimited),
        (403, "downloadQuotaExceeded", nil, .quotaExceeded),
        (403, "dailyLimitExceeded", nil, .quotaExceeded),
        (403, "cannotDownloadAbusiveFile", nil, .forbidden),
        (403, "insufficientFilePermissions", nil, .forbidden),
        (404, "notFound", nil, .notFound),
        (400, "invalid", "pageToken", .cursorReset),
        (400, "invalid", "q", .invalidResponse),
        (500, "backendError", nil, .transient),
        (503, nil, nil, .transient),
    ] as [(Int, String?, String?, ProviderError.Code)])
    func classify(status: Int, reason: String?, location: String?, code: ProviderError.Code) throws {
        let error = try #require(DriveAPI.classify(Self.response(status, reason: reason, location: location), remoteName: "gd"))
        #expect(error.code == code)
        #expect(error.status == status)
        #expect(!error.message.contains("secret"))
    }

    @Test("Retry-After is carried when Drive sends it")
    func retryAfterHeader() throws {
        let error = try #require(DriveAPI.classify(Self.response(429, reason: nil, headers: ["Retry-After": "7"]), remoteName: "gd"))
        #expect(error.retryAfter == 7)
        #expect(DriveAPI.classify(Self.response(200, reason: nil), remoteName: "gd") == nil)
    }

    @Test("the abusive-file message names acknowledge_abuse")
    func abusiveMessage() throws {
        let error = try #require(DriveAPI.classify(Self.response(403, reason: "cannotDownloadAbusiveFile"), remoteName: "gd"))
        #expect(error.message.contains("acknowledge_abuse"))
    }

    @Test("size arrives as a JSON string (a number is accepted too); a non-number is an error")
    func sizeDecoding() throws {
        let list = try JSONDecoder().decode(DriveAPI.FileList.self, from: Data(#"{"files":[{"id":"a","size":"12345678901"},{"id":"b","size":7},{"id":"c"}]}"#.utf8))
        #expect(list.files?.map(\.size) == [12345678901, 7, nil])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(DriveAPI.File.self, from: Data(#"{"id":"a","size":"x"}"#.utf8)) }
    }
}
