import CloudSyncCore
import CloudSyncHTTP
import Foundation
import TestSupport
import Testing
@testable import GoogleDrive

/// The bytes the fake serves for file `id` at `version` (see `Drive.content` in gdrive_fake.py).
func driveFakeContent(id: String, version: Int = 0, size: Int) -> [UInt8] {
    let seed = Array("\(id):\(version);".utf8)
    return (0..<size).map { seed[$0 % seed.count] }
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
final class DriveFake: Sendable {
    private let fake: PythonFake
    let transport: CurlTransport

    /// Starts the fake with `spec` (see the script's docstring). Fails clearly when python3 is missing or the
    /// port does not come within 20 s.
    init(_ spec: [String: Any]) async throws {
        fake = try await PythonFake.start("gdrive_fake.py", spec: spec, timeout: 60)
        transport = try CurlTransport()
    }

    var base: URL { fake.baseURL() }

    func control(_ ops: [[String: Any]]) async throws {
        try await fake.control(ops, via: transport)
    }

    func log() async throws -> [DriveLogEntry] { try await fake.log(via: transport) }
    func requests() async throws -> [FakeRequest] { try await fake.log(via: transport) }

    func stop() { fake.stop() }
}

/// A provider against `fake` with an `OAuthRefresher` on the fake's token endpoint (access token tok-0).
struct DriveHarness {
    let provider: GoogleDriveProvider
    let refresher: OAuthRefresher
    /// Records the pacer's waits and sleeps at most 50 ms of each, so backoff is exercised quickly.
    let sleeps: SleepRecorder

    init(_ fake: DriveFake, root: String = "", pageSize: Int = 1000, strategy: GoogleDriveOptions.ListingStrategy = .flat,
         acknowledgeAbuse: Bool = false, walkLimits: WalkLimits = WalkLimits()) throws {
        let options = GoogleDriveOptions(remoteName: "gd", root: root, apiURL: fake.base,
                                         tokenURL: fake.base.appendingPathComponent("token"), pageSize: pageSize,
                                         acknowledgeAbuse: acknowledgeAbuse, listingStrategy: strategy, walkLimits: walkLimits)
        refresher = OAuthRefresher(remoteName: "gd", tokens: TokenSet(accessToken: "tok-0", refreshToken: "refresh-0"),
                                   client: options.oauthClient(clientID: "client-id", clientSecret: "client-secret"),
                                   transport: fake.transport) { _ in }
        sleeps = SleepRecorder(sleepingAtMost: 0.05)
        provider = GoogleDriveProvider(options: options, transport: fake.transport, pacer: sleeps.pacer(retries: 6), tokens: refresher,
                                       audio: AudioFilter(), logger: .silent)
    }

    func list(cursor: String? = nil) async throws -> [ListingPage] {
        try await listingPages(provider, cursor: cursor)
    }
}

@discardableResult
/// Runs `body` with a fake started from `spec`, stopping it afterwards (also when `body` throws).
func withDriveFake<T>(_ spec: [String: Any], _ body: (DriveFake) async throws -> T) async throws -> T {
    let fake = try await DriveFake(spec)
    defer { fake.stop() }
    return try await body(fake)
}
