import Foundation
import TestSupport
import Testing

/// The configuration as the binary sees it: bounds (#19.11), secrets per remote (#20.7), `config show` and paths
/// (#20.14), the example's placeholder host (#20.10).
@Suite struct ConfigCLITests {
    private func write(_ text: String, in dir: URL) throws -> URL {
        let file = dir.appendingPathComponent("config.toml")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test func hugeDurationFailsCheckWithItsPositionAndNothingTraps() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try write("[cache]\ndir = \"\(dir.path)/cache\"\nmax_age = \"9223372036854775807d\"\n", in: dir)
        for command in [["config", "check"], ["config", "show"], ["cache", "status"]] {
            let r = try CLI.run(command + ["--config", file.path])
            #expect(r.status == 3, "\(command): \(r.stderr)")
            #expect(r.stderr.contains("\(file.path):3:11: max_age must be at most 100 years"), "\(command): \(r.stderr)")
        }
    }

    @Test func anUnsetSecretStopsOnlyTheRemoteThatHasIt() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try write("""
            [cache]
            dir = "\(dir.path)/cache"
            [remote.slow]
            provider = "webdav"
            url = "http://127.0.0.1:1/dav/"
            password = "env:SLOW_PW"
            [remote.home]
            provider = "webdav"
            url = "http://127.0.0.1:1/home/"
            """, in: dir)
        let offline = try CLI.run(["ls", "--offline", "--remote", "home", "--config", file.path])
        #expect(offline.status == 0, "stderr: \(offline.stderr)")
        let status = try CLI.run(["cache", "status", "--config", file.path])
        #expect(status.status == 0, "stderr: \(status.stderr)")
        let check = try CLI.run(["config", "check", "--config", file.path])
        #expect(check.status == 0, "stderr: \(check.stderr)")
        #expect(check.stderr.contains("warning: \(file.path):6:12: remote.slow.password refers to environment variable SLOW_PW, which is not set"),
                "stderr: \(check.stderr)")
        let used = try CLI.run(["ls", "--remote", "slow", "--config", file.path])
        #expect(used.status == 3, "stderr: \(used.stderr)")
        #expect(used.stderr.contains("\(file.path):6:12: remote.slow.password refers to environment variable SLOW_PW"), "stderr: \(used.stderr)")
        let set = try CLI.run(["config", "show", "--config", file.path], environment: ["SLOW_PW": "s3cret-value"])
        #expect(set.status == 0 && !set.stdout.contains("s3cret-value") && set.stdout.contains("password = \"env:SLOW_PW\""),
                "stdout: \(set.stdout)")
    }

    @Test func showSaysWhichCredentialIsInEffect() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let state = dir.appendingPathComponent("state")
        let file = try write("""
            [remote.conf]
            provider = "webdav"
            url = "https://dav.local/"
            user = "me"
            password = "hunter2-secret"
            [remote.cmd]
            provider = "webdav"
            url = "https://dav.local/"
            password_command = "echo pw"
            [remote.anon]
            provider = "webdav"
            url = "https://dav.local/"
            [remote.unset]
            provider = "webdav"
            url = "https://dav.local/"
            password = "env:NOT_SET_HERE"
            [remote.box]
            provider = "dropbox"
            [remote.stored]
            provider = "dropbox"
            """, in: dir)
        // What `cloudsync login stored` leaves behind (the store's documented file format).
        let tokens = state.appendingPathComponent("cloudsync/tokens", isDirectory: true)
        try FileManager.default.createDirectory(at: tokens, withIntermediateDirectories: true)
        try #"{"provider": "dropbox", "access_token": "sl.stored-token", "refresh_token": "stored-refresh"}"#
            .write(to: tokens.appendingPathComponent("stored.json"), atomically: true, encoding: .utf8)
        let env = ["XDG_STATE_HOME": state.path]
        let r = try CLI.run(["config", "show", "--config", file.path], environment: env)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(!r.stdout.contains("hunter2-secret") && !r.stdout.contains("stored-token") && !r.stdout.contains("stored-refresh"))
        func note(_ remote: String) -> String? {
            let lines = r.stdout.components(separatedBy: "\n")
            guard let at = lines.firstIndex(of: "[remote.\(remote)]"), at + 1 < lines.count else { return nil }
            return lines[at + 1]
        }
        #expect(note("conf") == "# credential: config (password)")
        #expect(note("cmd") == "# credential: config (password_command)")
        #expect(note("anon")?.hasPrefix("# credential: none (anonymous): if the server asks for a password, run cloudsync login anon (or set password / password_command)") == true)
        #expect(note("unset") == "# credential: none here: remote.unset.password refers to environment variable NOT_SET_HERE, which is not set")
        #expect(note("box") == "# credential: none: run cloudsync login box (or set refresh_token / access_token)")
        #expect(note("stored")?.hasPrefix("# credential: stored login (\(tokens.path)/stored.json)") == true, "\(String(describing: note("stored")))")
    }

    @Test func aFolderGivenAsConfigIsNamedAsSuch() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try CLI.run(["config", "check", "--config", dir.path])
        #expect(r.status == 3)
        #expect(r.stderr.contains("\(dir.path): this is a folder, not a configuration file"), "stderr: \(r.stderr)")
    }

    @Test func relativeCacheDirIsResolvedAgainstTheConfigFilesFolder() throws {
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = try write("[cache]\ndir = \"music-cache\"\n", in: dir)
        let r = try CLI.run(["config", "show", "--config", file.path])
        #expect(r.status == 0 && r.stdout.contains("dir = \"\(dir.path)/music-cache\""), "\(r.stdout)\(r.stderr)")
        let home = try CLI.run(["config", "show", "--config", try write("[cache]\ndir = \"$HOME/c\"\n", in: dir).path],
                               environment: ["HOME": "/home/someone"])
        #expect(home.stdout.contains("dir = \"/home/someone/c\""), "\(home.stdout)\(home.stderr)")
        let refused = try CLI.run(["config", "check", "--config", try write("[cache]\ndir = \"$XDG_CACHE_HOME/c\"\n", in: dir).path])
        #expect(refused.status == 3 && refused.stderr.contains(":2:7: dir \"$XDG_CACHE_HOME/c\": only ~ and $HOME are expanded"), "\(refused.stderr)")
    }

    @Test func theExampleConfigWarnsThatItsHostIsAPlaceholder() throws {
        let r = try CLI.run(["config", "check", "--config", ConfigExample.url.path])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("remote nas points at nas.example.org, a placeholder host from config.example.toml"), "stderr: \(r.stderr)")
        let real = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: real) }
        let file = try write("[remote.nas]\nprovider = \"webdav\"\nurl = \"https://nas.home.arpa/dav/\"\n", in: real)
        #expect(try CLI.run(["config", "check", "--config", file.path]).stderr.isEmpty)
    }

    /// The variables config.example.toml refers to.
    static let exampleEnvironment = [
        "DROPBOX_CLIENT_ID": "d", "GDRIVE_CLIENT_ID": "g", "GDRIVE_CLIENT_SECRET": "gs", "ONEDRIVE_CLIENT_ID": "o",
        "YANDEX_CLIENT_ID": "y", "YANDEX_CLIENT_SECRET": "ys", "NAS_PASSWORD": "np",
    ]

    /// #19.11's fuzz run against the binary: generated and mutated configs through `config check` and `config show`,
    /// each under a 10 s `timeout`. Exit codes other than 0 and 3 (a trap is 128+signal, a hang 124/137) fail.
    @Test func fuzzedConfigsNeverCrashOrHangTheBinary() throws {
        let seed = ProcessInfo.processInfo.environment["CLOUDSYNC_FUZZ_SEED"].flatMap(UInt64.init) ?? 19_11
        var random = SeededRandom(seed: seed)
        let dir = try CLI.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let example = Array(try ConfigExample.uncommented().utf8)
        var outcomes: [Int32: Int] = [:]
        for iteration in 0..<300 {
            let bytes = iteration % 2 == 0 ? ConfigExample.mutate(example, using: &random)
                : Array(ConfigGenerator.document(using: &random).utf8)
            let file = dir.appendingPathComponent("fuzz-\(iteration).toml")
            try Data(bytes).write(to: file)
            for command in [["config", "check"], ["config", "show"]] {
                let r = try CLI.run(["-s", "KILL", "10", CLI.executable.path] + command + ["--config", file.path],
                                    environment: Self.exampleEnvironment.merging(["XDG_STATE_HOME": dir.path]) { $1 },
                                    program: URL(fileURLWithPath: "/usr/bin/timeout"))
                outcomes[r.status, default: 0] += 1
                if r.status != 0 && r.status != 3 {
                    Issue.record("seed \(seed) iteration \(iteration) \(command): exit \(r.status) (file kept at \(file.path)): \(r.stderr.prefix(300))")
                    return
                }
                if r.status == 3 && !r.stderr.contains(file.path + ":") {
                    Issue.record("seed \(seed) iteration \(iteration) \(command): error without the file: \(r.stderr.prefix(300))")
                    return
                }
            }
            try FileManager.default.removeItem(at: file)
        }
        print("config fuzz (binary, seed \(seed)): exit codes \(outcomes.sorted { $0.key < $1.key })")
        #expect((outcomes[0] ?? 0) > 0 && (outcomes[3] ?? 0) > 0, "\(outcomes)")
    }
}

