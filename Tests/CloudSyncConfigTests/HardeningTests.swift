import CloudSyncConfig
import CloudSyncCore
import Foundation
import Testing

/// #19.11: inputs that crashed or stalled the parser; each is now a positioned error (or parses), in linear time.
@Suite("Configuration: hostile sizes of keys, headers and arrays")
struct HostileShapeTests {
    private func error(_ text: String) -> ConfigError? {
        do {
            _ = try Configuration.parse(text: text, file: "h.toml", environment: [:])
            return nil
        } catch {
            return error
        }
    }

    @Test("a 100,000-part dotted key is an error at the part beyond the limit")
    func longDottedKey() throws {
        let text = "[cache]\n" + Array(repeating: "a", count: 100_000).joined(separator: ".") + " = 1\n"
        let failure = try #require(error(text))
        #expect(failure.line == 2)
        #expect(failure.column == 2 * TOMLParser.maximumNesting + 1)
        #expect(failure.message.contains("more than \(TOMLParser.maximumNesting) dotted parts"))
    }

    @Test("a 50,000-part table header is an error, as is an array-of-tables header")
    func longHeader() throws {
        for open in ["[", "[["] {
            let text = open + Array(repeating: "t", count: 50_000).joined(separator: ".") + String(repeating: "]", count: open.count) + "\n"
            let failure = try #require(error(text), "\(open)")
            #expect(failure.line == 1 && failure.message.contains("dotted parts"), "\(failure)")
        }
    }

    @Test("a header, inline tables and dotted keys together nest at most maximumNesting tables")
    func combinedNesting() throws {
        let header = "[" + Array(repeating: "h", count: 100).joined(separator: ".") + "]\n"
        let key = Array(repeating: "k", count: 60).joined(separator: ".")
        let failure = try #require(error(header + key + " = 1\n"))
        #expect(failure.line == 2 && failure.column == 1 && failure.message.contains("nests tables more than"), "\(failure)")
        // Within the limit it parses (and is then rejected by the schema as an unknown section).
        let within = try #require(error(header + Array(repeating: "k", count: 20).joined(separator: ".") + " = 1\n"))
        #expect(within.message.contains("unknown table [h]"), "\(within)")
        let inline = "x = " + String(repeating: "{a.b.c.d = ", count: 40) + "1" + String(repeating: "}", count: 40) + "\n"
        #expect(try #require(error(inline)).message.contains("nests tables more than"))
    }

    @Test("100,000 extensions on one line and 20,000 array-of-tables headers parse")
    func manyElements() throws {
        let list = (0..<100_000).map { "\"e\($0)\"" }.joined(separator: ", ")
        let config = try Configuration.parse(text: "[audio]\nextensions = [\(list)]\n", file: "h.toml", environment: [:])
        #expect(config.audio.extensions.count == 100_000)
        let tables = String(repeating: "[[x]]\na = 1\n", count: 20_000)
        let table = try TOMLParser.parse(tables, file: "h.toml")
        guard case .array(let elements) = table["x"]?.value else { Issue.record("x is not an array"); return }
        #expect(elements.count == 20_000)
        #expect(elements.last?.position == TOMLPosition(line: 39_999, column: 1))
    }

    @Test("a very long line still reports the right column")
    func columnOnALongLine() throws {
        let text = "[audio]\nextensions = [" + String(repeating: "\"mp3\", ", count: 30_000) + "mp3]\n"
        let failure = try #require(error(text))
        #expect(failure.line == 2 && failure.column == 15 + 30_000 * 7, "\(failure)")
    }

    @Test("max_age of 9223372036854775807d is refused at its position, so show and status never see it")
    func hugeDuration() throws {
        let failure = try #require(error("[cache]\nmax_age = \"9223372036854775807d\"\n"))
        #expect(failure.description == "h.toml:2:11: max_age must be at most 100 years (\"36525d\"), got \"9223372036854775807d\"")
        let timeout = try #require(error("[pull]\napi_timeout = 9223372036854775807\n"))
        #expect(timeout.line == 2 && timeout.column == 15)
        let rate = try #require(error("[pull]\nbwlimit = \"9000000000TiB/s\"\n"))
        #expect(rate.line == 2 && rate.message.hasPrefix("bwlimit must"))
        // The largest accepted values render and parse back.
        let config = try Configuration.parse(text: "[cache]\nmax_age = \"36525d\"\nmax_size = \"1048576TiB\"\n", file: "h.toml", environment: [:])
        let again = try Configuration.parse(text: config.renderMasked(), file: "again.toml", environment: [:])
        #expect(again.cache.maxAge == 36525 * 86400 && again.cache.maxSize == 1 << 60)
    }
}

/// #20.7 and #20.14: secrets resolved per remote, paths resolved as documented.
@Suite("Configuration: secrets and paths")
struct SecretsAndPathsTests {
    static let text = """
    [remote.cron]
    provider = "webdav"
    url = "https://dav.local/"
    password = "env:UNSET_PW"
    [remote.other]
    provider = "webdav"
    url = "https://other.local/"
    password = "env:SET_PW"
    """

