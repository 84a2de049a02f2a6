import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import WebDAV

/// Paths and servers for the WebDAV tests.
enum WebDAVTestPaths {
    /// The package root, found from this file's path.
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let fixtures = packageRoot.appendingPathComponent("Tests/ProviderTests/Fixtures/webdav")
    static let fakeServer = packageRoot.appendingPathComponent("Tests/Fakes/webdav_fake.py")
    static let startScript = packageRoot.appendingPathComponent("Tests/servers/start-webdav.sh")

    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: fixtures.appendingPathComponent(name))
    }
}

/// Collects log lines so tests can check warnings.
final class LogCollector: Sendable {
    private let lines = Mutex<[(LogLevel, String)]>([])

    var logger: Logger { Logger(level: .debug) { level, message in self.lines.withLock { $0.append((level, message)) } } }
    var warnings: [String] { lines.withLock { $0.filter { $0.0 == .warning }.map(\.1) } }
    var all: [String] { lines.withLock { $0.map(\.1) } }
}

/// A `ByteSink` into memory, for checking downloaded bytes.
final class MemorySink: ByteSink {
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


/// A pacer that records the delays it was asked to wait and waits them for real (bounded by the tests'
/// Retry-After of 1 s).
final class RecordingSleeps: Sendable {
    private let delays = Mutex<[TimeInterval]>([])
    var recorded: [TimeInterval] { delays.withLock { $0 } }

    func pacer(retries: Int = 4) -> Pacer {
        Pacer(policy: .init(retries: retries, baseDelay: 0.01, maxDelay: 0.05)) { seconds in
            self.delays.withLock { $0.append(seconds) }
            try await Task.sleep(for: .seconds(min(seconds, 2)))
        }
    }
}

func makeProvider(url: String, root: String = "", transport: any Transport = UnusedTransport(), pacer: Pacer? = nil,
                  auth: WebDAVOptions.Auth = .basic, password: String = "demo-pass", logs: LogCollector = LogCollector(),
                  walkLimits: WalkLimits = WalkLimits()) throws -> WebDAVProvider {
    let u = try #require(URL(string: url))
    // Credentials in the URL stand alone; elsewhere the remote has user "demo".
    let user = u.user == nil ? "demo" : ""
    let options = WebDAVOptions(remoteName: "test", url: u, root: root, user: user, password: password, auth: auth,
                                walkLimits: walkLimits)
    return WebDAVProvider(options: options, transport: transport, pacer: pacer ?? RecordingSleeps().pacer(), audio: AudioFilter(),
                          logger: logs.logger)
}

/// Every page of a listing, in order.
func collectPages(_ provider: WebDAVProvider) async throws -> [ListingPage] {
    var pages: [ListingPage] = []
    for try await page in provider.listAudio(cursor: nil) { pages.append(page) }
    return pages
}

/// The fake server of Tests/Fakes/webdav_fake.py, one per test.
final class FakeWebDAVServer: Sendable {
    let port: Int
    private let child: ChildProcess

    static func start(_ options: [String]) async throws -> FakeWebDAVServer {
        let (child, line) = try await ChildProcess.startReadingFirstLine("python3", [WebDAVTestPaths.fakeServer.path] + options,
                                                                         timeout: 15)
        guard let port = Int(line.trimmingCharacters(in: .whitespaces)) else {
            child.stop()
            throw ProviderError(.configuration, "webdav_fake.py printed '\(line)' instead of a port")
        }
        return FakeWebDAVServer(port: port, child: child)
    }

    private init(port: Int, child: ChildProcess) {
        self.port = port
        self.child = child
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    struct Stats: Decodable {
        var propfind: Int
        var get: Int
        var depths: [String?]
        var paths: [String: Int]
        var max_inflight: Int
    }

    func stats() async throws -> Stats {
        let url = try #require(URL(string: url("/_stats")))
        let response = try await CurlTransport().send(HTTPRequest(url: url))
        return try JSONDecoder().decode(Stats.self, from: response.body)
    }

    func stop() { child.stop() }
}