/// Random configurations built from the schema's keys, with values of every shape: good ones, the wrong type,
/// out-of-range and overflowing numbers, long dotted keys and headers, long arrays.
enum ConfigGenerator {
    static let sections: [(String, [String])] = [
        ("cache", ["dir", "max_size", "min_free", "max_age", "checkpoint"]),
        ("pull", ["jobs", "chunk_size", "segments", "segment_threshold", "bwlimit", "retries", "head_first", "head_seconds", "shorten_heads", "api_timeout"]),
        ("audio", ["extensions"]),
        ("remote.r", ["provider", "root", "url", "user", "password", "password_command", "auth", "api_url", "client_id",
                      "access_token", "refresh_token", "listing", "acknowledge_abuse", "include", "exclude", "min_size", "max_age"]),
    ]

    static let values = [
        "1", "0", "-1", "9223372036854775807", "-9223372036854775808", "99999999999999999999", "1e308", "inf", "nan", "1.5",
        "\"8MiB\"", "\"10GiB\"", "\"9223372036854775807d\"", "\"1e400s\"", "\"90d\"", "\"off\"", "\"9000000000000TiB\"",
        "\"2MiB/s\"", "\"\"", "\"webdav\"", "\"dropbox\"", "\"http://127.0.0.1:1/\"", "\"https://u:p@h.local/\"", "\"env:NAS_PASSWORD\"",
        "\"env:UNSET_VAR\"", "\"~/x\"", "\"$HOME/x\"", "\"$OTHER/x\"", "\"relative/dir\"", "true", "[\"mp3\", \"flac\"]", "[1, 2]",
        "{a = 1}", "1979-05-27T07:32:00Z", "\"basic\"", "\"walk\"", "[\"*.mp3\", \"**/live/**\"]",
    ]

