import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import YandexDisk

/// Answers API calls from fixtures by URL path (and `path=` query), records every request; no network.
final class YandexCannedTransport: Transport {
    private let answers: [String: (Int, Data)]
    private let requests = Mutex<[HTTPRequest]>([])

    /// `answers`: "API path" or "API path?disk path", optionally with "@offset" → (status, body). Anything else is 404
    /// DiskNotFoundError.
    init(_ answers: [String: (Int, Data)]) { self.answers = answers }

    var sent: [HTTPRequest] { requests.withLock { $0 } }

    func send(_ request: HTTPRequest, into sink: any ResponseBodySink) async throws -> HTTPResponse {
        requests.withLock { $0.append(request) }
        let comps = URLComponents(url: request.url, resolvingAgainstBaseURL: false)
        let diskPath = comps?.queryItems?.first { $0.name == "path" }?.value
        let offset = comps?.queryItems?.first { $0.name == "offset" }?.value
        let key = request.url.path + (diskPath.map { "?" + $0 } ?? "")
        let (status, body) = answers[key + (offset.map { "@" + $0 } ?? "")] ?? answers[key] ?? answers[request.url.path]
            ?? (404, Data(#"{"message":"x","description":"Resource not found.","error":"DiskNotFoundError"}"#.utf8))
        let head = HTTPResponseHead(status: status, headers: ["Content-Type": "application/json"], url: request.url)
        guard sink.accepts(head) else { return HTTPResponse(head: head, body: body) }
        try body.withUnsafeBytes { try sink.write($0) }
        return HTTPResponse(head: head, body: Data())
    }

    func download(_ request: HTTPRequest, range: ClosedRange<Int64>?, ifRange: String?, whenRangeIgnored: IgnoredRange,
                  into sink: any ByteSink) async throws -> DownloadOutcome {
        throw ProviderError(.invalidResponse, "YandexCannedTransport does not download")
    }
}

private func cannedProvider(_ transport: YandexCannedTransport, root: String = "", logs: LogRecorder = LogRecorder()) -> YandexDiskProvider {
    let options = YandexOptions(remoteName: "yd", root: root, apiURL: URL(string: "https://api.test")!, pageSize: 20)
    return YandexDiskProvider(options: options, transport: transport, pacer: SleepRecorder().pacer(retries: 0),
                              tokens: StaticTokenSource(token: "secret-token", remoteName: "yd"), audio: AudioFilter(),
                              logger: logs.logger)
}

private func response(_ status: Int, _ body: String, headers: HTTPHeaders = [:],
                      url: String = "https://cloud-api.yandex.net/v1/disk/resources?path=disk%3A%2Fsecret") -> HTTPResponse {
    HTTPResponse(head: HTTPResponseHead(status: status, headers: headers, url: URL(string: url)!), body: Data(body.utf8))
}

@Suite("Yandex.Disk wire format and error mapping")
struct YandexUnitTests {
    struct ErrorCase: Sendable, CustomStringConvertible {
        var status: Int
        var body: String
        var retryAfter: String?
        var code: ProviderError.Code
        var wait: TimeInterval?
        var description: String { "\(status) \(body.prefix(40))" }
    }

    static let errorCases: [ErrorCase] = [
        .init(status: 401, body: #"{"message":"Не авторизован.","description":"Unauthorized","error":"UnauthorizedError"}"#, code: .tokenExpired),
        .init(status: 401, body: "", code: .tokenExpired),
        .init(status: 404, body: #"{"message":"Не удалось найти запрошенный ресурс.","description":"Resource not found.","error":"DiskNotFoundError"}"#, code: .notFound),
        .init(status: 400, body: #"{"message":"Ошибка проверки поля «limit».","description":"Error validating field \"limit\".","error":"FieldValidationError"}"#, code: .configuration),
        .init(status: 403, body: #"{"message":"Нет доступа.","description":"Forbidden","error":"ForbiddenError"}"#, code: .forbidden),
        .init(status: 429, body: #"{"message":"Слишком много запросов.","description":"Too Many Requests","error":"TooManyRequestsError"}"#, retryAfter: "7", code: .rateLimited, wait: 7),
        .init(status: 429, body: "", code: .rateLimited),
        .init(status: 503, body: #"{"error":"ServiceUnavailableError","description":"Service unavailable"}"#, retryAfter: "2", code: .rateLimited, wait: 2),
        .init(status: 503, body: "<html>busy</html>", code: .rateLimited),
        .init(status: 500, body: #"{"error":"InternalServerError"}"#, code: .transient),
        .init(status: 502, body: "", code: .transient),
        .init(status: 507, body: #"{"error":"DiskInsufficientStorageError","description":"Insufficient storage"}"#, code: .quotaExceeded),
        .init(status: 423, body: #"{"error":"DiskResourceLockedError","description":"Resource is locked"}"#, code: .transient),
        .init(status: 410, body: "", code: .notFound),
        .init(status: 406, body: #"{"error":"NotAcceptableError"}"#, code: .invalidResponse),
    ]

    @Test("error bodies and statuses map to codes, with Retry-After, and never leak the query", arguments: errorCases)
    func classify(_ c: ErrorCase) {
        var headers: HTTPHeaders = [:]
        if let r = c.retryAfter { headers.set("Retry-After", r) }
        let error = YandexDiskProvider.classify(response(c.status, c.body, headers: headers), remoteName: "yd")
        #expect(error?.code == c.code)
        #expect(error?.status == c.status)
        #expect(error?.retryAfter == c.wait)
        #expect(error?.message.contains("secret") == false)
        #expect(error?.message.contains("/v1/disk/resources") == true)
    }

    @Test("success statuses are not errors")
    func success() {
        #expect(YandexDiskProvider.classify(response(200, "{}"), remoteName: "yd") == nil)
        #expect(YandexDiskProvider.classify(response(201, "{}"), remoteName: "yd") == nil)
    }

    @Test("root spellings", arguments: [
        ("", [String]()), ("/", []), ("disk:", []), ("disk:/", []), ("Music", ["Music"]), ("/Music/", ["Music"]),
        ("disk:/Music/Rock", ["Music", "Rock"]), ("Музыка//Рок/", ["Музыка", "Рок"]),
    ])
    func roots(_ root: String, _ segments: [String]) {
        #expect(YandexAPI.rootSegments(root) == segments)
    }

    @Test("API paths")
    func apiPaths() {
        #expect(YandexAPI.segments(ofAPIPath: "disk:/a/b c.mp3") == ["a", "b c.mp3"])
        #expect(YandexAPI.segments(ofAPIPath: "/a") == ["a"])
        #expect(YandexAPI.segments(ofAPIPath: "app:/a") == nil)
        #expect(YandexAPI.segments(ofAPIPath: "trash:/a") == nil)
        #expect(YandexAPI.segments(ofAPIPath: "a/b") == nil)
        #expect(YandexAPI.diskPath(["Music", "Sigur Rós"]) == "disk:/Music/Sigur Rós")
        #expect(YandexAPI.diskPath([]) == "disk:/")
    }

    @Test("fields= asks for every key the listing reads, with the documented prefixes")
    func fields() {
        let folder = Set(YandexAPI.folderFields.split(separator: ",").map(String.init))
        let files = Set(YandexAPI.filesFields.split(separator: ",").map(String.init))
        for key in ["name", "path", "type", "size", "md5", "sha256", "modified", "revision", "mime_type", "media_type", "resource_id"] {
            #expect(folder.contains("_embedded.items.\(key)"))
            #expect(files.contains("items.\(key)"))
        }
        #expect(folder.isSuperset(of: ["_embedded.total", "_embedded.limit", "_embedded.offset", "type"]))
        #expect(files.isSuperset(of: ["limit", "offset"]))
    }


    @Test("a documented folder answer: audio by media_type or extension, hashes lowercased, revision as text")
    func folderFixture() async throws {
        let transport = YandexCannedTransport(["/v1/disk/resources?disk:/Music": (200, try YandexTestPaths.fixture("folder.json"))])
        let logs = LogRecorder()
        let provider = cannedProvider(transport, root: "Music", logs: logs)
        let files = try await yandexListing(provider)
        #expect(Set(files.keys) == ["Hoppípolla.flac", "track.DSF"])
        let f = try #require(files["Hoppípolla.flac"])
        #expect(f.hashes == [ContentHash(kind: .sha256, value: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
                             ContentHash(kind: .md5, value: "4334dc6379c8f95ddf11b8508cfea271")])
        #expect(f.revision == "1398069434000000")
        #expect(f.providerID == "4000000001:bb")
        #expect(f.modified == Date(timeIntervalSince1970: 1_398_077_834))
        let dsf = try #require(files["track.DSF"])
        #expect(dsf.revision == "11", "no revision: the md5 stands in")
        #expect(logs.all.contains { $0.contains("Sigur Rós") && $0.contains("disappeared") })
        for request in transport.sent {
            #expect(request.headers["Authorization"] == "OAuth secret-token")
        }
    }

    @Test("a documented flat answer: paths from the disk root, files without size or outside disk:/ skipped")
    func filesFixture() async throws {
        let transport = YandexCannedTransport(["/v1/disk/resources/files": (200, try YandexTestPaths.fixture("files.json")),
                                               "/v1/disk/resources/files@4": (200, Data(#"{"items":[],"limit":20,"offset":4}"#.utf8))])
        let files = try await yandexListing(cannedProvider(transport))
        #expect(Set(files.keys) == ["Music/a.mp3", "b.mp3"])
        #expect(files["b.mp3"]?.hashes.isEmpty == true)
        #expect(transport.sent.count == 2, "4 items < limit 20 and no total: an empty page says the list is complete")
    }

    @Test("a flat list that does not page (the same answer for every offset) is an error, not an endless listing")
    func flatListThatDoesNotPage() async throws {
        let transport = YandexCannedTransport(["/v1/disk/resources/files": (200, try YandexTestPaths.fixture("files.json"))])
        let error = await #expect(throws: ProviderError.self) { try await yandexListing(cannedProvider(transport)) }
        #expect(error?.code == .invalidResponse && error?.message.contains("cannot be paged") == true, "\(error?.message ?? "")")
        #expect(transport.sent.count == 2)
        // Without an offset in its answers, the repeated page gives it away.
        let bare = Data(#"{"items":[{"name":"a.mp3","path":"disk:/a.mp3","type":"file","media_type":"audio","size":3}],"limit":20}"#.utf8)
        let noOffset = YandexCannedTransport(["/v1/disk/resources/files": (200, bare)])
        let again = await #expect(throws: ProviderError.self) { try await yandexListing(cannedProvider(noOffset)) }
        #expect(again?.message.contains("the same page") == true, "\(again?.message ?? "")")
        #expect(noOffset.sent.count == 2)
    }

    @Test("a documented Link: href kept byte for byte, OAuth header, auth across hosts, no expiry")
    func linkFixture() async throws {
        let transport = YandexCannedTransport(["/v1/disk/resources/download": (200, try YandexTestPaths.fixture("link.json"))])
        let provider = cannedProvider(transport, root: "Music")
        let file = RemoteFile(path: "Рок/a+b.mp3", size: 3, modified: Date())
        let request = try await provider.resolveDownload(for: file)
        #expect(request.url.absoluteString.contains("YyjTJtEHob8R5WbpojJbiiUuU2HC_2JSTU0gW9qE0NHGW2uncmBjM_-IXun3Msyij96FTHQGSX-fDL-XwokDvA%3D%3D?uid=202727674"))
        #expect(request.url.host == "downloader.disk.yandex.ru")
        #expect(request.method == "GET")
        #expect(request.headers.map(\.name) == ["Authorization"])
        #expect(request.headers.first?.value == "OAuth secret-token")
        #expect(request.sendsAuthOnRedirect)
        #expect(request.expiresAt == nil)
        let sent = try #require(transport.sent.first)
        #expect(sent.url.absoluteString == "https://api.test/v1/disk/resources/download?path=disk%3A%2FMusic%2F%D0%A0%D0%BE%D0%BA%2Fa%2Bb.mp3")
    }

    @Test("a templated or missing href is .invalidResponse")
    func badLinks() async throws {
        for body in [#"{"href":"https://x/{a}","method":"GET","templated":true}"#, #"{"method":"GET"}"#, #"{"href":"ftp://x/y"}"#, "not json"] {
            let transport = YandexCannedTransport(["/v1/disk/resources/download": (200, Data(body.utf8))])
            let provider = cannedProvider(transport)
            let error = await #expect(throws: ProviderError.self) {
                _ = try await provider.resolveDownload(for: RemoteFile(path: "a.mp3", size: 1, modified: Date()))
            }
            #expect(error?.code == .invalidResponse)
        }
    }

    @Test("no change feed, both hashes")
    func capabilities() {
        let provider = cannedProvider(YandexCannedTransport([:]))
        #expect(provider.capabilities.hasChangeFeed == false)
        #expect(provider.capabilities.hashKinds == [.md5, .sha256])
    }

    @Test("revision decodes from a number or a string")
    func revision() throws {
        let r = try JSONDecoder().decode([YandexAPI.Revision].self, from: Data(#"[1398069434000000, "abc", 12.0]"#.utf8))
        #expect(r.map(\.text) == ["1398069434000000", "abc", "12"])
    }
}
