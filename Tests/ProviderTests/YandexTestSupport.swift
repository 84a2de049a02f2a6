import CloudSyncCore
import CloudSyncHTTP
import Foundation
import TestSupport
import Testing
@testable import YandexDisk

/// Helpers for the Yandex tests only (names prefixed so they never clash with other providers' helpers).
enum YandexTestPaths {
    static let fixtures = RepositoryPaths.root.appendingPathComponent("Tests/ProviderTests/Fixtures/yandex")

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: fixtures.appendingPathComponent(name))
    }
}

/// Tests/Fakes/yandex_fake.py, one per test: API on 127.0.0.1:P1, download host named localhost:P2.
final class YandexFake: Sendable {
    private let fake: PythonFake
    /// `CurlTransport` when it reads the fake's answers, else the URLSession stand-in (see YandexTestTransport.swift).
    let transport: any Transport

    /// Starts the fake with `spec` (see the script's docstring). Fails with a clear message if python3 is
    /// missing or the fake prints no ports within 15 s.
    init(_ spec: [String: Any]) async throws {
        fake = try await PythonFake.start("yandex_fake.py", spec: spec, portCount: 2)
        transport = try CurlTransport()
    }

    var apiPort: Int { fake.ports[0] }
    var downloadPort: Int { fake.ports[1] }

    var apiURL: URL { fake.baseURL(port: 0) }
    var tokenURL: URL { apiURL.appendingPathComponent("token") }

    struct Entry: Decodable {
        var server: String
        var method: String
        var path: String
        var query: [String: String]
        var auth_scheme: String?
        var auth_token: String?
        var host: String?
        var range: String?
        var status: Int
        var href_id: String?
        var file: String?
    }

    func log() async throws -> [Entry] { try await fake.log(via: transport) }
    func requests() async throws -> [FakeRequest] { try await fake.log(via: transport) }

    func control(_ op: [String: Any]) async throws {
        try await fake.control([op], via: transport)
    }

    func stop() { fake.stop() }

    /// Runs `body` with a started fake and stops it afterwards, also when `body` throws.
    static func with<T>(_ spec: [String: Any], _ body: (YandexFake) async throws -> T) async throws -> T {
        let fake = try await YandexFake(spec)
        defer { fake.stop() }
        return try await body(fake)
    }

    func provider(root: String = "", pageSize: Int = 1000, flatListing: Bool = true, tokens: (any TokenSource)? = nil,
                  pacer: Pacer? = nil, logs: LogRecorder = LogRecorder(), walkLimits: WalkLimits = WalkLimits()) -> YandexDiskProvider {
        let options = YandexOptions(remoteName: "yd", root: root, apiURL: apiURL, pageSize: pageSize, flatListing: flatListing,
                                    walkLimits: walkLimits)
        return YandexDiskProvider(options: options, transport: transport, pacer: pacer ?? SleepRecorder().pacer(),
                                  tokens: tokens ?? StaticTokenSource(token: "test-access-token", remoteName: "yd"),
                                  audio: AudioFilter(), logger: logs.logger)
    }

    /// An `OAuthRefresher` against the fake's token endpoint with the spec's default credentials.
    func refresher(access: String = "test-access-token") -> OAuthRefresher {
        OAuthRefresher(remoteName: "yd", tokens: TokenSet(accessToken: access, refreshToken: "test-refresh-token"),
                       client: .init(tokenURL: tokenURL, clientID: "test-client", clientSecret: "test-secret"),
                       transport: transport, persist: { _ in })
    }
}

/// Every file of a listing, by path; fails on a page that is not `.full` or carries a cursor.
func yandexListing(_ provider: YandexDiskProvider) async throws -> [String: RemoteFile] {
    var files: [String: RemoteFile] = [:]
    var pages = 0
    for try await page in provider.listAudio(cursor: nil) {
        pages += 1
        #expect(page.kind == .full)
        #expect(page.cursor == nil)
        #expect(page.deletions.isEmpty)
        for f in page.upserts { files[f.path] = f }
    }
    #expect(pages >= 1)
    return files
}

/// Downloads `file` the way the engine does: one resolved request reused for every `chunk`-sized Range, a
/// refusal (401/403/404/410) answered by `resolveDownload(for:rejected:status:)` and a retry from the same offset.
func yandexDownload(_ provider: YandexDiskProvider, _ file: RemoteFile, transport: any Transport,
                    chunk: Int64, between: (@Sendable (Int) async throws -> Void)? = nil) async throws -> [UInt8] {
    let sink = MemoryByteSink()
    var request = try await provider.resolveDownload(for: file)
    var offset: Int64 = 0
    var refusedOnce = false
    var ranges = 0
    while offset < file.size {
        let end = min(file.size, offset + chunk) - 1
        var http = HTTPRequest(method: request.method, url: request.url, keepsAuthAcrossHosts: request.sendsAuthOnRedirect)
        for h in request.headers { http.headers.add(h.name, h.value) }
        let outcome = try await transport.download(http, range: offset...end, ifRange: nil, into: sink)
        switch outcome.head.status {
        case 206:
            #expect(outcome.delivered == offset..<(end + 1))
            #expect(outcome.totalSize == file.size)
            offset = end + 1
            refusedOnce = false
            ranges += 1
            try await between?(ranges)
        case 401, 403, 404, 410:
            guard !refusedOnce else {
                throw ProviderError(.linkExpired, "download of \(file.path) refused twice at offset \(offset) (HTTP \(outcome.head.status))")
            }
            refusedOnce = true
            request = try await provider.resolveDownload(for: file, rejected: request, status: outcome.head.status)
        default:
            throw ProviderError(.invalidResponse, "download of \(file.path) answered \(outcome.head.status) at offset \(offset)")
        }
    }
    return sink.bytes
}

func yandexHash(_ bytes: [UInt8], _ kind: HashKind) -> String {
    var hasher = makeHasher(for: kind)
    bytes.withUnsafeBytes { hasher.update($0) }
    return hasher.finalize()
}
