import CloudSyncCore
import Foundation

/// `[cache]`: where the shared cache lives and how big it may grow.
public struct CacheSettings: Sendable, Hashable {
    /// The cache root (`cache.dir`, `~` expanded); default `$XDG_CACHE_HOME/cloudsync`, else `~/.cache/cloudsync`.
    public var dir: URL
    /// The cache's budget: bytes it may hold (default 10 GiB).
    public var maxSize: Int64
    /// The filesystem keeps at least this much free: the budget shrinks to respect it (default 1 GiB).
    public var minFree: Int64
    /// Tracks not played, read through serve or added for this long keep only their heads; nil = no limit
    /// (`"off"`, the default).
    public var maxAge: TimeInterval?
    /// Bytes written between fdatasync + index commits of a partial file (default 8 MiB).
    public var checkpoint: Int64
    /// Store every cached byte encrypted (`cache.encrypt`, default false): players then read through `serve`.
    public var encrypt: Bool
    /// A shell command whose first line of output is the cache key (`cache.key_command`); nil = the key file
    /// `cache.key` in the state directory, made on first use.
    public var keyCommand: String?

    public init(dir: URL, maxSize: Int64 = 10 << 30, minFree: Int64 = 1 << 30, maxAge: TimeInterval? = nil,
                checkpoint: Int64 = 8 << 20, encrypt: Bool = false, keyCommand: String? = nil) {
        self.dir = dir
        self.maxSize = maxSize
        self.minFree = minFree
        self.maxAge = maxAge
        self.checkpoint = checkpoint
        self.encrypt = encrypt
        self.keyCommand = keyCommand
    }
}

/// `[pull]`: how downloads are scheduled.
public struct PullSettings: Sendable, Hashable {
    /// Files fetched at once, 1...64 (default 4).
    public var jobs: Int
    /// Bytes per ranged GET (default 8 MiB).
    public var chunkSize: Int64
    /// Concurrent ranged GETs per big file and per start set, 1...16 (default 4; 1 = one connection per file).
    public var segments: Int
    /// Files of at least this many bytes are fetched in `segments` streams (default 64 MiB).
    public var segmentThreshold: Int64
    /// Bytes per second over all workers; nil means no limit (`"off"`, the default).
    public var bwlimit: Int64?
    /// Attempts after the first for a retryable failure (default 10).
    public var retries: Int
    /// At least this many bytes of audio in each track's start set (default 512 KiB; `--head-first=SIZE`).
    public var headFirst: Int64
    /// Seconds of audio in each track's start set (default 10).
    public var headSeconds: Double
    /// When the heads of the library do not fit the budget with `headFirst` and `headSeconds`, shorten them (down
    /// to 64 KiB and 2 s of audio, a 64 KiB tail) so that every track keeps one (default true).
    public var shortenHeads = true
    /// Seconds one API request (a listing page, a PROPFIND, a link) may take in all, answer included (default 5 min).
    /// Downloads have no such deadline.
    public var apiTimeout: TimeInterval
    /// Whether a pull removes cached tracks whose remote file is gone (default true; `pull --no-delete` for one
    /// run). Kept tracks are shown by `ls` as `deleted remotely`.
    public var delete = true

    public init(jobs: Int = 4, chunkSize: Int64 = 8 << 20, segments: Int = 4, segmentThreshold: Int64 = 64 << 20,
                bwlimit: Int64? = nil, retries: Int = 10, headFirst: Int64 = 512 << 10, headSeconds: Double = 10,
                apiTimeout: TimeInterval = 300) {
        self.jobs = jobs
        self.chunkSize = chunkSize
        self.segments = segments
        self.segmentThreshold = segmentThreshold
        self.bwlimit = bwlimit
        self.retries = retries
        self.headFirst = headFirst
        self.headSeconds = headSeconds
        self.apiTimeout = apiTimeout
    }
}