    @Test("an unset env: secret fails only the remote that has it, at its position")
    func unsetSecretIsDeferred() throws {
        let config = try Configuration.parse(text: Self.text, file: "s.toml", environment: ["SET_PW": "pw"])
        let cron = try #require(config.remotes.first)
        #expect(cron.password == nil)
        #expect(cron.unsetSecrets.map(\.variable) == ["UNSET_PW"])
        #expect(throws: ConfigError.self) { try cron.requireSecrets() }
        do {
            try cron.requireSecrets()
        } catch {
            #expect(error.description.hasPrefix("s.toml:4:12: remote.cron.password refers to environment variable UNSET_PW, which is not set"))
        }
        let other = config.remotes[1]
        #expect(other.password == "pw" && other.unsetSecrets.isEmpty)
        try other.requireSecrets()
        let shown = config.renderMasked()
        #expect(shown.contains("password = \"env:UNSET_PW\"") && shown.contains("password = \"env:SET_PW\"") && !shown.contains("\"pw\""))
        // Not secrets: an unset variable there is still an error when the file is read.
        #expect(throws: ConfigError.self) {
            try Configuration.parse(text: "[remote.a]\nprovider = \"webdav\"\nurl = \"env:UNSET_URL\"\n", file: "s.toml", environment: [:])
        }
    }

    static let paths: [(String, String?)] = [
        ("/var/cache/music", "/var/cache/music"), ("~", "/home/t"), ("~/c", "/home/t/c"), ("$HOME/c", "/home/t/c"),
        ("${HOME}/c", "/home/t/c"), ("$HOME", "/home/t"), ("cache", "/etc/cs/cache"), ("./a/../b", "/etc/cs/b"),
        ("~bob/c", nil), ("$XDG_CACHE_HOME/c", nil), ("/x/${USER}/c", nil), ("$HOMER/c", nil), ("/price$5", "/price$5"),
    ]

    @Test("cache.dir: ~ and $HOME expanded, relative to the config file's folder, other variables refused", arguments: paths)
    func cacheDir(dir: String, expected: String?) {
        let text = "[cache]\ndir = \(Configuration.quotedForTests(dir))\n"
        let result = Result { () throws(ConfigError) in
            try Configuration.parse(text: text, file: "/etc/cs/config.toml", environment: ["HOME": "/home/t"]).cache.dir.path
        }
        switch (result, expected) {
        case (.success(let path), .some(let want)): #expect(path == want)
        case (.failure(let error), .none): #expect(error.line == 2 && error.column == 7 && error.message.hasPrefix("dir \""), "\(error)")
        default: Issue.record("\(dir): got \(result), expected \(String(describing: expected))")
        }
    }

    @Test("--config pointing at a folder says so")
    func folderAsConfig() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cs-folder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            _ = try Configuration.load(path: dir, environment: [:])
            Issue.record("a folder loaded as a configuration")
        } catch {
            #expect(error.message.hasPrefix("this is a folder, not a configuration file"), "\(error)")
            #expect(error.message.contains(dir.appendingPathComponent("config.toml").path))
        }
    }
}

extension Configuration {
    static func quotedForTests(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

/// #25: a remote's filter keys compile into its `PathFilter`; mistakes are errors at their position.
@Suite("Configuration: remote filters")
struct RemoteFilterTests {
    @Test("include, exclude, filter_from, sizes and ages make the remote's filter")
    func filterKeys() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cs-filter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "# rules\n- *.m4b\n".write(to: dir.appendingPathComponent("rules.txt"), atomically: true, encoding: .utf8)
        let text = """
            [remote.r]
            provider = "webdav"
            url = "https://dav.local/"
            include = "Album/**"
            exclude = ["*.wav"]
            filter_from = "rules.txt"
            min_size = "1KiB"
            max_age = "30d"
            ignore_case = true
            """
        let config = try Configuration.parse(text: text, file: dir.appendingPathComponent("c.toml").path, environment: [:])
        let remote = try #require(config.remotes.first)
        #expect(remote.filterKeys.filterFrom?.path == dir.appendingPathComponent("rules.txt").path)
        let now = Date()
        #expect(remote.filter.includes("album/a.FLAC", size: 2048, modified: now, now: now))
        #expect(!remote.filter.includes("Other/a.flac", size: 2048, modified: now, now: now))
        #expect(!remote.filter.includes("Other/a.m4b", size: 2048, modified: now, now: now))
        #expect(!remote.filter.includes("Other/a.WAV", size: 2048, modified: now, now: now))
        #expect(!remote.filter.includes("Album/a.flac", size: 10, modified: now, now: now))
        #expect(!remote.filter.includes("Album/a.flac", size: 2048, modified: now.addingTimeInterval(-31 * 86400), now: now))
        let shown = config.renderMasked()
        #expect(shown.contains("include = [\"Album/**\"]") && shown.contains("max_age = \"30d\"") && shown.contains("ignore_case = true"))
        let again = try Configuration.parse(text: shown, file: dir.appendingPathComponent("again.toml").path, environment: [:])
        #expect(again.remotes.first?.filter == remote.filter)
    }

    static let filterMistakes: [(String, String)] = [
        ("include = [1]", "c.toml:4:12: include must be an array of globs"),
        ("exclude = [\"a\", \"[x\"]", "c.toml:4:17: "),
        ("exclude = \"{{re}}\"", "c.toml:4:11: regular expressions"),
        ("filter_from = \"missing.txt\"", "c.toml:4:15: filter_from: cannot read"),
        ("min_size = \"huge\"", "c.toml:4:12: min_size must be a size"),
        ("min_age = \"9999999d\"", "c.toml:4:11: min_age must be at most 100 years"),
        ("ignore_case = \"yes\"", "c.toml:4:15: ignore_case must be a boolean"),
    ]

    @Test("filter mistakes are errors at their position", arguments: filterMistakes)
    func mistakes(line: String, expected: String) {
        let text = "[remote.r]\nprovider = \"webdav\"\nurl = \"https://dav.local/\"\n\(line)\n"
        do {
            _ = try Configuration.parse(text: text, file: "c.toml", environment: [:])
            Issue.record("\(line) was accepted")
        } catch {
            #expect(error.description.hasPrefix(expected), "\(error)")
        }
    }
}
