import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
@testable import GoogleDrive

/// Helpers for the Google Drive tests only (names prefixed so they never clash with other providers' helpers).
enum DriveTestPaths {
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fakeServer = packageRoot.appendingPathComponent("Tests/Fakes/gdrive_fake.py")
}

/// The bytes the fake serves for file `id` at `version` (see `Drive.content` in gdrive_fake.py).
func driveFakeContent(id: String, version: Int = 0, size: Int) -> [UInt8] {
    let seed = Array("\(id):\(version);".utf8)
    return (0..<size).map { seed[$0 % seed.count] }
}

/// A `ByteSink` into memory.
final class DriveMemorySink: ByteSink {
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

/// Records the delays a pacer asked for and sleeps at most 50 ms of each, so backoff is exercised quickly.
final class DriveRecordingSleeps: Sendable {
    private let delays = Mutex<[TimeInterval]>([])
    var recorded: [TimeInterval] { delays.withLock { $0 } }

    func pacer(retries: Int = 6) -> Pacer {
        Pacer(policy: .init(retries: retries, baseDelay: 0.01, maxDelay: 0.05)) { seconds in
            self.delays.withLock { $0.append(seconds) }
            try await Task.sleep(for: .seconds(min(seconds, 0.05)))
        }
    }
}

/// One logged request of the fake.
struct DriveLogEntry: Decodable {
    var method: String
    var path: String
    var query: [String: String]
    var range: String?
    var status: Int
}

/// Tests/Fakes/gdrive_fake.py running as a child process; `stop()` closes its stdin and terminates it.
final class DriveFake: @unchecked Sendable {
    let port: Int
    private let process: Process
    private let stdinPipe: Pipe
    let transport: CurlTransport

    static func start(_ spec: [String: Any]) async throws -> DriveFake {
        let process = Process()
        let stdinPipe = Pipe(), stdoutPipe = Pipe(), stderrPipe = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let json = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        process.arguments = ["python3", DriveTestPaths.fakeServer.path, json]
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        // Watchdog for the port line only: a fake that prints nothing is killed after 20 s instead of hanging.
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 20, execute: watchdog)
        defer { watchdog.cancel() }
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
        guard let port = Int(line.trimmingCharacters(in: .whitespaces)) else {
            try? stdinPipe.fileHandleForWriting.close()
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let err = String(decoding: stderrPipe.fileHandleForReading.availableData, as: UTF8.self)
            throw ProviderError(.configuration, "gdrive_fake.py did not print its port (is python3 installed?): \(err)")
        }
        return DriveFake(port: port, process: process, stdinPipe: stdinPipe, transport: try CurlTransport())
    }

    private init(port: Int, process: Process, stdinPipe: Pipe, transport: CurlTransport) {
        self.port = port
        self.process = process
        self.stdinPipe = stdinPipe
        self.transport = transport
    }

    var base: URL { URL(string: "http://127.0.0.1:\(port)") ?? URL(fileURLWithPath: "/") }

    func control(_ ops: [[String: Any]]) async throws {
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/_control"))
        let body = try JSONSerialization.data(withJSONObject: ops)
        let response = try await transport.send(HTTPRequest(method: "POST", url: url, headers: ["Content-Type": "application/json"], body: body))
        #expect(response.status == 200, "control \(ops) → \(String(decoding: response.body, as: UTF8.self))")
    }

    func log() async throws -> [DriveLogEntry] {
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/_log"))
        return try JSONDecoder().decode([DriveLogEntry].self, from: try await transport.send(HTTPRequest(url: url)).body)
    }

    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// A provider against `fake` with an `OAuthRefresher` on the fake's token endpoint (access token tok-0).
struct DriveHarness {
    let provider: GoogleDriveProvider
    let refresher: OAuthRefresher
    let sleeps: DriveRecordingSleeps

    init(_ fake: DriveFake, root: String = "", pageSize: Int = 1000, strategy: GoogleDriveOptions.ListingStrategy = .flat,
         acknowledgeAbuse: Bool = false) throws {
        let options = GoogleDriveOptions(remoteName: "gd", root: root, apiURL: fake.base,
                                         tokenURL: fake.base.appendingPathComponent("token"), pageSize: pageSize,
                                         acknowledgeAbuse: acknowledgeAbuse, listingStrategy: strategy)
        refresher = OAuthRefresher(remoteName: "gd", tokens: TokenSet(accessToken: "tok-0", refreshToken: "refresh-0"),
                                   client: options.oauthClient(clientID: "client-id", clientSecret: "client-secret"),
                                   transport: fake.transport) { _ in }
        sleeps = DriveRecordingSleeps()
        provider = GoogleDriveProvider(options: options, transport: fake.transport, pacer: sleeps.pacer(), tokens: refresher,
                                       audio: AudioFilter(), logger: .silent)
    }

    func list(cursor: String? = nil) async throws -> [ListingPage] {
        var pages: [ListingPage] = []
        for try await page in provider.listAudio(cursor: cursor) { pages.append(page) }
        return pages
    }
}

@discardableResult
/// Runs `body` with a fake started from `spec`, stopping it afterwards (also when `body` throws).
func withDriveFake<T>(_ spec: [String: Any], _ body: (DriveFake) async throws -> T) async throws -> T {
    let fake = try await DriveFake.start(spec)
    defer { fake.stop() }
    return try await body(fake)
}