/// One `[remote.NAME]` section. Optional values are nil when the file does not set them, so each
/// provider adapter applies its own documented default (endpoints, client ids).
public struct RemoteConfig: Sendable, Hashable {
    public var name: String
    public var provider: ProviderKind
    /// The remote folder mirrored, always starting with "/" and without a trailing "/" ("/" = everything).
    public var root: String
    /// Replaces the documented `https://HOST` of the provider's API endpoint.
    public var apiURL: URL?
    /// Replaces the documented `https://HOST` of the provider's content (download) endpoint.
    public var contentURL: URL?
    /// Full URL of the OAuth token endpoint.
    public var tokenURL: URL?
    /// Full URL of the OAuth authorization endpoint.
    public var authURL: URL?
    /// Full URL of the OAuth device-authorization endpoint.
    public var deviceURL: URL?
    public var clientID: String?
    public var clientSecret: String?
    public var accessToken: String?
    public var refreshToken: String?
    /// WebDAV: the collection URL (required for webdav).
    public var url: URL?
    public var user: String?
    public var password: String?
    /// WebDAV: a command whose standard output (first line) is the password.
    public var passwordCommand: String?
    /// `ca_file`: a PEM file of CA certificates trusted for this remote's HTTPS besides the system's (a server
    /// with a certificate of its own, such as a NAS at home), resolved like `cache.dir`; checked when read.
    public var caFile: URL?
    /// The keys only this remote's provider accepts (`ProviderDescriptor.options`: WebDAV's `auth`, Drive's
    /// `acknowledge_abuse` and `listing`), validated; absent keys mean the declared defaults.
    public var options = ProviderOptions()
    /// Line of the `[remote.NAME]` header (0 when built in code).
    public var line: Int
    /// Which of the remote's files cloudsync keeps (`include`, `exclude`, `filter_from`, `min_size`, `max_size`,
    /// `max_age`, `min_age`, `ignore_case`), compiled; `.everything` when the section sets none.
    public var filter: PathFilter = .everything
    /// The filter keys as written, for `config show`.
    public var filterKeys = FilterKeys()
    /// Secrets written as `env:VAR` whose variable was not set when the file was read; their fields are nil.
    /// Only a command that talks to this remote fails on them (`requireSecrets()`), so one unset variable
    /// does not stop `cache status` or the other remotes.
    public var unsetSecrets: [UnsetSecret] = []

    /// Throws, for the first secret of `unsetSecrets`, the error that names its key, place and variable.
    public func requireSecrets() throws(ConfigError) {
        guard let unset = unsetSecrets.first else { return }
        throw unset.error
    }

    public init(name: String, provider: ProviderKind, root: String = "/", apiURL: URL? = nil, contentURL: URL? = nil,
                tokenURL: URL? = nil, authURL: URL? = nil, deviceURL: URL? = nil, clientID: String? = nil,
                clientSecret: String? = nil, accessToken: String? = nil, refreshToken: String? = nil, url: URL? = nil,
                user: String? = nil, password: String? = nil, passwordCommand: String? = nil,
                options: ProviderOptions = ProviderOptions(), line: Int = 0) {
        self.name = name
        self.provider = provider
        self.root = root
        self.apiURL = apiURL
        self.contentURL = contentURL
        self.tokenURL = tokenURL
        self.authURL = authURL
        self.deviceURL = deviceURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.url = url
        self.user = user
        self.password = password
        self.passwordCommand = passwordCommand
        self.options = options
        self.line = line
    }
}

/// A remote's filter keys as the file wrote them (sizes in bytes, ages in seconds).
public struct FilterKeys: Sendable, Hashable {
    public var include: [String] = []
    public var exclude: [String] = []
    /// `filter_from`, resolved like `cache.dir`.
    public var filterFrom: URL?
    public var minSize: Int64?
    public var maxSize: Int64?
    public var maxAge: TimeInterval?
    public var minAge: TimeInterval?
    public var ignoreCase = false

    public init() {}

    public var isEmpty: Bool { self == FilterKeys() }
}

/// A remote's secret given as `env:VAR` while VAR is not set.
public struct UnsetSecret: Sendable, Hashable {
    /// The dotted key: "remote.music.password".
    public var key: String
    public var variable: String
    public var file: String
    public var position: TOMLPosition

    public init(key: String, variable: String, file: String, position: TOMLPosition) {
        self.key = key
        self.variable = variable
        self.file = file
        self.position = position
    }

    public var error: ConfigError {
        ConfigError(file: file, position: position, message: "\(key) refers to environment variable \(variable), which is not set; "
            + "export \(variable) (cron and systemd start with an almost empty environment) or write the value here")
    }
}

/// The whole typed configuration of cloudsync, with every default applied.
public struct Configuration: Sendable {
    public var cache: CacheSettings
    public var pull: PullSettings
    public var audio: AudioFilter
    /// In the order their sections appear in the file.
    public var remotes: [RemoteConfig]
    /// The file it was read from, as given; nil when built in code.
    public var file: String?
    /// Values that came from `env:VAR`, by dotted key ("remote.music.password" → "MUSIC_PASSWORD");
    /// `renderMasked()` prints these as `env:VAR`.
    public var environmentReferences: [String: String]
    /// The providers the file was validated against (messages list them; `select` finds `--provider` in them).
    public var providers: ProviderCatalog

