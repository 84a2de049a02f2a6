import TestSupport
import CloudSyncConfig
import CloudSyncCore
import CloudSyncProviders
import Foundation
import Testing

enum Example {
    static func text() throws -> String { try ConfigExample.text() }
    static func uncommented() throws -> String { try ConfigExample.uncommented() }

    static let environment = [
        "HOME": "/home/tester", "DROPBOX_CLIENT_ID": "d", "GDRIVE_CLIENT_ID": "g", "GDRIVE_CLIENT_SECRET": "gs",
        "ONEDRIVE_CLIENT_ID": "o", "YANDEX_CLIENT_ID": "y", "YANDEX_CLIENT_SECRET": "ys", "NAS_PASSWORD": "np",
    ]
}

@Suite("config.example.toml")
struct ExampleConfigurationTests {
    @Test("parses as it is, with the defaults it documents")
    func parsesAsIs() throws {
        let config = try Configuration.parse(text: try Example.text(), file: "config.example.toml", environment: Example.environment)
        let defaults = try Configuration.parse(text: "", file: "empty", environment: Example.environment)
        #expect(config.cache == defaults.cache)
        #expect(config.pull == defaults.pull)
        #expect(config.audio == defaults.audio)
        #expect(config.remotes.map(\.name) == ["nas"])
        #expect(config.remotes.first?.provider == "webdav")
    }

    @Test("with every commented example switched on it still parses: one remote per provider, documented defaults")
    func parsesUncommented() throws {
        let text = try Example.uncommented()
        let config = try Configuration.parse(text: text, file: "uncommented.toml", environment: Example.environment)
        let defaults = try Configuration.parse(text: "", file: "empty", environment: Example.environment)
        #expect(config.cache == defaults.cache)
        #expect(config.pull == defaults.pull)
        #expect(config.audio == defaults.audio)
        #expect(Set(config.remotes.map(\.provider)) == Set(ProviderRegistry.catalog.descriptors.map(\.kind)))
        #expect(config.remotes.first { $0.provider == "gdrive" }?.clientSecret == "gs")
        #expect(config.remotes.first { $0.provider == "webdav" }?.password == "np")
    }

    @Test("documents every key of the schema")
    func documentsEveryKey() throws {
        let text = try Example.text()
        let keys = ["dir", "max_size", "min_free", "max_age", "checkpoint", "head_seconds", "jobs", "chunk_size", "segments", "segment_threshold", "bwlimit", "retries", "head_first", "api_timeout",
                    "extensions", "provider", "root", "api_url", "content_url", "token_url", "auth_url", "device_url",
                    "client_id", "client_secret", "access_token", "refresh_token", "url", "user", "password",
                    "password_command", "ca_file", "auth", "acknowledge_abuse", "include", "exclude", "filter_from", "ignore_case",
                    "min_size", "min_age", "delete", "shorten_heads"]
        for key in keys {
            #expect(text.contains("\(key) = "), "config.example.toml does not mention \(key)")
        }
        // README's key table (#20.15) names each of them too, as `section.key` or `key` in a remote's row.
        let readme = try String(contentsOf: ConfigExample.url.deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        let rows = readme.components(separatedBy: "\n").filter { $0.hasPrefix("| `") }
        for key in keys {
            #expect(rows.contains { $0.contains(".\(key)`") || $0.contains("`\(key)`") }, "README's key table does not name \(key)")
        }
    }
}

@Suite("Fuzzed configuration")
struct FuzzTests {
    @Test("random byte mutations of config.example.toml never crash: they parse or throw a positioned ConfigError")
    func mutations() throws {
        let seed = ProcessInfo.processInfo.environment["CLOUDSYNC_FUZZ_SEED"].flatMap(UInt64.init)
            ?? UInt64(Date().timeIntervalSince1970 * 1000)
        print("config fuzz seed: \(seed) (rerun with CLOUDSYNC_FUZZ_SEED=\(seed))")
        var random = SeededRandom(seed: seed)
        let original = Array(try Example.uncommented().utf8)
        var parsed = 0
        var rejected = 0
        for iteration in 0..<3000 {
            let bytes = ConfigExample.mutate(original, using: &random)
            do {
                let table = try TOMLParser.parse(bytes: bytes, file: "fuzz.toml")
                _ = try Configuration(table: table, file: "fuzz.toml", environment: Example.environment)
                parsed += 1
            } catch {
                rejected += 1
                let positioned = error.line >= 1 && error.column >= 1
                    && error.description.hasPrefix("fuzz.toml:\(error.line):\(error.column): ")
                if !positioned || error.message.isEmpty {
                    Issue.record("seed \(seed) iteration \(iteration): error without a position: \(error)")
                    return
                }
            }
        }
        print("config fuzz: \(parsed) mutated files accepted, \(rejected) rejected with a positioned error")
        #expect(parsed + rejected == 3000)
        #expect(rejected > 0, "seed \(seed): no mutation was rejected; the mutator is not mutating")
    }

    @Test("deep nesting is an error, not a stack overflow")
    func deepNesting() {
        let text = "a = " + String(repeating: "[", count: 100_000)
        #expect(throws: ConfigError.self) { try TOMLParser.parse(text, file: "deep.toml") }
        let tables = "a = " + String(repeating: "{b = ", count: 100_000)
        #expect(throws: ConfigError.self) { try TOMLParser.parse(tables, file: "deep.toml") }
    }
}
