import CloudSyncCore
import Foundation

/// The keys each section accepts, in the order `config.example.toml` and `renderMasked()` use.
enum Schema {
    static let sections = ["cache", "pull", "audio", "remote"]
    static let cache = ["dir", "max_size", "min_free", "max_age", "checkpoint", "encrypt", "key_command"]
    static let pull = ["jobs", "chunk_size", "segments", "segment_threshold", "bwlimit", "retries", "head_first",
                       "head_seconds", "shorten_heads", "api_timeout", "delete"]
    static let audio = ["extensions"]
    /// Keys every remote's section may hold, then (`sharedRemote`) keys parsed for every remote but accepted only
    /// from the providers that declare them (`ProviderOption.Value.shared`), then the filter keys.
    static let remote = [
        "provider", "root", "api_url", "content_url", "token_url", "auth_url", "device_url", "client_id",
        "client_secret", "access_token", "refresh_token", "ca_file",
    ]
    static let sharedRemote = ["url", "user", "password", "password_command"]
    static let remoteFilter = ["include", "exclude", "filter_from", "min_size", "max_size", "max_age", "min_age", "ignore_case"]
    /// The keys a `[remote.NAME]` may hold: the common ones, the shared ones and every provider's own, the filter keys.
    static func remoteKeys(_ providers: ProviderCatalog) -> [String] {
        let common = remote + sharedRemote
        return common + providers.optionKeys.filter { !common.contains($0) } + remoteFilter
    }
    /// Values never printed.
    static let secrets: Set<String> = ["client_secret", "access_token", "refresh_token", "password"]
}

/// Reads a parsed document into a `Configuration`, one error at a time, each at the offending position.
struct SchemaReader {
    let file: String
    let environment: [String: String]
    let providers: ProviderCatalog
    private(set) var environmentReferences: [String: String] = [:]

    init(file: String, environment: [String: String], providers: ProviderCatalog) {
        self.file = file
        self.environment = environment
        self.providers = providers
    }

    func fail(_ message: String, at position: TOMLPosition) -> ConfigError {
        ConfigError(file: file, position: position, message: message)
    }

    mutating func read(_ root: TOMLTable) throws(ConfigError) -> Configuration {
        for (key, node) in root.entries where !Schema.sections.contains(key) {
            let at = root.keyPosition(key) ?? node.position
            let hint = suggestion(for: key, among: Schema.sections).map { "; did you mean [\($0)]?" }
                ?? "; valid sections: [cache], [pull], [audio], [remote.NAME]"
            if case .table = node.value {
                throw fail("unknown table [\(key)]" + hint, at: at)
            }
            throw fail("unknown key '\(key)' at the top level" + hint, at: at)
        }
        let cacheTable = try section("cache", in: root, allowed: Schema.cache)
        let pullTable = try section("pull", in: root, allowed: Schema.pull)
        let audioTable = try section("audio", in: root, allowed: Schema.audio)

        var cache = CacheSettings(dir: CacheLocation.resolve(environment: environment))
        if let (dir, at) = try string("dir", in: cacheTable, path: "cache") {
            guard !dir.isEmpty else { throw fail("dir must not be empty; remove it to use the default", at: at) }
            let base = URL(fileURLWithPath: file).deletingLastPathComponent()
            switch configuredPath(dir, relativeTo: base, environment: environment) {
            case .success(let url): cache.dir = url
            case .failure(let problem): throw fail("dir \"\(dir)\": \(problem.message)", at: at)
            }
        }
        cache.maxSize = try size("max_size", in: cacheTable, path: "cache", default: cache.maxSize)
        cache.minFree = try size("min_free", in: cacheTable, path: "cache", default: cache.minFree, allowingZero: true)
        if let node = cacheTable?["max_age"] {
            if case .string(let text) = node.value, text.lowercased() == "off" {
                cache.maxAge = nil
            } else {
                cache.maxAge = try duration("max_age", in: cacheTable, path: "cache", default: 0)
            }
        }
        cache.checkpoint = try size("checkpoint", in: cacheTable, path: "cache", default: cache.checkpoint)
        if let node = cacheTable?["encrypt"] {
            guard case .boolean(let value) = node.value else {
                throw fail("encrypt must be a boolean (true or false), got \(node.value.typeName)", at: node.position)
            }
            cache.encrypt = value
        }
        if let (command, at) = try string("key_command", in: cacheTable, path: "cache") {
            guard !command.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw fail("key_command must not be empty; remove it to keep the key in the state directory (cache.key)", at: at)
            }
            cache.keyCommand = command
        }

