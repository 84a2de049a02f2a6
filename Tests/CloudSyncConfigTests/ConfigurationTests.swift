import CloudSyncConfig
import CloudSyncCore
import Foundation
import Testing

private let baseEnvironment = ["HOME": "/home/tester"]

private func parse(_ text: String, environment: [String: String] = baseEnvironment) throws(ConfigError) -> Configuration {
    try Configuration.parse(text: text, file: "t.toml", environment: environment)
}

/// The error `text` produces, or nil when it parses.
private func failure(_ text: String, environment: [String: String] = baseEnvironment) -> ConfigError? {
    do {
        _ = try parse(text, environment: environment)
        return nil
    } catch {
        return error
    }
}

@Suite("Configuration schema")
struct ConfigurationTests {
    @Test("an empty file gives every default")
    func defaults() throws {
        let config = try parse("")
        #expect(config.cache.dir.path == "/home/tester/.cache/cloudsync")
        #expect(config.cache.maxSize == 10 * 1024 * 1024 * 1024)
        #expect(config.cache.maxAge == nil)
        #expect(config.cache.minFree == 1 << 30)
        #expect(config.cache.checkpoint == 8 * 1024 * 1024)
        #expect(config.pull.headSeconds == 10)
        #expect(config.pull.jobs == 4)
        #expect(config.pull.chunkSize == 8 * 1024 * 1024)
        #expect(config.pull.segments == 4)
        #expect(config.pull.segmentThreshold == 64 * 1024 * 1024)
        #expect(config.pull.bwlimit == nil)
        #expect(config.pull.retries == 10)
        #expect(config.pull.headFirst == 512 * 1024)
        #expect(config.pull.apiTimeout == 300)
        #expect(config.audio == AudioFilter(extensions: AudioFilter.defaultExtensions))
        #expect(config.remotes.isEmpty)
        #expect(config.file == "t.toml")
    }

    @Test("the cache directory follows XDG_CACHE_HOME, then HOME, and expands ~")
    func cacheDirectory() throws {
        #expect(try parse("", environment: ["XDG_CACHE_HOME": "/x/cache", "HOME": "/h"]).cache.dir.path == "/x/cache/cloudsync")
        #expect(try parse("", environment: ["XDG_CACHE_HOME": "", "HOME": "/h"]).cache.dir.path == "/h/.cache/cloudsync")
        #expect(try parse("[cache]\ndir = \"~/music-cache\"", environment: ["HOME": "/h"]).cache.dir.path == "/h/music-cache")
        #expect(try parse("[cache]\ndir = \"/srv/c\"").cache.dir.path == "/srv/c")
    }

