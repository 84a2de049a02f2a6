import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
@testable import YandexDisk

/// Helpers for the Yandex tests only (names prefixed so they never clash with other providers' helpers).
enum YandexTestPaths {
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fakeServer = packageRoot.appendingPathComponent("Tests/Fakes/yandex_fake.py")
    static let fixtures = packageRoot.appendingPathComponent("Tests/ProviderTests/Fixtures/yandex")

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: fixtures.appendingPathComponent(name))
    }
}

/// A `ByteSink` into memory.
final class YandexMemorySink: ByteSink {
    private let storage = Mutex<[UInt8]>([])

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        storage.withLock { buffer in
            let end = Int(offset) + bytes.count
            if buffer.count < end { buffer.append(contentsOf: repeatElement(0, count: end - buffer.count)) }
            buffer.replaceSubrange(Int(offset)..<end, with: bytes)
        }
    }

    var bytes: [UInt8] { storage.withLock { $0 } }
}

/// A pacer that records the delays it is asked to wait (and waits them, capped at 2 s).
final class YandexRecordingSleeps: Sendable {
    private let delays = Mutex<[TimeInterval]>([])
    var recorded: [TimeInterval] { delays.withLock { $0 } }

    func pacer(retries: Int = 4) -> Pacer {
        Pacer(policy: .init(retries: retries, baseDelay: 0.01, maxDelay: 0.05)) { seconds in
            self.delays.withLock { $0.append(seconds) }
            try await Task.sleep(for: .seconds(min(seconds, 2)))
        }
    }
}

/// Collects log lines.
final class YandexLogCollector: Sendable {
    private let lines = Mutex<[(LogLevel, String)]>([])
    var logger: Logger { Logger(level: .debug) { level, message in self.lines.withLock { $0.append((level, message)) } } }
    var all: [String] { lines.withLock { $0.map(\.1) } }
}

/// Tests/Fakes/yandex_fake.py, one per test: API on 127.0.0.1:P1, download host named localhost:P2.
final class YandexFake: @unchecked Sendable {
    let apiPort: Int
    let downloadPort: Int
    /// `CurlTransport` when it reads the fake's answers, else the URLSession stand-in (see YandexTestTransport.swift).
    let transport: any Transport
    private let process: Process
    private let stdinPipe: Pipe

    /// Starts the fake with `spec` (see the script's docstring). Fails with a clear message if python3 is
    /// missing or the fake prints no ports within 15 s.
    static func start(_ spec: [String: Any]) async throws -> YandexFake {
        let json = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        let process = Process()
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", YandexTestPaths.fakeServer.path, json]
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        let printed = YandexFlag()
        DispatchQueue.global().asyncAfter(deadline: .now() + 15) { [process] in
            // A fake that never printed its ports is stopped, so the read below ends instead of hanging.
            if !printed.isSet, process.isRunning { process.terminate() }
        }
        let handle = stdoutPipe.fileHandleForReading
        let line: String = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var bytes: [UInt8] = []
                while true {
                    let chunk = handle.readData(ofLength: 1)
                    if chunk.isEmpty || chunk.first == UInt8(ascii: "\n") { break }
                    bytes.append(contentsOf: chunk)
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
        printed.set()
        let ports = line.split(separator: " ").compactMap { Int($0) }
        guard ports.count == 2 else {
            try? stdinPipe.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let err = String(decoding: stderrPipe.fileHandleForReading.availableData, as: UTF8.self)
            throw ProviderError(.configuration, "python3 Tests/Fakes/yandex_fake.py did not print its ports (is python3 installed?): '\(line)' \(err)")
        }
        let transport = try CurlTransport()
        return YandexFake(apiPort: ports[0], downloadPort: ports[1], transport: transport,
                          process: process, stdinPipe: stdinPipe)
    }

    private init(apiPort: Int, downloadPort: Int, transport: any Transport, process: Process, stdinPipe: Pipe) {
        self.apiPort = apiPort
        self.downloadPort = downloadPort
        self.transport = transport
        self.process = process
        self.stdinPipe = stdinPipe
    }

    var apiURL: URL { URL(string: "http://127.0.0.1:\(apiPort)")! }
    var tokenURL: URL { URL(string: "http://127.0.0.1:\(apiPort)/token")! }

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

    func log() async throws -> [Entry] {
        let response = try await transport.send(HTTPRequest(url: URL(string: "http://127.0.0.1:\(apiPort)/_log")!))
        return try JSONDecoder().decode([Entry].self, from: response.body)
    }

    func control(_ command: [String: Any]) async throws {
        let body = try JSONSerialization.data(withJSONObject: command)
        let response = try await transport.send(HTTPRequest(method: "POST", url: URL(string: "http://127.0.0.1:\(apiPort)/_control")!,
                                                            headers: ["Content-Type": "application/json"], body: body))
        #expect(response.status == 200)
    }

    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// Runs `body` with a started fake and stops it afterwards, also when `body` throws.
    static func with<T>(_ spec: [String: Any], _ body: (YandexFake) async throws -> T) async throws -> T {
        let fake = try await start(spec)
        do {
            let result = try await body(fake)
            fake.stop()
            return result
        } catch {
            fake.stop()
            throw error
        }
    }

    func provider(root: String = "", pageSize: Int = 1000, flatListing: Bool = true, tokens: (any TokenSource)? = nil,
                  pacer: Pacer? = nil, logs: YandexLogCollector = YandexLogCollector()) -> YandexDiskProvider {
        let options = YandexOptions(remoteName: "yd", root: root, apiURL: apiURL, pageSize: pageSize, flatListing: flatListing)
        return YandexDiskProvider(options: options, transport: transport, pacer: pacer ?? YandexRecordingSleeps().pacer(),
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
    let sink = YandexMemorySink()
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

/// A flag shared between threads.
final class YandexFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