        var pull = PullSettings()
        if let (jobs, at) = try integer("jobs", in: pullTable) {
            guard (1...64).contains(jobs) else { throw fail("jobs must be between 1 and 64, got \(jobs)", at: at) }
            pull.jobs = Int(jobs)
        }
        pull.chunkSize = try size("chunk_size", in: pullTable, path: "pull", default: pull.chunkSize)
        if let (segments, at) = try integer("segments", in: pullTable) {
            guard (1...16).contains(segments) else {
                throw fail("segments must be between 1 and 16 (1 = one connection per file), got \(segments)", at: at)
            }
            pull.segments = Int(segments)
        }
        pull.segmentThreshold = try size("segment_threshold", in: pullTable, path: "pull", default: pull.segmentThreshold)
        if let (text, at) = try string("bwlimit", in: pullTable, path: "pull") {
            if text.lowercased() == "off" {
                pull.bwlimit = nil
            } else {
                guard let rate = ByteSize.parseRate(text), rate > 0, rate <= Self.maximumSize else {
                    throw fail("bwlimit must be \"off\" or a rate like \"2MiB/s\", got \"\(text)\"", at: at)
                }
                pull.bwlimit = rate
            }
        }
        if let (retries, at) = try integer("retries", in: pullTable) {
            guard (0...1000).contains(retries) else { throw fail("retries must be between 0 and 1000, got \(retries)", at: at) }
            pull.retries = Int(retries)
        }
        pull.headFirst = try size("head_first", in: pullTable, path: "pull", default: pull.headFirst)
        if let node = pullTable?["head_seconds"] {
            let seconds: Double
            switch node.value {
            case .integer(let value): seconds = Double(value)
            case .float(let value): seconds = value
            default: throw fail("head_seconds must be a number of seconds like 10, got \(node.value.typeName)", at: node.position)
            }
            guard seconds.isFinite, (0 ... 600).contains(seconds) else {
                throw fail("head_seconds must be between 0 and 600, got \(seconds)", at: node.position)
            }
            pull.headSeconds = seconds
        }
        pull.apiTimeout = try duration("api_timeout", in: pullTable, path: "pull", default: pull.apiTimeout)
        for (key, keyPath) in [("shorten_heads", \PullSettings.shortenHeads), ("delete", \PullSettings.delete)] {
            guard let node = pullTable?[key] else { continue }
            guard case .boolean(let value) = node.value else {
                throw fail("\(key) must be a boolean (true or false), got \(node.value.typeName)", at: node.position)
            }
            pull[keyPath: keyPath] = value
        }

        var audio = AudioFilter()
        if let audioTable, let node = audioTable["extensions"] {
            guard case .array(let items) = node.value else {
                throw fail("extensions must be an array of strings like [\"mp3\", \"flac\"], got \(node.value.typeName)", at: node.position)
            }
            var extensions: [String] = []
            for (index, item) in items.enumerated() {
                guard case .string = item.value else {
                    throw fail("extensions must contain only strings, got \(item.value.typeName)", at: item.position)
                }
                let value = try resolve(item, path: "audio.extensions[\(index)]")
                let trimmed = value.hasPrefix(".") ? String(value.dropFirst()) : value
                guard !trimmed.isEmpty, !trimmed.contains("/"), !trimmed.contains(".") else {
                    throw fail("\"\(value)\" is not a file extension; write it like \"flac\"", at: item.position)
                }
                extensions.append(trimmed)
            }
            audio = AudioFilter(extensions: extensions)
        }

