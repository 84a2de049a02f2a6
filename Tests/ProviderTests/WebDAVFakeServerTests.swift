import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Testing
@testable import WebDAV

/// Paths and sizes of the fake's small tree (Tests/Fakes/webdav_fake.py `small_tree`): notes.txt is not audio.
private let smallTreeAudio: Set<String> = [
    "a b.mp3", "Sub/c+d&e [1].flac", "Sub/it's.ogg", "Sub/Кино.mp3", "Sub/Deeper/東京 🎵.opus", "Locked/secret.mp3", "Broken/lost.mp3",
]
/// "", Sub, Sub/Deeper, Locked, Broken.
private let smallTreeFolders = 5

/// Runs `body` against a fresh fake server started with `options`, stopping it afterwards.
private func withFake<T>(_ options: [String], _ body: (FakeWebDAVServer) async throws -> T) async throws -> T {
    let server = try await FakeWebDAVServer.start(options)
    defer { server.stop() }
    return try await body(server)
}

@Suite("WebDAV provider against the fake server", .serialized, .timeLimit(.minutes(2)))
struct WebDAVFakeServerTests {
    @Test("5,000 files in 50 folders: exactly 51 PROPFINDs, all Depth 1, no per-file requests, at most 4 in flight")
    func requestCount() async throws {
        try await withFake(["--folders", "50", "--files", "100", "--delay", "20"]) { server in
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport())
            let pages = try await collectPages(provider)
            let files = pages.flatMap(\.upserts)
            #expect(files.count == 5000)
            #expect(Set(files.map(\.path)).count == 5000)
            #expect(files.contains { $0.path == "Folder 049/Track 0099.mp3" })
            #expect(pages.allSatisfy { $0.kind == .full && $0.cursor == nil && $0.deletions.isEmpty })
            #expect(pages.count == 51, "one page for the root and one per folder that holds audio")
            let stats = try await server.stats()
            #expect(stats.propfind == 51)
            #expect(stats.get == 0)
            #expect(stats.depths.allSatisfy { $0 == "1" })
            #expect(stats.paths.values.allSatisfy { $0 == 1 }, "no folder is listed twice")
            #expect(stats.max_inflight <= WebDAVProvider.maxConcurrentPropfinds)
            #expect(provider.capabilities.hashKinds.isEmpty)
        }
    }

    @Test("a 429 with Retry-After on the first PROPFIND is waited out through the pacer")
    func rateLimited() async throws {
        try await withFake(["--ratelimit-first"]) { server in
            let sleeps = RecordingSleeps()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), pacer: sleeps.pacer())
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio)
            #expect(sleeps.recorded.contains { $0 > 0.5 && $0 <= 1.0 }, "the pacer waited for Retry-After: 1 (\(sleeps.recorded))")
            #expect(try await server.stats().propfind == smallTreeFolders + 1)
        }
    }

    @Test("connections cut before any answer are retried")
    func cutConnections() async throws {
        try await withFake(["--cut-first"]) { server in
            // URLSession only notices a connection closed without an answer when its timeout runs out.
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport())
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio)
            let stats = try await server.stats()
            #expect(stats.paths.values.allSatisfy { $0 >= 2 }, "every folder was cut once, then asked again: \(stats.paths)")
        }
    }

    @Test("Nextcloud-style prefix, sabre encoding and oc:checksums")
    func nextcloud() async throws {
        try await withFake(["--style", "nextcloud", "--prefix", "/remote.php/dav/files/u/"]) { server in
            let provider = try makeProvider(url: server.url("/remote.php/dav/files/u/"), root: "Sub", transport: try CurlTransport())
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == ["c+d&e [1].flac", "it's.ogg", "Кино.mp3", "Deeper/東京 🎵.opus"])
            for file in files {
                #expect(file.hashes.map(\.kind) == [.sha1, .md5])
                // The fake's ETag is the MD5 of the content, so the two must agree.
                #expect(file.revision == "\"\(file.hashes.first { $0.kind == .md5 }?.value ?? "-")\"")
            }
            #expect(provider.capabilities.hashKinds == [.sha1, .md5])
            // The download URL built from the decoded path reaches the same file.
            let flac = try #require(files.first { $0.path.hasSuffix(".flac") })
            let request = try await provider.resolveDownload(for: flac)
            let sink = MemorySink()
            let outcome = try await try CurlTransport().download(
                HTTPRequest(method: request.method, url: request.url, headers: HTTPHeaders(request.headers)),
                range: 0...(flac.size - 1), ifRange: request.etag, into: sink)
            #expect(outcome.head.status == 206)
            #expect(Int64(sink.bytes.count) == flac.size)
        }
    }

    @Test("IIS-style full-URL hrefs and iscollection folders")
    func fullURL() async throws {
        try await withFake(["--style", "fullurl"]) { server in
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport())
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio)
        }
    }

    @Test("a subfolder answering 403 is reported and skipped, not fatal")
    func forbiddenSubfolder() async throws {
        try await withFake(["--forbidden", "Locked"]) { server in
            let logs = LogCollector()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), logs: logs)
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio.subtracting(["Locked/secret.mp3"]))
            #expect(logs.warnings.contains { $0.contains("Locked") && $0.contains("403") }, "\(logs.warnings)")
        }
    }

    @Test("a subfolder answering malformed XML is reported and skipped; on the root it is .invalidResponse")
    func malformed() async throws {
        try await withFake(["--malformed", "Broken"]) { server in
            let logs = LogCollector()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), logs: logs)
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio.subtracting(["Broken/lost.mp3"]))
            #expect(logs.warnings.contains { $0.contains("/dav/Broken/") }, "\(logs.warnings)")
        }
        try await withFake(["--malformed", ""]) { server in
            let provider = try makeProvider(url: server.url("/dav/?session=secret"), transport: try CurlTransport())
            let error = await #expect(throws: ProviderError.self) { try await collectPages(provider) }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains(server.url("/dav/")) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("secret") == false)
        }
    }

    @Test("wrong credentials on the root are .unauthorized with a message that says what to check")
    func unauthorized() async throws {
        try await withFake([]) { server in
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), password: "wrong")
            let error = await #expect(throws: ProviderError.self) { try await collectPages(provider) }
            #expect(error?.code == .unauthorized)
            #expect(error?.message == "WebDAV server at 127.0.0.1 refused the credentials for remote test: check user/password (or password_command)")
            #expect(error?.message.contains("wrong") == false)
        }
    }

    @Test("a root that does not exist is .notFound naming url and root")
    func rootNotFound() async throws {
        try await withFake([]) { server in
            let provider = try makeProvider(url: server.url("/dav/"), root: "No Such", transport: try CurlTransport())
            let error = await #expect(throws: ProviderError.self) { try await collectPages(provider) }
            #expect(error?.code == .notFound)
            #expect(error?.message.contains("/dav/No%20Such/") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("check url and root") == true)
        }
    }

    @Test("hrefs outside the mirrored collection are logged and skipped")
    func escapingHrefs() async throws {
        try await withFake(["--escape"]) { server in
            let logs = LogCollector()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), logs: logs)
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio)
            #expect(logs.warnings.count == 4, "\(logs.warnings)")
        }
    }

    @Test("bearer tokens are sent as Authorization: Bearer")
    func bearer() async throws {
        try await withFake(["--bearer", "tok-123"]) { server in
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), auth: .bearer("tok-123"))
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio)
        }
    }
}
