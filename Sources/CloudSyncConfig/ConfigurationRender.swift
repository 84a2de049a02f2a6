import CloudSyncCore
import Foundation

extension Configuration {
    /// The effective configuration as TOML, for `cloudsync config show`: every section with its defaults
    /// filled in, remotes in file order. Secrets (client_secret, access_token, refresh_token, password)
    /// print as "********"; values that came from `env:VAR` print as `env:VAR`, never their value.
    /// The output parses back to the same configuration when the referenced variables are set (masked
    /// secrets excepted). `notes` adds a comment line under a remote's header (by remote name), such as which
    /// credential is in effect.
    public func renderMasked(notes: [String: String] = [:]) -> String {
        var lines: [String] = []
        if let file { lines.append("# effective configuration from \(file); secrets masked") }
        lines.append("[cache]")
        lines.append(entry("cache.dir", "dir", .text(cache.dir.path)))
        lines.append(entry("cache.max_size", "max_size", .text(Self.renderSize(cache.maxSize))))
        lines.append(entry("cache.min_free", "min_free", .text(Self.renderSize(cache.minFree))))
        lines.append(entry("cache.max_age", "max_age", .text(cache.maxAge.map(Self.renderDuration) ?? "off")))
        lines.append(entry("cache.checkpoint", "checkpoint", .text(Self.renderSize(cache.checkpoint))))
        lines.append("encrypt = \(cache.encrypt)")
        if let command = cache.keyCommand { lines.append(entry("cache.key_command", "key_command", .text(command))) }
        lines.append("")
        lines.append("[pull]")
        lines.append("jobs = \(pull.jobs)")
        lines.append(entry("pull.chunk_size", "chunk_size", .text(Self.renderSize(pull.chunkSize))))
        lines.append("segments = \(pull.segments)")
        lines.append(entry("pull.segment_threshold", "segment_threshold", .text(Self.renderSize(pull.segmentThreshold))))
        lines.append(entry("pull.bwlimit", "bwlimit", .text(pull.bwlimit.map { Self.renderSize($0) + "/s" } ?? "off")))
        lines.append("retries = \(pull.retries)")
        lines.append(entry("pull.head_first", "head_first", .text(Self.renderSize(pull.headFirst))))
        lines.append("head_seconds = \(pull.headSeconds.rounded() == pull.headSeconds ? String(Int(pull.headSeconds)) : String(pull.headSeconds))")
        lines.append("shorten_heads = \(pull.shortenHeads)")
        lines.append(entry("pull.api_timeout", "api_timeout", .text(Self.renderDuration(pull.apiTimeout))))
        lines.append("delete = \(pull.delete)")
        lines.append("")
        lines.append("[audio]")
        lines.append("extensions = [" + audio.extensions.sorted().map(Self.quoted).joined(separator: ", ") + "]")
        for remote in remotes {
            let path = "remote.\(remote.name)"
            lines.append("")
            let header = remote.name.contains(".") ? Self.quoted(remote.name) : remote.name
            lines.append("[remote.\(header)]")
            if let note = notes[remote.name] { lines.append("# " + note) }
            lines.append("provider = \(Self.quoted(remote.provider.rawValue))")
            lines.append(entry(path + ".root", "root", .text(remote.root)))
            let optional: [(String, String?)] = [
                ("api_url", remote.apiURL?.absoluteString), ("content_url", remote.contentURL?.absoluteString),
                ("token_url", remote.tokenURL?.absoluteString), ("auth_url", remote.authURL?.absoluteString),
                ("device_url", remote.deviceURL?.absoluteString), ("client_id", remote.clientID),
                ("client_secret", remote.clientSecret), ("access_token", remote.accessToken),
                ("refresh_token", remote.refreshToken), ("ca_file", remote.caFile?.path),
                ("url", remote.url?.absoluteString), ("user", remote.user),
                ("password", remote.password), ("password_command", remote.passwordCommand),
            ]
            for (key, value) in optional {
                if value == nil && environmentReferences[path + "." + key] == nil { continue }
                // password_command is a secret too (it may print the password itself: `echo …`), and so is the
                // password part of a URL's user info.
                let secret = Schema.secrets.contains(key) || key == "password_command"
                lines.append(entry(path + "." + key, key, secret ? .secret : .text(value.map(Self.maskingURLPassword) ?? "")))
            }
            let filter = remote.filterKeys
            if !filter.include.isEmpty { lines.append("include = [" + filter.include.map(Self.quoted).joined(separator: ", ") + "]") }
            if !filter.exclude.isEmpty { lines.append("exclude = [" + filter.exclude.map(Self.quoted).joined(separator: ", ") + "]") }
            if let url = filter.filterFrom { lines.append("filter_from = \(Self.quoted(url.path))") }
            if let size = filter.minSize { lines.append("min_size = \(Self.quoted(Self.renderSize(size)))") }
            if let size = filter.maxSize { lines.append("max_size = \(Self.quoted(Self.renderSize(size)))") }
            if let age = filter.maxAge { lines.append("max_age = \(Self.quoted(Self.renderDuration(age)))") }
            if let age = filter.minAge { lines.append("min_age = \(Self.quoted(Self.renderDuration(age)))") }
            if filter.ignoreCase { lines.append("ignore_case = true") }
            for option in providers.descriptor(remote.provider)?.options ?? [] {
                switch option.value {
                case .shared: continue
                case .boolean(let fallback):
                    lines.append("\(option.key) = \(remote.options.boolean(option.key, default: fallback))")
                case .choice(_, let fallback, _):
                    lines.append("\(option.key) = \(Self.quoted(remote.options.text(option.key, default: fallback)))")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private enum Shown {
        case text(String)
        case secret
    }

    private func entry(_ path: String, _ key: String, _ value: Shown) -> String {
        if let variable = environmentReferences[path] { return "\(key) = \(Self.quoted("env:" + variable))" }
        switch value {
        case .text(let text): return "\(key) = \(Self.quoted(text))"
        case .secret: return "\(key) = \"********\""
        }
    }

    /// `text` with the password of a URL's user info (`https://me:secret@host/`) replaced by `********`.
    static func maskingURLPassword(_ text: String) -> String {
        guard text.contains("@"), var components = URLComponents(string: text), components.percentEncodedPassword != nil,
              components.host != nil else { return text }
        components.percentEncodedPassword = "********"
        return components.string ?? text
    }

    /// A TOML basic string (a JSON string literal is one: the same escapes, control characters and DEL included).
    static func quoted(_ text: String) -> String { JSONText.string(text) }

    /// Exact and parseable by `ByteSize.parse`: "10GiB", "512KiB", "1000".
    static func renderSize(_ bytes: Int64) -> String {
        for (unit, factor) in [("TiB", Int64(1) << 40), ("GiB", Int64(1) << 30), ("MiB", Int64(1) << 20), ("KiB", Int64(1) << 10)]
        where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(unit)"
        }
        return "\(bytes)"
    }

    /// Exact and parseable by `TimeSpan.parse`: "90d", "12h", "90s", "1.5s".
    static func renderDuration(_ seconds: TimeInterval) -> String {
        for (unit, factor) in [("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)]
        where seconds >= factor && seconds.truncatingRemainder(dividingBy: factor) == 0 {
            return "\(Int64(seconds / factor))\(unit)"
        }
        return seconds == seconds.rounded() && abs(seconds) < 1e15 ? "\(Int64(seconds))s" : "\(seconds)s"
    }
}