    @Test("every key is read")
    func everyKey() throws {
        let text = """
            [cache]
            dir = "/var/cache/cs"
            max_size = "2GiB"
            max_age = "12h"
            checkpoint = "1MiB"
            [pull]
            jobs = 8
            chunk_size = "4MiB"
            segments = 8
            segment_threshold = "256MiB"
            bwlimit = "2MiB/s"
            retries = 0
            head_first = "256KiB"
            api_timeout = "90s"
            [audio]
            extensions = ["MP3", ".flac"]
            [remote.g]
            provider = "gdrive"
            root = "/Music/"
            api_url = "http://127.0.0.1:8080"
            content_url = "http://127.0.0.1:8081"
            token_url = "http://127.0.0.1:8082/token"
            auth_url = "http://127.0.0.1:8082/auth"
            device_url = "http://127.0.0.1:8082/device"
            client_id = "id"
            client_secret = "cs"
            access_token = "at"
            refresh_token = "rt"
            acknowledge_abuse = true
            [remote.dav]
            provider = "webdav"
            url = "https://dav.example/remote.php/dav/"
            user = "me"
            password = "pw"
            password_command = "pass show dav"
            access_token = "dav-token"
            auth = "bearer"
            """
        let config = try parse(text)
        #expect(config.cache == CacheSettings(dir: URL(fileURLWithPath: "/var/cache/cs"), maxSize: 2 << 30, maxAge: 43200, checkpoint: 1 << 20))
        #expect(config.pull == PullSettings(jobs: 8, chunkSize: 4 << 20, segments: 8, segmentThreshold: 256 << 20,
                                            bwlimit: 2 << 20, retries: 0, headFirst: 256 << 10, apiTimeout: 90))
        #expect(config.audio.isAudio(name: "a.mp3") && config.audio.isAudio(name: "b.FLAC") && !config.audio.isAudio(name: "c.ogg"))
        #expect(config.remotes.map(\.name) == ["g", "dav"])
        let g = config.remotes[0]
        #expect(g.provider == "gdrive" && g.root == "/Music" && g.line == 17)
        #expect(g.apiURL?.absoluteString == "http://127.0.0.1:8080")
        #expect(g.contentURL?.absoluteString == "http://127.0.0.1:8081")
        #expect(g.tokenURL?.absoluteString == "http://127.0.0.1:8082/token")
        #expect(g.authURL?.absoluteString == "http://127.0.0.1:8082/auth")
        #expect(g.deviceURL?.absoluteString == "http://127.0.0.1:8082/device")
        #expect(g.clientID == "id" && g.clientSecret == "cs" && g.accessToken == "at" && g.refreshToken == "rt")
        #expect(g.options == ProviderOptions(["acknowledge_abuse": .boolean(true)]))
        let dav = config.remotes[1]
        #expect(dav.provider == "webdav" && dav.root == "/" && dav.line == 30)
        #expect(dav.url?.absoluteString == "https://dav.example/remote.php/dav/")
        #expect(dav.user == "me" && dav.password == "pw" && dav.passwordCommand == "pass show dav" && dav.options["auth"] == .text("bearer"))
        #expect(dav.accessToken == "dav-token")
    }

    static let schemaErrors: [(String, String)] = [
        ("[pull]\nchunksize = \"8MiB\"\n", "t.toml:2:1: unknown key 'chunksize' in [pull]; did you mean 'chunk_size'?"),
        ("[pull]\nzzzzzzzz = 1", "t.toml:2:1: unknown key 'zzzzzzzz' in [pull]; valid keys: jobs, chunk_size, segments, segment_threshold, bwlimit, retries, head_first, head_seconds, shorten_heads, api_timeout, delete"),
        ("[pull]\napi_timeout = \"soon\"", "t.toml:2:15: api_timeout must be a duration like \"90d\", \"12h\", \"30m\" or \"45s\", got \"soon\""),
        ("[cache]\n  maxsize = \"1GiB\"", "t.toml:2:3: unknown key 'maxsize' in [cache]; did you mean 'max_size'?"),
        ("[pul]\njobs = 4\n", "t.toml:1:2: unknown table [pul]; did you mean [pull]?"),
        ("[remotes.a]\nprovider = \"dropbox\"", "t.toml:1:2: unknown table [remotes]; did you mean [remote]?"),
        ("jobs = 4", "t.toml:1:1: unknown key 'jobs' at the top level; valid sections: [cache], [pull], [audio], [remote.NAME]"),
        ("pull = 3", "t.toml:1:8: pull must be a table ([pull]), got integer"),
        ("[pull]\njobs = \"4\"", "t.toml:2:8: jobs must be an integer, got string"),
        ("[pull]\njobs = 65", "t.toml:2:8: jobs must be between 1 and 64, got 65"),
        ("[pull]\njobs = 0", "t.toml:2:8: jobs must be between 1 and 64, got 0"),
        ("[pull]\nretries = 2.5", "t.toml:2:11: retries must be an integer, got float"),
        ("[cache]\nmax_size = \"ten\"", "t.toml:2:12: max_size must be a size like \"512KiB\", \"8MiB\" or \"10GiB\" (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), got \"ten\""),
        ("[cache]\nmax_size = true", "t.toml:2:12: max_size must be a size like \"8MiB\", got boolean"),
        ("[remote.a]\nprovider = \"webdav\"\nurl = \"http://me:s3cr%2Fet@h/dav/\"\npassword = \"other\"",
         "t.toml:3:7: url carries a password that differs from the configured one; keep one of them (better: remove it from url and use user and password_command)"),
        ("[remote.a]\nprovider = \"webdav\"\nurl = \"http://me@h/dav/\"\nuser = \"you\"",
         "t.toml:3:7: url carries a user name that differs from the configured one; keep one of them (better: remove it from url and use user and password_command)"),
        ("[cache]\nmax_size = \"1048577TiB\"", "t.toml:2:12: max_size must be at most 1 EiB (\"1048576TiB\"), got \"1048577TiB\""),
        ("[pull]\nchunk_size = \"0\"", "t.toml:2:14: chunk_size must be greater than zero, got \"0\""),
        ("[pull]\nsegments = 0", "t.toml:2:12: segments must be between 1 and 16 (1 = one connection per file), got 0"),
        ("[pull]\nsegments = 17", "t.toml:2:12: segments must be between 1 and 16 (1 = one connection per file), got 17"),
        ("[pull]\nsegments = \"4\"", "t.toml:2:12: segments must be an integer, got string"),
        ("[pull]\nsegment_threshold = \"big\"", "t.toml:2:21: segment_threshold must be a size like \"512KiB\", \"8MiB\" or \"10GiB\" (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), got \"big\""),
        ("[pull]\nsegment_threshold = 0", "t.toml:2:21: segment_threshold must be greater than zero, got 0"),
        ("[cache]\nmax_age = \"3x\"", "t.toml:2:11: max_age must be a duration like \"90d\", \"12h\", \"30m\" or \"45s\", got \"3x\""),
        ("[pull]\nbwlimit = \"fast\"", "t.toml:2:11: bwlimit must be \"off\" or a rate like \"2MiB/s\", got \"fast\""),
        ("[remote.a]\nprovider = \"dropbox\"\napi_url = \"ftp://x.org\"", "t.toml:3:11: api_url must be an http or https URL, got scheme 'ftp'"),
        ("[remote.a]\nprovider = \"yandex\"\ntoken_url = \"https:///token\"", "t.toml:3:13: token_url must be an http or https URL with a host, like \"https://host/path\""),
        ("[remote.a]\nprovider = \"yandex\"\nauth_url = \"no url\"", "t.toml:3:12: auth_url must be an http or https URL like \"https://host/path\"; this is not a URL"),
        ("[remote.a]\nprovider = \"dropbx\"", "t.toml:2:12: unknown provider \"dropbx\" (did you mean 'dropbox'?); valid providers: dropbox, gdrive, onedrive, yandex, webdav"),
        ("[remote.a]\nprovider = \"s3\"", "t.toml:2:12: unknown provider \"s3\"; valid providers: dropbox, gdrive, onedrive, yandex, webdav"),
        ("[remote.a]\nprovider = 1", "t.toml:2:12: provider must be a string, got integer"),
        ("[remote.\".hidden\"]\nprovider = \"dropbox\"", "t.toml:1:9: invalid remote name \".hidden\": use letters, digits, '-', '_' and '.' (not first)"),
        ("[remote.\"my music\"]\nprovider = \"dropbox\"", "t.toml:1:9: invalid remote name \"my music\": use letters, digits, '-', '_' and '.' (not first)"),
        ("[remote]\na = 1", "t.toml:2:5: remote.a must be a table ([remote.a]), got integer"),
        ("remote = \"x\"", "t.toml:1:10: remote must hold tables like [remote.music], got string"),
        ("\n[remote.a]\nroot = \"/x\"", "t.toml:2:1: remote \"a\" has no provider; add provider = \"dropbox\" (or gdrive, onedrive, yandex, webdav)"),
        ("[remote.d]\nprovider = \"webdav\"\nuser = \"me\"", "t.toml:1:1: webdav remote \"d\" has no url; add url = \"https://host/path/\""),
        ("[remote.a]\nprovider = \"dropbox\"\nclientid = \"x\"", "t.toml:3:1: unknown key 'clientid' in [remote.a]; did you mean 'client_id'?"),
        ("[remote.a]\nprovider = \"dropbox\"\nurl = \"https://x.org\"", "t.toml:3:1: key 'url' applies only to webdav remotes, and \"a\" is a dropbox remote"),
        ("[remote.a]\nprovider = \"webdav\"\nurl = \"https://x.org\"\nacknowledge_abuse = true", "t.toml:4:1: key 'acknowledge_abuse' applies only to gdrive remotes, and \"a\" is a webdav remote"),
        ("[remote.a]\nprovider = \"gdrive\"\nacknowledge_abuse = \"yes\"", "t.toml:3:21: acknowledge_abuse must be a boolean (true or false), got string"),
        ("[remote.a]\nprovider = \"webdav\"\nurl = \"https://x.org\"\nauth = \"digest\"", "t.toml:4:8: auth must be one of \"basic\", \"bearer\", \"oauth\", got \"digest\""),
        // Secrets (client_secret, password, …) are resolved per remote when used (SecretsAndPathsTests); other keys at once.
        ("[remote.a]\nprovider = \"dropbox\"\nclient_id = \"env:NOPE\"", "t.toml:3:13: remote.a.client_id refers to environment variable NOPE, which is not set; export NOPE or write the value here"),
        ("[remote.a]\nprovider = \"dropbox\"\nclient_id = \"env:\"", "t.toml:3:13: remote.a.client_id says env: but names no variable; write env:VARIABLE"),
        ("[audio]\nextensions = \"mp3\"", "t.toml:2:14: extensions must be an array of strings like [\"mp3\", \"flac\"], got string"),
        ("[audio]\nextensions = [\"mp3\", 3]", "t.toml:2:22: extensions must contain only strings, got integer"),
        ("[audio]\nextensions = [\"a/b\"]", "t.toml:2:15: \"a/b\" is not a file extension; write it like \"flac\""),
        ("[pull]\njobs 4", "t.toml:2:6: expected '=' after key \"jobs\", found '4'"),
        ("[pull]\njobs = 4\njobs = 5", "t.toml:3:1: key jobs is defined twice; it was first defined at line 2 as an integer value"),
    ]

    @Test("each schema error has one message at the exact file:line:column", arguments: schemaErrors)
    func schemaError(text: String, expected: String) {
        let error = failure(text)
        #expect(error?.description == expected)
        #expect(error?.exitCode == .config)
    }

    @Test("env: reads the environment, and renderMasked shows the reference, not the value")
    func environmentSubstitution() throws {
        let text = """
            [cache]
            dir = "env:MUSIC_CACHE"
            [remote.box]
            provider = "dropbox"
            client_id = "env:BOX_ID"
            refresh_token = "env:BOX_REFRESH"
            access_token = "plain-access-token"
            """
        let environment = ["HOME": "/h", "MUSIC_CACHE": "/srv/cache", "BOX_ID": "id-123", "BOX_REFRESH": "refresh-secret-xyz"]
        let config = try parse(text, environment: environment)
        #expect(config.cache.dir.path == "/srv/cache")
        #expect(config.remotes[0].clientID == "id-123")
        #expect(config.remotes[0].refreshToken == "refresh-secret-xyz")
        #expect(config.environmentReferences == [
            "cache.dir": "MUSIC_CACHE", "remote.box.client_id": "BOX_ID", "remote.box.refresh_token": "BOX_REFRESH",
        ])
        let shown = config.renderMasked()
        #expect(shown.contains("dir = \"env:MUSIC_CACHE\""))
        #expect(shown.contains("client_id = \"env:BOX_ID\""))
        #expect(shown.contains("refresh_token = \"env:BOX_REFRESH\""))
        #expect(shown.contains("access_token = \"********\""))
        #expect(!shown.contains("refresh-secret-xyz") && !shown.contains("plain-access-token") && !shown.contains("id-123"))
    }

    @Test("renderMasked masks every secret and parses back to the same settings")
    func renderRoundTrip() throws {
        let text = """
            [cache]
            max_size = "1500MiB"
            max_age = "36h"
            [pull]
            jobs = 2
            bwlimit = "1.5MiB/s"
            [audio]
            extensions = ["flac", "mp3"]
            [remote."my.box"]
            provider = "dropbox"
            client_secret = "s1"
            [remote.dav]
            provider = "webdav"
            url = "http://127.0.0.1:9/dav/"
            password = "s2"
            """
        let config = try parse(text)
        let shown = config.renderMasked()
        #expect(!shown.contains("s1") && !shown.contains("s2"))
        #expect(shown.components(separatedBy: "\"********\"").count == 3)
        let again = try Configuration.parse(text: shown, file: "shown.toml", environment: baseEnvironment)
        #expect(again.cache == config.cache)
        #expect(again.pull == config.pull)
        #expect(again.audio == config.audio)
        #expect(again.remotes.map(\.name) == ["my.box", "dav"])
        #expect(again.remotes.map(\.provider) == ["dropbox", "webdav"])
        #expect(again.remotes[1].url == config.remotes[1].url)
        #expect(again.remotes[0].clientSecret == "********")
    }

    static let sizes: [(String, Int64?)] = [
        ("\"8MiB\"", 8 << 20), ("\"10GiB\"", 10 << 30), ("\"512KiB\"", 512 << 10), ("\"1.5GB\"", 1_500_000_000),
        ("\"300\"", 300), ("\"10 gib\"", 10 << 30), ("\"1k\"", 1024), ("\"2TB\"", 2_000_000_000_000), ("4096", 4096),
        ("\"0\"", nil), ("0", nil), ("-5", nil), ("\"-1MiB\"", nil), ("\"MiB\"", nil), ("\"1e999\"", nil),
        ("\"\"", nil), ("\"8 MiBs\"", nil), ("\"9000000TiB\"", nil), ("8.5", nil),
        ("\"1048576TiB\"", 1 << 60), ("\"1048577TiB\"", nil), ("9223372036854775807", nil), ("\"9223372036854775807\"", nil),
    ]

    @Test("sizes: units, spaces, bare bytes; zero, negative, empty and overflowing sizes rejected", arguments: sizes)
    func sizeParsing(literal: String, expected: Int64?) {
        let result = Result { () throws(ConfigError) in try parse("[pull]\nchunk_size = \(literal)").pull.chunkSize }
        switch (result, expected) {
        case (.success(let bytes), .some(let want)): #expect(bytes == want)
        case (.failure(let error), .none): #expect(error.line == 2 && error.column == 14 && error.message.hasPrefix("chunk_size must"))
        default: Issue.record("\(literal): got \(result), expected \(String(describing: expected))")
        }
    }

    static let durations: [(String, TimeInterval?)] = [
        ("\"90d\"", 7_776_000), ("\"12h\"", 43200), ("\"30m\"", 1800), ("\"45s\"", 45), ("\"1.5h\"", 5400),
        ("\"2w\"", 1_209_600), ("\"45\"", 45), ("60", 60), ("\"D\"", nil), ("\"0s\"", nil), ("\"-5s\"", nil),
        ("\"\"", nil), ("\"5 days\"", nil), ("0", nil), ("1.5", nil),
        ("\"36525d\"", 36525 * 86400), ("\"36526d\"", nil), ("\"9223372036854775807d\"", nil),
        ("9223372036854775807", nil), ("\"1e308w\"", nil),
    ]

    @Test("durations: s m h d w and bare seconds; zero, negative and unknown units rejected", arguments: durations)
    func durationParsing(literal: String, expected: TimeInterval?) {
        let result = Result { () throws(ConfigError) in try parse("[cache]\nmax_age = \(literal)").cache.maxAge }
        switch (result, expected) {
        case (.success(let seconds), .some(let want)): #expect(seconds == want)
        case (.failure(let error), .none): #expect(error.line == 2 && error.column == 11 && error.message.hasPrefix("max_age must"))
        default: Issue.record("\(literal): got \(result), expected \(String(describing: expected))")
        }
    }

    @Test("max_age off, min_free zero, head_seconds within 0...600")
    func budgetKeys() throws {
        let config = try parse("[cache]\nmax_age = \"OFF\"\nmin_free = \"0\"\n[pull]\nhead_seconds = 2.5")
        #expect(config.cache.maxAge == nil)
        #expect(config.cache.minFree == 0)
        #expect(config.pull.headSeconds == 2.5)
        #expect(try parse("[cache]\nmin_free = 0").cache.minFree == 0)
        for bad in ["head_seconds = 601", "head_seconds = -1", "head_seconds = \"10\"", "head_seconds = nan"] {
            #expect(throws: ConfigError.self, "\(bad)") { try parse("[pull]\n" + bad) }
        }
        #expect(config.pull.shortenHeads)
        #expect(try !parse("[pull]\nshorten_heads = false").pull.shortenHeads)
        #expect(throws: ConfigError.self) { try parse("[pull]\nshorten_heads = \"no\"") }
    }

    static let rates: [(String, Int64??)] = [
        ("off", .some(nil)), ("OFF", .some(nil)), ("2MiB/s", .some(2 << 20)), ("2MiB", .some(2 << 20)),
        ("500KB/s", .some(500_000)), ("0", nil), ("/s", nil), ("fast", nil),
    ]

    @Test("bandwidth limits", arguments: rates)
    func rateParsing(text: String, expected: Int64??) {
        let result = Result { () throws(ConfigError) in try parse("[pull]\nbwlimit = \"\(text)\"").pull.bwlimit }
        switch (result, expected) {
        case (.success(let rate), .some(let want)): #expect(rate == want)
        case (.failure(let error), .none): #expect(error.column == 11)
        default: Issue.record("\(text): got \(result), expected \(String(describing: expected))")
        }
    }

    static let validNames = ["music", "My-Music_2", "a.b", "x", "0"]
    static let invalidNames = [".dot", "my music", "ü", "a/b", "", "semi;colon"]

    @Test("remote names", arguments: validNames.map { ($0, true) } + invalidNames.map { ($0, false) })
    func remoteNames(name: String, valid: Bool) {
        let error = failure("[remote.\"\(name)\"]\nprovider = \"yandex\"")
        if valid {
            #expect(error == nil)
        } else {
            #expect(error?.description.hasPrefix("t.toml:1:9: invalid remote name") == true)
        }
    }
}

