import CloudSyncAuth
import CloudSyncCore
import CloudSyncHTTP
import Foundation
import Synchronization
import Testing
import TestSupport

/// A running `Tests/Fakes/oauth_fake.py`; stops when released (its stdin closes) or on `stop()`.
final class OAuthFake: Sendable {
    let port: Int
    let process: Process
    let input: Pipe

    init(_ arguments: [String] = []) throws {
        let script = RepositoryPaths.fake("oauth_fake.py").path
        guard let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/root/.pyenv/shims/python3"]
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw FakeError(message: "python3 is not installed; the login tests need it (apt-get install python3)")
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script] + arguments
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line = Data()
        while line.last != 10 {
            let chunk = try output.fileHandleForReading.read(upToCount: 1) ?? Data()
            if chunk.isEmpty { throw FakeError(message: "oauth_fake.py exited before printing its port") }
            line += chunk
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw FakeError(message: "oauth_fake.py printed no port")
        }
        self.port = port
    }

    var base: URL { URL(string: "http://127.0.0.1:\(port)")! }
    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// `/_fake/state`.
    func state() async throws -> [String: Any] {
        let response = try await sharedTransport().send(HTTPRequest(url: url("/_fake/state")))
        return try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
    }

    /// Every token and code string the fake handed out.
    func secrets() async throws -> [String] {
        let s = try await state()
        return (s["issued_access"] as? [String] ?? []) + (s["issued_refresh"] as? [String] ?? [])
    }

    /// Kills the fake with SIGKILL (children of the test process may inherit a blocked SIGTERM).
    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}

struct FakeError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

func sharedTransport() throws -> CurlTransport { try CurlTransport() }

/// Captures every log line at debug level.
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var logger: Logger { Logger(level: .debug) { [self] _, message in lines.withLock { $0.append(message) } } }
    var all: [String] { lines.withLock { $0 } }
}

/// A person at the keyboard, scripted: `answer` gets everything shown so far and the prompt, and returns
/// the line typed (nil = end of input). `secret` answers `readSecret`.
final class ScriptedInteraction: LoginInteraction {
    private let shownTexts = Mutex<[String]>([])
    private let answer: @Sendable ([String], String) async throws -> String?
    private let secret: String?

    init(secret: String? = nil, answer: @escaping @Sendable ([String], String) async throws -> String? = { _, _ in nil }) {
        self.answer = answer
        self.secret = secret
    }

    var shown: [String] { shownTexts.withLock { $0 } }
    func show(_ text: String) { shownTexts.withLock { $0.append(text) } }
    func readLine(prompt: String) async throws -> String? { try await answer(shown, prompt) }
    func readSecret(prompt: String) async throws -> String? { secret }
}

/// The first `http…` URL in `texts` whose string contains `containing`.
func firstURL(in texts: [String], containing: String) -> URL? {
    for text in texts {
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) where word.hasPrefix("http") && word.contains(containing) {
            return URL(string: String(word))
        }
    }
    return nil
}

/// Plays the browser: opens the authorization URL at the fake and returns its JSON answer (`code`, `redirect`).
func approve(_ authorizationURL: URL) async throws -> [String: Any] {
    let response = try await sharedTransport().send(HTTPRequest(url: authorizationURL, headers: ["Accept": "application/json"]))
    return try #require(try JSONSerialization.jsonObject(with: response.body) as? [String: Any])
}

func mode(of path: String) -> mode_t {
    var info = stat()
    _ = stat(path, &info)
    return info.st_mode & 0o777
}

/// Asserts that no string of `secrets` appears in `texts`.
func expectNoSecrets(_ secrets: [String], in texts: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!secrets.isEmpty, sourceLocation: sourceLocation)
    for secret in secrets {
        for text in texts where text.contains(secret) {
            Issue.record("a token appears in output: \(text.prefix(80))…", sourceLocation: sourceLocation)
        }
    }
}
