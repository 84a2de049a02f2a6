import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncEngine
import CloudSyncHTTP
import CloudSyncServer
import Foundation

/// `cloudsync ls`: audio files of the selected remotes with their cache state, live or from the index.
///
/// Interactive, so it fails fast offline: a host that cannot be reached at all (`.unreachable`: DNS, refused, no
/// route) is retried ``unreachableRetries`` times, then the remote's rows come from the index with a one-line
/// warning, exit 0. `--m3u` (a playlist for `serve`) and `--offline` never touch the network.
struct ListCommand {
    let context: CommandContext

    /// Retries of an unreachable host before the index is shown (`--retries` overrides it).
    static let unreachableRetries = 1

    func run() async throws -> ExitCode {
        let args = context.arguments
        if args.has("cached") && args.has("missing") {
            throw UsageError(message: "cloudsync: --cached and --missing exclude each other", hint: "Run 'cloudsync ls --help' for usage.")
        }
        let formats = ["json", "tsv", "m3u"].filter(args.has)
        if formats.count > 1 {
            throw UsageError(message: "cloudsync: \(formats.map { "--" + $0 }.joined(separator: " and ")) exclude each other (one output format)",
                             hint: "Run 'cloudsync ls --help' for usage.")
        }
        // Every option is read before any work: a usage error never waits for the network.
        let retries = try args.integer("retries", in: 0 ... 1000)
        let commandLineFilter = try FilterOptions.filter(args)
        let columns = try TrackColumns(args)
        let port = try args.integer("port", in: 1 ... 65535) ?? ServerOptions.defaultPort
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let remotes = try setup.selectedRemotes(config)
        let cache = try setup.openCache(config)
        let live = !args.has("offline") && !args.has("m3u")
        let now = Date()

        var rows: [CacheEntryInfo] = []
        for remote in remotes {
            let filters = FilterOptions.filters(for: remote, commandLine: commandLineFilter)
            func kept(_ rows: [CacheEntryInfo]) -> [CacheEntryInfo] {
                rows.filter { row in filters.allSatisfy { $0.includes(row.file.path, size: row.file.size, modified: row.file.modified, now: now) } }
            }
            guard live else {
                rows += kept(try cache.entries(remote: remote.name))
                continue
            }
            var transportOptions = CurlTransportOptions()
            transportOptions.apiTimeout = config.pull.apiTimeout
            let transport = try CurlTransport(options: transportOptions, logger: context.logger)
            let factory = setup.providerFactory(config, transport: transport)
            let built = try factory.make(remote, retries: retries, unreachableRetries: retries ?? Self.unreachableRetries)
            let sync = Sync(remote: remote.name, providerName: remote.provider.rawValue, provider: built.provider,
                            transport: built.transport, pacer: built.pacer, cache: cache, options: SyncOptions(filters: filters),
                            logger: context.logger, events: { _ in })
            do {
                let listed = try await sync.refreshIndex()
                rows += kept(try cache.entries(remote: remote.name).filter { listed.contains($0.path) || $0.deletedRemotely != nil })
            } catch let error as ProviderError where error.code == .unreachable {
                context.console.err("cloudsync: warning: \(remote.name): offline, so this is the index's state (the last listing and what is cached), not the cloud's: \(error.message)\n")
                rows += kept(try cache.entries(remote: remote.name))
            }
        }
        if !args.positionals.isEmpty {
            // PATH as in pull: relative to the root, or prefixed with the remote's name (the form ls prints).
            let selections = Dictionary(remotes.map { ($0.name, PathSelection(args.positionals, remote: $0.name)) }, uniquingKeysWith: { a, _ in a })
            var known: [String: Set<String>] = [:]
            for row in rows { known[row.remote, default: []].insert(row.path) }
            let misses = remotes.map { selections[$0.name]?.unmatched(in: known[$0.name] ?? []) ?? [] }
            if let miss = misses.first?.first, misses.allSatisfy({ $0.contains { $0.path == miss.path } }) {
                let near = misses.lazy.compactMap { $0.first { $0.path == miss.path }?.closest }.first.map { " (the closest is '\($0)')" } ?? ""
                throw UsageError(message: "cloudsync: no file or folder '\(miss.path)' in \(remotes.count == 1 ? "remote" : "remotes") "
                    + "\(remotes.map(\.name).joined(separator: ", "))\(near)",
                    hint: "Paths are relative to the remote's root and case-sensitive; run 'cloudsync ls' to see them.")
            }
            rows = rows.filter { selections[$0.remote]?.selects($0.path) ?? false }
        }
        rows = rows.filter { row in
            (!args.has("cached") || row.state == .complete) && (!args.has("missing") || row.state != .complete)
        }
        rows = columns.apply(rows)
        if args.has("m3u") {
            context.console.out(Playlist.m3u(rows, baseURL: "http://127.0.0.1:\(port)"))
        } else if context.json {
            context.console.out(try ListingOutput.json(rows))
        } else if args.has("tsv") {
            context.console.out(ListingOutput.tsv(rows))
        } else {
            context.console.out(ListingOutput.table(rows, long: args.has("long"), multipleRemotes: remotes.count > 1))
            // On stderr: stdout stays one record per line, for grep and wc.
            // Also when nothing matched ("0 tracks"): a filter that selects nothing is not mistaken for a hang.
            if !args.has("quiet") { context.console.err(ListingOutput.summary(rows)) }
        }
        return .ok
    }
}