@Suite("Remote selection")
struct SelectionTests {
    let config: Configuration

    init() throws {
        config = try Configuration.parse(text: """
            [remote.a]
            provider = "dropbox"
            [remote.b]
            provider = "yandex"
            [remote.c]
            provider = "yandex"
            """, file: "t.toml", environment: baseEnvironment)
    }

    @Test("selections that succeed", arguments: [
        (nil, nil, ["a", "b", "c"]), ("b", nil, ["b"]), (nil, "yandex", ["b", "c"]), (nil, "Dropbox", ["a"]),
        ("c", "yandex", ["c"]),
    ] as [(String?, String?, [String])])
    func selects(remote: String?, provider: String?, names: [String]) throws {
        #expect(try config.select(remote: remote, provider: provider).map(\.name) == names)
    }

    @Test("selections that fail say why", arguments: [
        ("d", nil, "t.toml: unknown remote 'd'; configured remotes: a, b, c"),
        ("bb", nil, "t.toml: unknown remote 'bb'; configured remotes: a, b, c"),
        (nil, "gdrive", "t.toml: no remote uses provider gdrive; configured remotes: a (dropbox), b (yandex), c (yandex)"),
        (nil, "yandx", "t.toml: unknown provider 'yandx'; valid providers: dropbox, gdrive, onedrive, yandex, webdav; did you mean 'yandex'?"),
        ("a", "yandex", "t.toml:1:1: remote 'a' uses provider dropbox, not yandex"),
    ] as [(String?, String?, String)])
    func rejects(remote: String?, provider: String?, message: String) {
        #expect(throws: ConfigError.self) { try config.select(remote: remote, provider: provider) }
        do {
            _ = try config.select(remote: remote, provider: provider)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test("no remotes configured is a clear error")
    func noRemotes() throws {
        let empty = try Configuration.parse(text: "[pull]\njobs = 2", file: "t.toml", environment: baseEnvironment)
        do {
            _ = try empty.select(remote: nil, provider: nil)
            Issue.record("selected from an empty configuration")
        } catch {
            #expect(error.message.hasPrefix("no remotes are configured; add a [remote.NAME] section"))
        }
    }
}

@Suite("Configuration file locations")
struct LocationTests {
    @Test("config path resolution order", arguments: [
        ("/etc/cs.toml", [:], "/etc/cs.toml"),
        ("~/cs.toml", ["HOME": "/h"], "/h/cs.toml"),
        (nil, ["CLOUDSYNC_CONFIG": "/e/c.toml", "XDG_CONFIG_HOME": "/x"], "/e/c.toml"),
        (nil, ["CLOUDSYNC_CONFIG": "", "XDG_CONFIG_HOME": "/x", "HOME": "/h"], "/x/cloudsync/config.toml"),
        (nil, ["HOME": "/h"], "/h/.config/cloudsync/config.toml"),
        (nil, ["XDG_CONFIG_HOME": "relative", "HOME": "/h"], "/h/.config/cloudsync/config.toml"),
    ] as [(String?, [String: String], String)])
    func configPath(explicit: String?, environment: [String: String], expected: String) {
        #expect(ConfigLocation.resolve(explicit: explicit, environment: environment).path == expected)
    }

    @Test("state directory")
    func statePath() {
        #expect(StateLocation.resolve(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]).path == "/s/cloudsync")
        #expect(StateLocation.resolve(environment: ["HOME": "/h"]).path == "/h/.local/state/cloudsync")
    }

    @Test("a missing file says where it looked and what to do")
    func missingFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-missing-\(UUID().uuidString).toml")
        do {
            _ = try Configuration.load(path: path, environment: baseEnvironment)
            Issue.record("loaded a missing file")
        } catch {
            #expect(error.exitCode == .config)
            #expect(error.description.hasPrefix("\(path.path): no configuration file here; copy config.example.toml to \(path.path)"))
        }
    }

    @Test("load reads a file and labels errors with its path")
    func loadFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cloudsync-\(UUID().uuidString).toml")
        defer { try? FileManager.default.removeItem(at: path) }
        try Data("[pull]\njobs = 3\n".utf8).write(to: path)
        #expect(try Configuration.load(path: path, environment: baseEnvironment).pull.jobs == 3)
        try Data("[pull]\njobs = \"3\"\n".utf8).write(to: path)
        #expect(throws: ConfigError(file: path.path, line: 2, column: 8, message: "jobs must be an integer, got string")) {
            try Configuration.load(path: path, environment: baseEnvironment)
        }
    }
}