    public init(cache: CacheSettings, pull: PullSettings = PullSettings(), audio: AudioFilter = AudioFilter(),
                remotes: [RemoteConfig] = [], file: String? = nil, environmentReferences: [String: String] = [:],
                providers: ProviderCatalog = ProviderCatalog([])) {
        self.providers = providers
        self.cache = cache
        self.pull = pull
        self.audio = audio
        self.remotes = remotes
        self.file = file
        self.environmentReferences = environmentReferences
    }

    /// Reads and validates the file at `path` against `providers` (the registry's catalog). A missing or
    /// unreadable file is an error that says where cloudsync looked and what to do.
    public static func load(path: URL, environment: [String: String], providers: ProviderCatalog) throws(ConfigError) -> Configuration {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path.path, isDirectory: &isFolder), isFolder.boolValue {
            throw ConfigError(file: path.path, message: "this is a folder, not a configuration file; give the file itself "
                + "(e.g. --config \(path.appendingPathComponent("config.toml").path))")
        }
        let data: Data
        do {
            data = try WholeFile.read(path.path, limit: 16 << 20)
        } catch {
            if error.errno == ENOENT {
                throw ConfigError(file: path.path, message: "no configuration file here; copy config.example.toml "
                    + "to \(path.path) and add a [remote.NAME] section (or pass --config FILE, or set CLOUDSYNC_CONFIG)")
            }
            throw ConfigError(file: path.path, message: "cannot read the configuration file (\(error.reason))"
                + (error.errno == EACCES ? "; check its permissions" : ""))
        }
        let table = try TOMLParser.parse(bytes: [UInt8](data), file: path.path)
        return try Configuration(table: table, file: path.path, environment: environment, providers: providers)
    }

    /// Parses and validates configuration text against `providers`; `file` labels errors.
    public static func parse(text: String, file: String, environment: [String: String],
                             providers: ProviderCatalog) throws(ConfigError) -> Configuration {
        let table = try TOMLParser.parse(text, file: file)
        return try Configuration(table: table, file: file, environment: environment, providers: providers)
    }

    /// Validates a parsed document against the schema and the keys `providers` declare.
    public init(table: TOMLTable, file: String, environment: [String: String], providers: ProviderCatalog) throws(ConfigError) {
        var reader = SchemaReader(file: file, environment: environment, providers: providers)
        self = try reader.read(table)
        self.file = file
        self.environmentReferences = reader.environmentReferences
    }

    /// The remotes a command works on: `remote` alone selects that one remote, `provider` every remote
    /// of that provider (both: the named remote, which must use that provider), neither all of them.
    /// Errors: no remotes configured, an unknown remote name (lists the known ones), an unknown
    /// provider, or no remote for the provider.
    public func select(remote: String?, provider: String?) throws(ConfigError) -> [RemoteConfig] {
        let label = file ?? "configuration"
        guard !remotes.isEmpty else {
            throw ConfigError(file: label, message: "no remotes are configured; add a [remote.NAME] section with "
                + providers.providerLine + ", see config.example.toml")
        }
        var kind: ProviderKind?
        if let provider {
            guard let parsed = providers.descriptor(named: provider.lowercased())?.kind else {
                let hint = suggestion(for: provider, among: providers.names).map { "; did you mean '\($0)'?" } ?? ""
                throw ConfigError(file: label, message: "unknown provider '\(provider)'; valid providers: "
                    + providers.names.joined(separator: ", ") + hint)
            }
            kind = parsed
        }
        if let remote {
            guard let found = remotes.first(where: { $0.name == remote }) else {
                let hint = suggestion(for: remote, among: remotes.map(\.name)).map { "; did you mean '\($0)'?" } ?? ""
                throw ConfigError(file: label, message: "unknown remote '\(remote)'; configured remotes: "
                    + remotes.map(\.name).joined(separator: ", ") + hint)
            }
            if let kind, found.provider != kind {
                throw ConfigError(file: label, line: found.line, column: 1,
                                  message: "remote '\(remote)' uses provider \(found.provider.rawValue), not \(kind.rawValue)")
            }
            return [found]
        }
        if let kind {
            let matching = remotes.filter { $0.provider == kind }
            guard !matching.isEmpty else {
                throw ConfigError(file: label, message: "no remote uses provider \(kind.rawValue); configured remotes: "
                    + remotes.map { "\($0.name) (\($0.provider.rawValue))" }.joined(separator: ", "))
            }
            return matching
        }
        return remotes
    }
}

