import CloudSyncAuth
import Foundation
import Synchronization
import Testing
import TestSupport

let cloudsyncBinary = RepositoryPaths.root.appendingPathComponent(".build/debug/cloudsync").path

/// The built `cloudsync` run with piped stdin, its stderr collected as it arrives.
final class CLIRun: Sendable {
    let process = Process()
    let stdin = Pipe()
    private let errText = TextBuffer()
    private let outText = TextBuffer()

    init(_ arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: cloudsyncBinary)
        process.arguments = arguments
        process.environment = environment
        let err = Pipe(), out = Pipe()
        process.standardInput = stdin
        process.standardError = err
        process.standardOutput = out
        err.fileHandleForReading.readabilityHandler = { [errText] h in errText.append(h.availableData) }
        out.fileHandleForReading.readabilityHandler = { [outText] h in outText.append(h.availableData) }
        try process.run()
    }

    var stderr: String { errText.text }
    var stdout: String { outText.text }

    func send(_ line: String) throws { try stdin.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8)) }

    /// Waits (at most 30 s) until stderr contains `text`.
    func waitForStderr(containing text: String) async throws {
        for _ in 0..<300 where !stderr.contains(text) {
            if !process.isRunning { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(stderr.contains(text), "stderr so far: \(stderr)")
    }

    /// Closes stdin and waits (at most 30 s) for the exit status.
    func finish() async throws -> Int32 {
        try? stdin.fileHandleForWriting.close()
        for _ in 0..<300 where process.isRunning { try await Task.sleep(nanoseconds: 100_000_000) }
        if process.isRunning { process.terminate(); Issue.record("cloudsync did not exit") }
        process.waitUntilExit()
        try await Task.sleep(nanoseconds: 100_000_000)
        return process.terminationStatus
    }
}

/// Text collected from a pipe as it arrives.
final class TextBuffer: Sendable {
    private let buffer = Mutex(Data())
    func append(_ data: Data) { buffer.withLock { $0 += data } }
    var text: String { buffer.withLock { String(decoding: $0, as: UTF8.self) } }
}

@Suite("cloudsync login / logout (built binary, stdin piped)",
       .enabled(if: FileManager.default.isExecutableFile(atPath: cloudsyncBinary), "build the cloudsync executable first"))
struct LoginCLITests {
    func environment(_ dir: TemporaryDirectory, config: String) throws -> [String: String] {
        let file = dir.url.appendingPathComponent("config.toml")
        try config.write(to: file, atomically: true, encoding: .utf8)
        return ["CLOUDSYNC_CONFIG": file.path, "XDG_STATE_HOME": dir.url.appendingPathComponent("state").path,
                "HOME": dir.url.path, "PATH": "/usr/bin:/bin"]
    }

    @Test("Dropbox: the pasted code on stdin completes the login; exit 0, file 0600, no token in any output at --verbose")
    func dropbox() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let env = try environment(dir, config: """
            [remote.box]
            provider = "dropbox"
            client_id = "test-client"
            token_url = "\(fake.url("/token"))"
            auth_url = "\(fake.url("/authorize"))"
            api_url = "\(fake.base)"
            """)
        let run = try CLIRun(["--verbose", "login", "box"], environment: env)
        try await run.waitForStderr(containing: "/authorize?")
        let link = try #require(firstURL(in: [run.stderr], containing: "/authorize"))
        try run.send(try #require(try await approve(link)["code"] as? String))
        #expect(try await run.finish() == 0)
        #expect(run.stdout.contains("as dee@example.com"))
        let file = dir.url.appendingPathComponent("state/cloudsync/tokens/box.json").path
        #expect(mode(of: file) == 0o600)
        expectNoSecrets(try await fake.secrets(), in: [run.stderr, run.stdout])

        let logout = try CLIRun(["logout", "box"], environment: env)
        #expect(try await logout.finish() == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test("--token-json - with a token the provider refuses: exit 4, nothing stored")
    func importRefused() async throws {
        let fake = try OAuthFake()
        let dir = try TemporaryDirectory()
        let env = try environment(dir, config: """
            [remote.od]
            provider = "onedrive"
            client_id = "test-client"
            token_url = "\(fake.url("/token"))"
            api_url = "\(fake.base)"
            """)
        let run = try CLIRun(["login", "od", "--token-json", "-"], environment: env)
        try run.send(#"{"access_token":"not-valid","token_type":"Bearer","refresh_token":"r","expiry":"2099-01-01T00:00:00Z"}"#)
        #expect(try await run.finish() == 4)
        #expect(run.stderr.contains("nothing was stored"))
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("state/cloudsync/tokens/od.json").path))
    }

    @Test("a remote without client_id: exit 3 with where to register an app")
    func missingClientID() async throws {
        let dir = try TemporaryDirectory()
        let env = try environment(dir, config: """
            [remote.y]
            provider = "yandex"
            """)
        let run = try CLIRun(["login", "y"], environment: env)
        #expect(try await run.finish() == 3)
        #expect(run.stderr.contains("oauth.yandex.com"))
    }
}
