import CloudSyncCore
import CloudSyncHTTP
import Foundation
import TestSupport
import Testing
@testable import OneDrive

/// The fake Graph server of Tests/Fakes/onedrive_fake.py, started per test on 127.0.0.1 and stopped by `stop()`.
final class OneDriveFake: Sendable {
    private let fake: PythonFake
    let transport: CurlTransport

    struct LogEntry: Decodable {
        var srv: String
        var method: String
        var path: String
        var query: String
        var auth: Bool
        var range: String?
    }

    /// Starts the fake with `spec` (see the script's docstring); fails clearly when python3 is missing or the
    /// ports do not come within 15 s.
    init(_ spec: [String: Any]) async throws {
        fake = try await PythonFake.start("onedrive_fake.py", spec: spec, portCount: 2)
        transport = try CurlTransport()
    }

    /// The port of the content host (download URLs), which the API answers with.
    var contentPort: Int { fake.ports[1] }
    var apiURL: URL { fake.baseURL(port: 0) }
    var tokenURL: URL { apiURL.appendingPathComponent("common/oauth2/v2.0/token") }

    func stop() { fake.stop() }

    @discardableResult
    func control(_ op: [String: Any]) async throws -> String {
        try await fake.control([op], via: transport).last as? String ?? ""
    }

    func log() async throws -> [LogEntry] { try await fake.log(via: transport) }
    func requests() async throws -> [FakeRequest] { try await fake.log(via: transport) }

    func bytes(of id: String) async throws -> [UInt8] {
        let response = try await transport.send(HTTPRequest(url: apiURL.appending(path: "_bytes").appending(queryItems: [URLQueryItem(name: "id", value: id)])))
        return Array(response.body)
    }

    func provider(root: String = "/Music", tokens: (any TokenSource)? = nil, pacer: Pacer? = nil) -> OneDriveProvider {
        let options = OneDriveOptions(remoteName: "od", root: root, apiURL: apiURL, tokenURL: tokenURL)
        return OneDriveProvider(options: options, transport: transport, pacer: pacer ?? SleepRecorder().pacer(),
                                tokens: tokens ?? StaticTokenSource(token: "at-0", remoteName: "od"), audio: AudioFilter(),
                                logger: .silent)
    }
}

@discardableResult
/// Runs `body` against a fresh fake, stopping it afterwards (also when `body` throws).
func withOneDriveFake<T>(_ spec: [String: Any], _ body: (OneDriveFake) async throws -> T) async throws -> T {
    let fake = try await OneDriveFake(spec)
    defer { fake.stop() }
    return try await body(fake)
}

/// What an engine does with a `DownloadRequest`: ranges of `chunk` bytes through `transport.download`,
/// re-resolving (at most 10 times) when the content host answers 401/403/404/410. Returns the bytes and how
/// many times the download was resolved.
func oneDriveDownload(_ file: RemoteFile, provider: OneDriveProvider, transport: any Transport, chunk: Int64) async throws -> ([UInt8], Int) {
    let sink = MemoryByteSink()
    var request = try await provider.resolveDownload(for: file)
    var resolves = 1
    var offset: Int64 = 0
    while offset < file.size {
        let range = offset...min(file.size - 1, offset + chunk - 1)
        let http = HTTPRequest(method: request.method, url: request.url, headers: HTTPHeaders(request.headers),
                               keepsAuthAcrossHosts: request.sendsAuthOnRedirect)
        let outcome = try await transport.download(http, range: range, ifRange: request.etag, into: sink)
        switch outcome.head.status {
        case 206:
            #expect(outcome.delivered == range.lowerBound..<(range.upperBound + 1))
            offset = outcome.delivered.upperBound
        case 401, 403, 404, 410:
            guard resolves < 10 else { throw ProviderError(.linkExpired, "still refused after 10 resolves") }
            request = try await provider.resolveDownload(for: file, rejected: request, status: outcome.head.status)
            resolves += 1
        default:
            throw ProviderError(.invalidResponse, "unexpected HTTP \(outcome.head.status): \(String(decoding: outcome.errorBody, as: UTF8.self))")
        }
    }
    return (sink.bytes, resolves)
}