/// Where the configuration file is.
public enum ConfigLocation {
    /// `explicit` (from `--config`), else `$CLOUDSYNC_CONFIG`, else `$XDG_CONFIG_HOME/cloudsync/config.toml`,
    /// else `~/.config/cloudsync/config.toml`. Empty variables count as unset; `~` is expanded.
    public static func resolve(explicit: String?, environment: [String: String]) -> URL {
        if let explicit, !explicit.isEmpty { return expandingTilde(explicit, environment: environment) }
        if let path = environment["CLOUDSYNC_CONFIG"], !path.isEmpty { return expandingTilde(path, environment: environment) }
        return xdgDirectory("XDG_CONFIG_HOME", fallback: ".config", environment: environment)
            .appendingPathComponent("cloudsync").appendingPathComponent("config.toml")
    }
}

/// Where cloudsync keeps state that is not cache (tokens, logs).
public enum StateLocation {
    /// `$XDG_STATE_HOME/cloudsync`, else `~/.local/state/cloudsync`.
    public static func resolve(environment: [String: String]) -> URL {
        xdgDirectory("XDG_STATE_HOME", fallback: ".local/state", environment: environment).appendingPathComponent("cloudsync")
    }
}

/// The default cache directory: `$XDG_CACHE_HOME/cloudsync`, else `~/.cache/cloudsync`.
public enum CacheLocation {
    public static func resolve(environment: [String: String]) -> URL {
        xdgDirectory("XDG_CACHE_HOME", fallback: ".cache", environment: environment).appendingPathComponent("cloudsync")
    }
}

func homeDirectory(_ environment: [String: String]) -> URL {
    if let home = environment["HOME"], !home.isEmpty { return URL(fileURLWithPath: home, isDirectory: true) }
    return FileManager.default.homeDirectoryForCurrentUser
}

/// The XDG base directory in `variable` when set to an absolute path, else `~/fallback`.
func xdgDirectory(_ variable: String, fallback: String, environment: [String: String]) -> URL {
    if let value = environment[variable], value.hasPrefix("/") { return URL(fileURLWithPath: value, isDirectory: true) }
    return homeDirectory(environment).appendingPathComponent(fallback, isDirectory: true)
}

/// A path from the configuration file: `~`, `~/…`, `$HOME` and `${HOME}` at its start are the home folder; a
/// relative path is resolved against `base` (the folder of the configuration file). Any other `~user` or
/// `$VARIABLE` is refused with the reason, since cloudsync does not run a shell.
func configuredPath(_ path: String, relativeTo base: URL, environment: [String: String]) -> Result<URL, PathProblem> {
    var rest = path
    for prefix in ["${HOME}", "$HOME"] where rest == prefix || rest.hasPrefix(prefix + "/") {
        rest = "~" + rest.dropFirst(prefix.count)
        break
    }
    if rest.hasPrefix("~") && rest != "~" && !rest.hasPrefix("~/") {
        return .failure(PathProblem(message: "~user is not expanded; write the full path (or ~/… for your own home folder)"))
    }
    if let dollar = rest.firstIndex(of: "$"), rest[rest.index(after: dollar)...].first.map({ $0 == "{" || $0.isLetter || $0 == "_" }) == true {
        return .failure(PathProblem(message: "only ~ and $HOME are expanded, at the start of a path; write the full path instead of "
            + String(rest[dollar...].prefix { $0 != "/" })))
    }
    if rest == "~" || rest.hasPrefix("~/") { return .success(expandingTilde(rest, environment: environment)) }
    if rest.hasPrefix("/") { return .success(URL(fileURLWithPath: rest)) }
    return .success(base.appendingPathComponent(rest).standardizedFileURL)
}

struct PathProblem: Error {
    let message: String
}

func expandingTilde(_ path: String, environment: [String: String]) -> URL {
    if path == "~" { return homeDirectory(environment) }
    if path.hasPrefix("~/") { return homeDirectory(environment).appendingPathComponent(String(path.dropFirst(2))) }
    return URL(fileURLWithPath: path)
}

/// The closest of `candidates` to `word` when it is close enough to be a likely typo (a third of
/// the candidate's letters at most, and never a replacement of the whole word).
extension ProviderCatalog {
    /// `provider = "dropbox" (or gdrive, onedrive, yandex, webdav)`: the first provider as the example, the rest after it.
    var providerLine: String {
        guard let first = names.first else { return "provider = \"NAME\"" }
        let rest = names.dropFirst()
        return "provider = \"\(first)\"" + (rest.isEmpty ? "" : " (or " + rest.joined(separator: ", ") + ")")
    }
}

func suggestion(for word: String, among candidates: [String]) -> String? {
    let lower = word.lowercased()
    var best: (String, Int)?
    for candidate in candidates {
        let distance = editDistance(lower, candidate.lowercased())
        if best == nil || distance < best?.1 ?? .max { best = (candidate, distance) }
    }
    guard let (candidate, distance) = best else { return nil }
    return distance <= max(1, candidate.count / 3) && distance < min(word.count, candidate.count) ? candidate : nil
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
