import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
@testable import OneDrive

/// Helpers for the OneDrive tests only (names prefixed so they never clash with other providers' helpers).
enum OneDriveTestPaths {
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fake = packageRoot.appendingPathComponent("Tests/Fakes/onedrive_fake.py")
}

/// A `ByteSink` into memory.
final class OneDriveMemorySink: ByteSink {
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

/// Records the pacer's waits and waits them (bounded), so tests can see Retry-After honoured without timing.
final class OneDriveRecordingSleeps: Sendable {
    private let delays = Mutex<[TimeInterval]>([])
    var recorded: [TimeInterval] { delays.withLock { $0 } }

    func pacer(retries: Int = 4) -> Pacer {
        Pacer(policy: .init(retries: retries, baseDelay: 0.01, maxDelay: 0.05)) { seconds in
            self.delays.withLock { $0.append(seconds) }
            try await Task.sleep(for: .seconds(min(seconds, 2)))
        }
    }
}

final class OneDriveFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}

/// The fake Graph server of Tests/Fakes/onedrive_fake.py, started per test on 127.0.0.1 and stopped by `stop()`.
final class OneDriveFake: @unchecked Sendable {
    let apiPort: Int
    let contentPort: Int
    let transport: CurlTransport
    private let process: Process
    private let stdinPipe: Pipe

    struct LogEntry: Decodable {
        var srv: String
        var method: String
        var path: String
        var query: String
        var auth: Bool
        var range: String?
    }

    static func start(_ spec: [String: Any]) async throws -> OneDriveFake {
        let process = Process()
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let json = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        process.arguments = ["python3", OneDriveTestPaths.fake.path, json]
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = FileHandle.standardError
        do {
            try process.run()
        } catch {
            throw ProviderError(.configuration, "cannot start python3 (is it installed?): \(error)")
        }
        let handle = stdoutPipe.fileHandleForReading
        let started = OneDriveFlag()
        // A fake that prints nothing within 15 s is stopped, which ends the read below with an empty line.
        DispatchQueue.global().asyncAfter(deadline: .now() + 15) { if !started.isSet && process.isRunning { process.terminate() } }
        let line: String = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var bytes: [UInt8] = []
                while true {
                    let chunk = handle.readData(ofLength: 1)
                    if chunk.isEmpty || chunk.first == UInt8(ascii: "\n") { break }
                    bytes.append(contentsOf: chunk)
                }
                started.set()
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
        let ports = line.split(separator: " ").compactMap { Int($0) }
        guard ports.count == 2 else {
            try? stdinPipe.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            throw ProviderError(.configuration, "onedrive_fake.py printed '\(line)' instead of two ports (is python3 installed?)")
        }
        return OneDriveFake(apiPort: ports[0], contentPort: ports[1], process: process, stdinPipe: stdinPipe,
                            transport: try CurlTransport())
    }

    private init(apiPort: Int, contentPort: Int, process: Process, stdinPipe: Pipe, transport: CurlTransport) {
        self.apiPort = apiPort
        self.contentPort = contentPort
        self.process = process
        self.stdinPipe = stdinPipe
        self.transport = transport
    }

    var apiURL: URL { URL(string: "http://127.0.0.1:\(apiPort)")! }
    var tokenURL: URL { URL(string: "http://127.0.0.1:\(apiPort)/common/oauth2/v2.0/token")! }

    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    @discardableResult
    func control(_ op: [String: Any]) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: op)
        let response = try await transport.send(HTTPRequest(method: "POST", url: apiURL.appendingPathComponent("_control"),
                                                            headers: ["Content-Type": "application/json"], body: body))
        #expect(response.status == 200, "control \(op) answered \(response.status)")
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return object?["result"] as? String ?? ""
    }

    func log() async throws -> [LogEntry] {
        let response = try await transport.send(HTTPRequest(url: apiURL.appendingPathComponent("_log")))
        return try JSONDecoder().decode([LogEntry].self, from: response.body)
    }

    func bytes(of id: String) async throws -> [UInt8] {
        let response = try await transport.send(HTTPRequest(url: URL(string: "http://127.0.0.1:\(apiPort)/_bytes?id=\(id)")!))
        return Array(response.body)
    }

    func provider(root: String = "/Music", tokens: (any TokenSource)? = nil, pacer: Pacer? = nil) -> OneDriveProvider {
        let options = OneDriveOptions(remoteName: "od", root: root, apiURL: apiURL, tokenURL: tokenURL)
        return OneDriveProvider(options: options, transport: transport, pacer: pacer ?? OneDriveRecordingSleeps().pacer(),
                                tokens: tokens ?? StaticTokenSource(token: "at-0", remoteName: "od"), audio: AudioFilter(),
                                logger: .silent)
    }
}

@discardableResult
/// Runs `body` against a fresh fake, stopping it afterwards (also when `body` throws).
func withOneDriveFake<T>(_ spec: [String: Any], _ body: (OneDriveFake) async throws -> T) async throws -> T {
    let fake = try await OneDriveFake.start(spec)
    defer { fake.stop() }
    return try await body(fake)
}

/// Every page of one listing.
func oneDrivePages(_ provider: OneDriveProvider, cursor: String?) async throws -> [ListingPage] {
    var pages: [ListingPage] = []
    for try await page in provider.listAudio(cursor: cursor) { pages.append(page) }
    return pages
}

/// What an engine does with a `DownloadRequest`: ranges of `chunk` bytes through `transport.download`,
/// re-resolving (at most 10 times) when the content host answers 401/403/404/410. Returns the bytes and how
/// many times the download was resolved.
func oneDriveDownload(_ file: RemoteFile, provider: OneDriveProvider, transport: any Transport, chunk: Int64) async throws -> ([UInt8], Int) {
    let sink = OneDriveMemorySink()
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
