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
            let outcome = try await CurlTransport().download(
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

    @Test("a folder answer over the size cap is reported in skippedFolders and the rest is listed; on the root it is .invalidResponse")
    func overTheCap() async throws {
        try await withFake(["--folders", "3", "--files", "400"]) { server in
            // Each folder's answer is ~170 KiB, the root's ~1 KiB: a 64 KiB cap refuses the folders, not the root.
            var options = CurlTransportOptions()
            options.maxResponseBody = 64 << 10
            let logs = LogCollector()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(options: options), logs: logs)
            let pages = try await collectPages(provider)
            #expect(pages.flatMap(\.upserts).isEmpty)
            #expect(Set(pages.flatMap(\.skippedFolders)) == ["Folder 000", "Folder 001", "Folder 002"])
            #expect(logs.warnings.contains { $0.contains("'Folder 001'") && $0.contains("larger than 64.0 KiB") }, "\(logs.warnings)")
            let root = try makeProvider(url: server.url("/dav/"), root: "Folder 001", transport: try CurlTransport(options: options))
            let error = await #expect(throws: ProviderError.self) { try await collectPages(root) }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("larger than 64.0 KiB") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a folder answer dripping past the API deadline is reported in skippedFolders; the listing ends in time")
    func drippingFolder() async throws {
        try await withFake(["--drip", "Sub"]) { server in
            var options = CurlTransportOptions()
            options.apiTimeout = 1.5
            let logs = LogCollector()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(options: options), logs: logs)
            let started = ContinuousClock.now
            let pages = try await collectPages(provider)
            // The drip would last about two hours: ending within a minute is the deadline at work. (Not a speed
            // check: 10 s was once exceeded on a loaded 2-core machine, with the deadline honoured.)
            #expect(ContinuousClock.now - started < .seconds(60))
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == smallTreeAudio.filter { !$0.hasPrefix("Sub/") })
            #expect(pages.flatMap(\.skippedFolders) == ["Sub"])
            #expect(logs.warnings.contains { $0.contains("'Sub'") && $0.contains("within 1.5 s") }, "\(logs.warnings)")
            #expect(try await server.stats().paths["Sub"] == 1, "a missed deadline is not retried")
        }
    }

    @Test("an endless folder tree ends at walkLimits: too deep is skipped and reported, too many folders is an error")
    func endlessTree() async throws {
        try await withFake(["--endless", "1"]) { server in
            let logs = LogCollector()
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(), logs: logs,
                                            walkLimits: WalkLimits(maxDepth: 3))
            let pages = try await collectPages(provider)
            #expect(Set(pages.flatMap(\.upserts).map(\.path)) == ["t.mp3", "d0/t.mp3", "d0/d0/t.mp3", "d0/d0/d0/t.mp3"])
            #expect(pages.flatMap(\.skippedFolders) == ["d0/d0/d0/d0"])
            #expect(logs.warnings.contains { $0.contains("'d0/d0/d0/d0'") && $0.contains("deeper than 3") }, "\(logs.warnings)")
        }
        try await withFake(["--endless", "3"]) { server in
            let provider = try makeProvider(url: server.url("/dav/"), transport: try CurlTransport(),
                                            walkLimits: WalkLimits(maxFolders: 40))
            let error = await #expect(throws: ProviderError.self) { try await collectPages(provider) }
            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("more than 40 folders under the root") == true, "\(error?.message ?? "")")
            #expect(try await server.stats().propfind <= 40)
        }
    }

    @Test("user info in the url is Basic auth, never sent in the URL; contradictions and token auth are refused")
    func userInfo() async throws {
        try await withFake([]) { server in
            let withCredentials = "http://demo:demo-pass@127.0.0.1:\(server.port)/dav/"
            let provider = try makeProvider(url: withCredentials, transport: try CurlTransport(), password: "")
            let files = try await collectPages(provider).flatMap(\.upserts)
            #expect(Set(files.map(\.path)) == smallTreeAudio)
            let download = try await provider.resolveDownload(for: try #require(files.first))
            #expect(download.url.user == nil && download.url.password == nil)
            #expect(download.headers.first?.value == "Basic " + Data("demo:demo-pass".utf8).base64EncodedString())
            // The user in the URL with the password from the config (password_command) works too.
            let userOnly = try makeProvider(url: "http://demo@127.0.0.1:\(server.port)/dav/", transport: try CurlTransport())
            #expect(try await collectPages(userOnly).flatMap(\.upserts).count == smallTreeAudio.count)
            for (url, auth) in [("http://demo:other-pass@127.0.0.1:\(server.port)/dav/", WebDAVOptions.Auth.basic),
                                ("http://demo:demo-pass@127.0.0.1:\(server.port)/dav/", .bearer("tok"))] {
                let refused = try makeProvider(url: url, transport: try CurlTransport(), auth: auth)
                let error = await #expect(throws: ProviderError.self) { try await collectPages(refused) }
                #expect(error?.code == .configuration)
                #expect(error?.message.contains("url carries") == true, "\(error?.message ?? "")")
                #expect(error?.message.contains("other-pass") == false && error?.message.contains("demo-pass") == false)
            }
            #expect(try await server.stats().propfind == smallTreeFolders * 2, "refused configurations send nothing")
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