/// How `ls` prints entries. Pure, snapshot-tested.
enum ListingOutput {
    /// `cached`, `head` (starts at once; the rest is not cached), `partial NN%`, `missing`; `outdated` when an
    /// older version is what `tracks/` holds (still playable) while the current one is not complete; `deleted
    /// remotely` for a track a pull kept (`--no-delete`) although its remote file is gone.
    static func stateText(_ row: CacheEntryInfo) -> String {
        if row.deletedRemotely != nil { return "deleted remotely" }
        if row.state != .complete && row.outdatedTrackBytes > 0 { return "outdated" }
        switch row.stateName {
        case "partial":
            let pct = row.file.size > 0 ? Int(Double(row.presentBytes) * 100 / Double(row.file.size)) : 0
            return "partial \(min(pct, 99))%"
        case let name: return name
        }
    }

    /// Rows for people: names with control characters made visible, times in `timeZone` (the local zone).
    static func table(_ rows: [CacheEntryInfo], long: Bool, multipleRemotes: Bool, timeZone: TimeZone = .current) -> String {
        let dates = DateFormatter()
        dates.locale = Locale(identifier: "en_US_POSIX")
        dates.timeZone = timeZone
        dates.dateFormat = "yyyy-MM-dd HH:mm"
        var out = ""
        // Wider only when a row is `deleted remotely`, so the other columns stay aligned.
        let stateWidth = rows.contains { $0.deletedRemotely != nil } ? 16 : 12
        for row in rows {
            let path = TerminalText.escape(multipleRemotes ? "\(row.remote)/\(row.path)" : row.path)
            let label = TrackLabel(row)
            let tagged = TrackColumns.tableColumns(label)
            var line = "\(stateText(row).rightPad(stateWidth)) \(ByteSize.format(row.file.size).leftPad(9))  \(dates.string(from: row.file.modified))  \(tagged.duration.leftPad(7))  \(path)"
            if let text = tagged.line { line += "  \(TerminalText.escape(text))" }
            if long {
                line += "\n    album: \(label.album ?? "-")"
                let hash = row.file.preferredHash.map { "\($0.kind.rawValue):\($0.value)" } ?? "-"
                line += "\n    hash: \(TerminalText.escape(hash))  mime: \(TerminalText.escape(row.file.mimeType ?? "-"))"
                line += "\n    local: \(row.sealed ? "- (encrypted in the cache: play it through 'cloudsync serve')" : row.state == .complete ? TerminalText.escape(row.localURL.path) : "-")"
            }
            out += line + "\n"
        }
        return out
    }

    /// `N tracks, SIZE; M cached[, K head only]`: what `ls` prints on stderr after the table. Tracks whose head
    /// alone is cached start at once too, so a library larger than the budget does not read as "0 cached".
    static func summary(_ rows: [CacheEntryInfo]) -> String {
        let cached = rows.filter { $0.state == .complete }.count
        let heads = rows.filter { stateText($0) == "head" }.count
        let bytes = rows.reduce(Int64(0)) { $0.addingSaturating($1.file.size) }
        let sealed = rows.contains { $0.sealed && $0.presentBytes > 0 }
        return "\(rows.count == 1 ? "1 track" : "\(rows.count) tracks"), \(ByteSize.format(bytes)); \(cached) cached"
            + (heads > 0 ? ", \(heads) head only" : "")
            + (sealed ? " (stored encrypted: players read them through 'cloudsync serve', not from tracks/)" : "") + "\n"
    }

    /// One line per track for scripts, fields separated by tabs: remote, path, state (`cached`, `head`, `partial`,
    /// `missing`, `outdated`), size in bytes, cached bytes, modified (ISO 8601, UTC). No header and no summary;
    /// control characters in names (tabs and newlines included) are written as `\t`, `\n`, `\xHH`.
    static func tsv(_ rows: [CacheEntryInfo]) -> String {
        var out = ""
        for row in rows {
            let state = row.state != .complete && row.outdatedTrackBytes > 0 ? "outdated" : row.stateName
            out += "\(TerminalText.escape(row.remote))\t\(TerminalText.escape(row.path))\t\(state)\t\(row.file.size)\t\(row.presentBytes)\t\(RFC3339.format(row.file.modified))\n"
        }
        return out
    }

    /// One object per row, keys in sorted order. Written by hand: JSONSerialization with sorted keys spent
    /// 15x the time of the table on 100,000 rows (ICU collation per key; bench/README.md).
    static func json(_ rows: [CacheEntryInfo]) throws -> String {
        var out = "["
        out.reserveCapacity(rows.count * 300)
        for (i, row) in rows.enumerated() {
            if i > 0 { out += "," }
            let hashes = row.file.hashes.sorted { $0.kind.rawValue < $1.kind.rawValue }
                .map { "\(JSONText.string($0.kind.rawValue)):\(JSONText.string($0.value))" }.joined(separator: ",")
            let state = row.stateName
            let label = TrackLabel(row)
            out += "{\"cached_bytes\":\(row.presentBytes),\(TrackColumns.jsonDuration(label)),\"hashes\":{\(hashes)}"
            out += ",\"head_bytes\":\(row.startSet.map { String($0.byteCount) } ?? "null")"
            // An encrypted track's file is ciphertext: no local path a player could open.
            out += ",\"local_path\":\(row.state == .complete && !row.sealed ? JSONText.string(row.localURL.path) : "null")"
            out += ",\"mime\":\(row.file.mimeType.map(JSONText.string) ?? "null")"
            out += ",\"modified\":\(JSONText.string(RFC3339.format(row.file.modified)))"
            out += ",\"outdated\":\(row.state != .complete && row.outdatedTrackBytes > 0)"
            out += ",\"deleted_remotely\":\(row.deletedRemotely != nil),\"encrypted\":\(row.sealed)"
            out += ",\"path\":\(JSONText.string(row.path)),\"remote\":\(JSONText.string(row.remote))"
            out += ",\"size\":\(row.file.size),\"state\":\(JSONText.string(state)),\(TrackColumns.jsonTags(label))}"
        }
        return out + "]\n"
    }
}