    static func document(using random: inout SeededRandom) -> String {
        var lines: [String] = []
        for _ in 0..<Int.random(in: 1...5, using: &random) {
            let (section, keys) = sections.randomElement(using: &random) ?? sections[0]
            switch Int.random(in: 0..<12, using: &random) {
            case 0: lines.append("[" + Array(repeating: "t", count: Int.random(in: 100...60_000, using: &random)).joined(separator: ".") + "]")
            case 1: lines.append("[[" + section + "]]")
            default: lines.append("[" + section + "]")
            }
            if section.hasPrefix("remote"), Bool.random(using: &random) { lines.append("provider = \"webdav\"\nurl = \"http://127.0.0.1:1/\"") }
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                let key = keys.randomElement(using: &random) ?? "jobs"
                switch Int.random(in: 0..<16, using: &random) {
                case 0: lines.append(Array(repeating: key, count: Int.random(in: 2...100_000, using: &random)).joined(separator: ".") + " = 1")
                case 1: lines.append("\(key) = [" + (0..<Int.random(in: 1...50_000, using: &random)).map { "\"e\($0)\"" }.joined(separator: ",") + "]")
                case 2: lines.append("\(key) = " + String(repeating: "[", count: Int.random(in: 1...300, using: &random)))
                default: lines.append("\(key) = " + (values.randomElement(using: &random) ?? "1"))
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