        var remotes: [RemoteConfig] = []
        if let remoteNode = root["remote"] {
            guard case .table(let remoteTable) = remoteNode.value else {
                throw fail("remote must hold tables like [remote.music], got \(remoteNode.value.typeName)", at: remoteNode.position)
            }
            for (name, node) in remoteTable.entries {
                remotes.append(try remote(name: name, node: node, keyPosition: remoteTable.keyPosition(name) ?? node.position))
            }
        }
        return Configuration(cache: cache, pull: pull, audio: audio, remotes: remotes, file: file, providers: providers)
    }

    // MARK: Remotes

    static func isValidRemoteName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first != "." else { return false }
        return name.unicodeScalars.allSatisfy { c in
            (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c == "-" || c == "_" || c == "."
        }
    }

    mutating func remote(name: String, node: TOMLNode, keyPosition: TOMLPosition) throws(ConfigError) -> RemoteConfig {
        guard SchemaReader.isValidRemoteName(name) else {
            throw fail("invalid remote name \"\(name)\": use letters, digits, '-', '_' and '.' (not first)", at: keyPosition)
        }
        guard case .table(let table) = node.value else {
            throw fail("remote.\(name) must be a table ([remote.\(name)]), got \(node.value.typeName)", at: node.position)
        }
        let path = "remote.\(name)"
        try checkKeys(table, allowed: Schema.remoteKeys(providers), section: "[remote.\(name)]")
        guard let (providerName, providerAt) = try string("provider", in: table, path: path) else {
            throw fail("remote \"\(name)\" has no provider; add " + providers.providerLine, at: table.position)
        }
        guard let descriptor = providers.descriptor(named: providerName) else {
            let hint = suggestion(for: providerName, among: providers.names).map { " (did you mean '\($0)'?)" } ?? ""
            throw fail("unknown provider \"\(providerName)\"\(hint); valid providers: "
                + providers.names.joined(separator: ", "), at: providerAt)
        }
        let provider = descriptor.kind
        for key in table.keys where descriptor.option(key) == nil {
            let owners = providers.providers(declaring: key)
            if !owners.isEmpty {
                throw fail("key '\(key)' applies only to \(owners.map(\.rawValue).joined(separator: ", ")) remotes, and \"\(name)\" is a \(provider.rawValue) remote",
                           at: table.keyPosition(key) ?? table.position)
            }
        }
        var config = RemoteConfig(name: name, provider: provider, line: table.position.line)
        if let (root, _) = try string("root", in: table, path: path) {
            let trimmed = root.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
            config.root = "/" + trimmed
        }
        config.apiURL = try url("api_url", in: table, path: path)
        config.contentURL = try url("content_url", in: table, path: path)
        config.tokenURL = try url("token_url", in: table, path: path)
        config.authURL = try url("auth_url", in: table, path: path)
        config.deviceURL = try url("device_url", in: table, path: path)
        config.clientID = try string("client_id", in: table, path: path)?.0
        config.clientSecret = try secret("client_secret", in: table, path: path, unset: &config.unsetSecrets)
        config.accessToken = try secret("access_token", in: table, path: path, unset: &config.unsetSecrets)
        config.refreshToken = try secret("refresh_token", in: table, path: path, unset: &config.unsetSecrets)
        config.url = try url("url", in: table, path: path)
        config.user = try string("user", in: table, path: path)?.0
        config.password = try secret("password", in: table, path: path, unset: &config.unsetSecrets)
        config.passwordCommand = try secret("password_command", in: table, path: path, unset: &config.unsetSecrets)
        // The URL's user info fills in user and password (docs/webdav.md); one that says otherwise than the keys is
        // refused here too, so `config check` does not pass what every command then refuses.
        if let url = config.url, let at = table["url"]?.position,
           let comps = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            for (what, fromURL, configured) in [("user name", comps.user, config.user), ("password", comps.password, config.password)] {
                if let fromURL, !fromURL.isEmpty, let configured, !configured.isEmpty, fromURL != configured {
                    throw fail("url carries a \(what) that differs from the configured one; keep one of them "
                        + "(better: remove it from url and use user and password_command)", at: at)
                }
            }
        }
        config.caFile = try caFile(in: table, path: path)
        config.options = try options(of: descriptor, in: table, path: path)
        try readFilter(table, path: path, into: &config)
        for option in descriptor.options where table[option.key] == nil {
            if let example = option.requiredExample {
                throw fail("\(provider.rawValue) remote \"\(name)\" has no \(option.key); add \(option.key) = \"\(example)\"", at: table.position)
            }
        }
        // auth = "bearer"/"oauth" take their token from access_token or from `cloudsync login`; which one is
        // present is checked when the remote is used (exit 4 with a hint), not here.
        return config
    }

    /// `ca_file`: resolved like `cache.dir`, and read now, so a wrong path or a file that holds no certificate is
    /// an error at its line rather than a TLS failure at the first request.
    mutating func caFile(in table: TOMLTable, path: String) throws(ConfigError) -> URL? {
        // A system bundle holds ~150 certificates in ~200 KiB; 16 MiB is far beyond any real one.
        guard let (url, data, at) = try configuredFile("ca_file", in: table, path: path, limit: 16 << 20,
                                                       what: "give the PEM file of the CA certificate that signed the server's")
        else { return nil }
        guard data.range(of: Data("-----BEGIN CERTIFICATE-----".utf8)) != nil else {
            throw fail("ca_file: \(url.path) holds no PEM certificate (-----BEGIN CERTIFICATE-----); convert a DER file with "
                + "'openssl x509 -inform der -in FILE -out FILE.pem'", at: at)
        }
        return url
    }

    /// The file a key names (resolved like `cache.dir`: against the config file's folder) and its contents, read
    /// now so a wrong path is an error at its line; nil without the key. `what` says what the file should be.
    mutating func configuredFile(_ key: String, in table: TOMLTable, path: String, limit: Int,
                                 what: String) throws(ConfigError) -> (URL, Data, TOMLPosition)? {
        guard let (text, at) = try string(key, in: table, path: path) else { return nil }
        let url: URL
        switch configuredPath(text, relativeTo: URL(fileURLWithPath: file).deletingLastPathComponent(), environment: environment) {
        case .success(let resolved): url = resolved
        case .failure(let problem): throw fail("\(key) \"\(text)\": \(problem.message)", at: at)
        }
        do {
            return (url, try WholeFile.read(url.path, limit: limit), at)
        } catch {
            throw fail("\(key): cannot read \(url.path): \(error.reason); \(what)", at: at)
        }
    }

    /// The values of the provider's own keys (`.boolean`, `.choice`), each checked as the descriptor declares.
    mutating func options(of descriptor: ProviderDescriptor, in table: TOMLTable, path: String) throws(ConfigError) -> ProviderOptions {
        var options = ProviderOptions()
        for option in descriptor.options {
            guard let node = table[option.key] else { continue }
            switch option.value {
            case .shared:
                continue
            case .boolean:
                guard case .boolean(let value) = node.value else {
                    throw fail("\(option.key) must be a boolean (true or false), got \(node.value.typeName)", at: node.position)
                }
                options[option.key] = .boolean(value)
            case .choice(let choices, _, let invalid):
                if let invalid {
                    guard case .string(let text) = node.value, choices.contains(text) else { throw fail(invalid, at: node.position) }
                    options[option.key] = .text(text)
                } else {
                    guard let (text, at) = try string(option.key, in: table, path: path) else { continue }
                    guard choices.contains(text) else {
                        throw fail("\(option.key) must be one of " + choices.map { "\"\($0)\"" }.joined(separator: ", ")
                            + ", got \"\(text)\"", at: at)
                    }
                    options[option.key] = .text(text)
                }
            }
        }
        return options
    }

    /// A remote's filter keys, compiled into a `PathFilter` (a bad glob is an error at its string).
    mutating func readFilter(_ table: TOMLTable, path: String, into config: inout RemoteConfig) throws(ConfigError) {
        var keys = FilterKeys()
        let include = try globs("include", in: table), exclude = try globs("exclude", in: table)
        for (pattern, at) in include + exclude {
            do {
                _ = try PathFilter(include: [pattern])
            } catch {
                throw fail(error.message.replacingOccurrences(of: "--include: ", with: ""), at: at)
            }
        }
        keys.include = include.map(\.0)
        keys.exclude = exclude.map(\.0)
        if let node = table["ignore_case"] {
            guard case .boolean(let value) = node.value else {
                throw fail("ignore_case must be a boolean (true or false), got \(node.value.typeName)", at: node.position)
            }
            keys.ignoreCase = value
        }
        if table["min_size"] != nil { keys.minSize = try size("min_size", in: table, path: path, default: 0, allowingZero: true) }
        if table["max_size"] != nil { keys.maxSize = try size("max_size", in: table, path: path, default: 0, allowingZero: true) }
        if table["max_age"] != nil { keys.maxAge = try duration("max_age", in: table, path: path, default: 0) }
        if table["min_age"] != nil { keys.minAge = try duration("min_age", in: table, path: path, default: 0) }
        var lines: [(source: String, line: Int, text: String)] = []
        if let (url, data, _) = try configuredFile("filter_from", in: table, path: path, limit: 1 << 20,
                                                   what: "a file of '+ PATTERN' / '- PATTERN' lines, at most 1MiB") {
            let contents = String(decoding: data, as: UTF8.self)
            for (index, line) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                lines.append((url.path, index + 1, String(line.hasSuffix("\r") ? line.dropLast() : line)))
            }
            keys.filterFrom = url
        }
        do {
            config.filter = try PathFilter(include: keys.include, exclude: keys.exclude, filterLines: lines, ignoreCase: keys.ignoreCase,
                                           minSize: keys.minSize, maxSize: keys.maxSize, maxAge: keys.maxAge, minAge: keys.minAge)
        } catch {
            throw fail("filter_from: \(error.message)", at: table["filter_from"]?.position ?? table.position)
        }
        config.filterKeys = keys
    }

    /// An array of glob strings with their positions (a single string is accepted as a one-element array).
    func globs(_ key: String, in table: TOMLTable) throws(ConfigError) -> [(String, TOMLPosition)] {
        guard let node = table[key] else { return [] }
        switch node.value {
        case .string(let text): return [(text, node.position)]
        case .array(let items):
            var out: [(String, TOMLPosition)] = []
            for item in items {
                guard case .string(let text) = item.value else {
                    throw fail("\(key) must be an array of globs like [\"*.flac\", \"Live/**\"], got \(item.value.typeName)", at: item.position)
                }
                out.append((text, item.position))
            }
            return out
        default:
            throw fail("\(key) must be an array of globs like [\"*.flac\", \"Live/**\"], got \(node.value.typeName)", at: node.position)
        }
    }

    // MARK: Typed accessors

    /// The sub-table `name` of the root (nil when absent), after checking its keys.
    func section(_ name: String, in root: TOMLTable, allowed: [String]) throws(ConfigError) -> TOMLTable? {
        guard let node = root[name] else { return nil }
        guard case .table(let table) = node.value else {
            throw fail("\(name) must be a table ([\(name)]), got \(node.value.typeName)", at: node.position)
        }
        try checkKeys(table, allowed: allowed, section: "[\(name)]")
        return table
    }

    func checkKeys(_ table: TOMLTable, allowed: [String], section: String) throws(ConfigError) {
        for key in table.keys where !allowed.contains(key) {
            let hint = suggestion(for: key, among: allowed).map { "; did you mean '\($0)'?" }
                ?? "; valid keys: " + allowed.joined(separator: ", ")
            throw fail("unknown key '\(key)' in \(section)" + hint, at: table.keyPosition(key) ?? table.position)
        }
    }

    /// A string value with `env:VAR` resolved, or nil when absent.
    mutating func string(_ key: String, in table: TOMLTable?, path: String) throws(ConfigError) -> (String, TOMLPosition)? {
        guard let node = table?[key] else { return nil }
        guard case .string = node.value else {
            throw fail("\(key) must be a string, got \(node.value.typeName)", at: node.position)
        }
        return (try resolve(node, path: path + "." + key), node.position)
    }

    /// A remote's secret like `string`, except that `env:VAR` with VAR unset is not an error here: it is
    /// recorded in `unset` (the value stays nil) and fails only a command that uses the remote.
    mutating func secret(_ key: String, in table: TOMLTable, path: String,
                         unset: inout [UnsetSecret]) throws(ConfigError) -> String? {
        guard let node = table[key] else { return nil }
        if case .string(let text) = node.value, text.hasPrefix("env:"), text.count > 4 {
            let variable = String(text.dropFirst(4))
            if environment[variable] == nil {
                environmentReferences[path + "." + key] = variable
                unset.append(UnsetSecret(key: path + "." + key, variable: variable, file: file, position: node.position))
                return nil
            }
        }
        return try string(key, in: table, path: path)?.0
    }

    /// The string in `node`, or the environment variable it names with `env:VAR`.
    mutating func resolve(_ node: TOMLNode, path: String) throws(ConfigError) -> String {
        guard case .string(let text) = node.value else { return "" }
        guard text.hasPrefix("env:") else { return text }
        let variable = String(text.dropFirst(4))
        guard !variable.isEmpty else {
            throw fail("\(path) says env: but names no variable; write env:VARIABLE", at: node.position)
        }
        guard let value = environment[variable] else {
            throw fail("\(path) refers to environment variable \(variable), which is not set; export \(variable) or write the value here",
                       at: node.position)
        }
        environmentReferences[path] = variable
        return value
    }

    func integer(_ key: String, in table: TOMLTable?) throws(ConfigError) -> (Int64, TOMLPosition)? {
        guard let node = table?[key] else { return nil }
        guard case .integer(let value) = node.value else {
            throw fail("\(key) must be an integer, got \(node.value.typeName)", at: node.position)
        }
        return (value, node.position)
    }

    /// The largest size any key accepts: 1 EiB, beyond what a filesystem holds, so that sums of a few
    /// sizes never overflow 64 bits.
    static let maximumSize: Int64 = 1 << 60
    /// The longest duration any key accepts: 100 years (36525d), so that every date computed from one
    /// stays representable.
    static let maximumDuration: TimeInterval = 36525 * 86400

    /// A byte size: a string like "8MiB" (or an integer count of bytes), greater than zero (or zero, with
    /// `allowingZero`), at most `maximumSize`.
    mutating func size(_ key: String, in table: TOMLTable?, path: String, default value: Int64,
                       allowingZero: Bool = false) throws(ConfigError) -> Int64 {
        guard let node = table?[key] else { return value }
        let text: String
        switch node.value {
        case .integer(let bytes):
            guard bytes > 0 || (allowingZero && bytes == 0) else {
                throw fail("\(key) must be greater than zero, got \(bytes)", at: node.position)
            }
            guard bytes <= Self.maximumSize else {
                throw fail("\(key) must be at most 1 EiB (\"1048576TiB\"), got \(bytes)", at: node.position)
            }
            return bytes
        case .string: text = try resolve(node, path: path + "." + key)
        default: throw fail("\(key) must be a size like \"8MiB\", got \(node.value.typeName)", at: node.position)
        }
        guard let bytes = ByteSize.parse(text) else {
            throw fail("\(key) must be a size like \"512KiB\", \"8MiB\" or \"10GiB\" (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), got \"\(text)\"", at: node.position)
        }
        guard bytes <= Self.maximumSize else {
            throw fail("\(key) must be at most 1 EiB (\"1048576TiB\"), got \"\(text)\"", at: node.position)
        }
        guard bytes > 0 || (allowingZero && bytes == 0) else {
            throw fail("\(key) must be greater than zero, got \"\(text)\"", at: node.position)
        }
        return bytes
    }

    /// A duration: a string like "90d", "12h", "30m", "45s" (or an integer count of seconds), greater than zero
    /// and at most `maximumDuration`.
    mutating func duration(_ key: String, in table: TOMLTable?, path: String, default value: TimeInterval) throws(ConfigError) -> TimeInterval {
        guard let node = table?[key] else { return value }
        let text: String
        switch node.value {
        case .integer(let seconds):
            guard seconds > 0 else { throw fail("\(key) must be greater than zero, got \(seconds)", at: node.position) }
            guard TimeInterval(seconds) <= Self.maximumDuration else {
                throw fail("\(key) must be at most 100 years (\"36525d\"), got \(seconds)", at: node.position)
            }
            return TimeInterval(seconds)
        case .string: text = try resolve(node, path: path + "." + key)
        default: throw fail("\(key) must be a duration like \"90d\", got \(node.value.typeName)", at: node.position)
        }
        guard let seconds = TimeSpan.parse(text) else {
            throw fail("\(key) must be a duration like \"90d\", \"12h\", \"30m\" or \"45s\", got \"\(text)\"", at: node.position)
        }
        guard seconds > 0 else { throw fail("\(key) must be greater than zero, got \"\(text)\"", at: node.position) }
        guard seconds <= Self.maximumDuration else {
            throw fail("\(key) must be at most 100 years (\"36525d\"), got \"\(text)\"", at: node.position)
        }
        return seconds
    }

    /// An absolute http or https URL with a host. The value is not echoed (it may hold credentials).
    mutating func url(_ key: String, in table: TOMLTable, path: String) throws(ConfigError) -> URL? {
        guard let (text, at) = try string(key, in: table, path: path) else { return nil }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            throw fail("\(key) must be an http or https URL like \"https://host/path\"; this is not a URL", at: at)
        }
        guard scheme == "http" || scheme == "https" else {
            throw fail("\(key) must be an http or https URL, got scheme '\(scheme)'", at: at)
        }
        guard let host = url.host, !host.isEmpty else {
            throw fail("\(key) must be an http or https URL with a host, like \"https://host/path\"", at: at)
        }
        return url
    }
}
