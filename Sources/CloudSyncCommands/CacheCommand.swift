import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncEngine
import CloudSyncHTTP
import Foundation

/// `cloudsync cache status|evict|verify|pin|unpin|clear|path`.
struct CacheCommand {
    let context: CommandContext

    /// What `cache pin` warns of once the pins are in the plan: pinned tracks over the budget, or other tracks
    /// left without a head. nil when every head still fits.
    private func pinWarning(_ plan: CachePlan) -> String? {
        if plan.pinnedOverBudget {
            return "pinned tracks alone need more than the budget of \(ByteSize.format(plan.budget)): pulls keep them complete "
                + "all the same, and no other track keeps a byte; unpin some ('cloudsync cache unpin PATH') or raise cache.max_size"
        }
        guard !plan.allHeadsFit else { return nil }
        return "with the pinned tracks complete, \(counted(plan.noneCount, "track has", "tracks have")) no room for a head (a budget of "
            + "about \(ByteSize.format(plan.headsBytes)) fits every head): those need the network to start; unpin some or raise cache.max_size"
    }

    /// What `cache status` says of a library bigger than the budget, from the plan over the index.
    private func fits(_ plan: CachePlan, limitedByDisk: Bool) -> String {
        if plan.pinnedOverBudget {
            return " (it does not fit, nor do the pinned tracks alone: they are kept complete, no other track keeps a byte)"
        }
        if plan.allHeadsFit { return " (it does not fit: every track keeps its head, the most recently played are complete)" }
        return " (it does not fit, nor do its heads: \(counted(plan.noneCount, "track has", "tracks have")) none; "
            + "\(headsAdvice(plan.headsBytes, limitedByDisk: limitedByDisk)))"
    }

    /// The heads line of `cache status`: the policy and where it comes from.
    private func headsLine(_ heads: HeadPolicy, plan: CachePlan?, config: Configuration, limitedByDisk: Bool) -> String {
        guard let full = plan?.fullHeadsBytes else {
            return "at least \(heads) (pull.head_first, pull.head_seconds)"
        }
        return "at least \(heads), shortened \(shortenedReason(fullHeadsBytes: full, limitedByDisk: limitedByDisk))"
    }

    func run(_ sub: String) throws -> ExitCode {
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let console = context.console
        // -q: errors only. Reports a command exists for (status, verify, path) still print.
        let quiet = context.arguments.has("quiet")
        if sub == "path" && context.arguments.positionals.isEmpty {
            console.out(config.cache.dir.path + "\n")
            return .ok
        }
        if sub == "encrypt" || sub == "decrypt" { return try convert(sealing: sub == "encrypt", config: config) }
        let cache = try setup.openCache(config)
        switch sub {
        case "status":
            let s = try cache.status()
            let budget = setup.budget(config, cache: cache)
            let limit = try budget.budget(held: s.bytesPresent)
            let free = try cache.freeDiskBytes()
            let floor = budget.freeFloor
            // What fits: the plan over the index (start sets not analysed yet at their estimate).
            let plan = s.libraryBytes > limit ? try budget.plan().0 : nil
            // The heads the next pull keeps: the configured ones, or shorter ones the library's heads fit.
            let heads = plan?.heads ?? budget.settings.heads
            let stale = try s.remotes.reduce(0) { $0 + (try SyncOptions.staleStartSets(in: cache, remote: $1.remote, heads: heads)) }
            if context.json {
                let remotes: [[String: Any]] = s.remotes.map {
                    ["remote": $0.remote, "tracks": $0.tracks, "complete": $0.complete, "head": $0.headOnly,
                     "partial": $0.partial, "missing": $0.missing, "bytes": $0.bytesPresent, "library_bytes": $0.libraryBytes]
                }
                let object: [String: Any] = [
                    "path": s.root.path, "entries": s.entries, "complete": s.complete, "partial": s.partial,
                    "pinned": s.pinned, "bytes": s.bytesPresent, "max_size": config.cache.maxSize,
                    "budget": limit, "min_free": config.cache.minFree, "free_disk": free,
                    "library_bytes": s.libraryBytes, "max_age_s": config.cache.maxAge ?? NSNull(), "remotes": remotes,
                    "heads_fit": plan?.allHeadsFit ?? true, "heads_bytes": plan?.headsBytes ?? NSNull(),
                    "head_first": config.pull.headFirst, "head_seconds": config.pull.headSeconds,
                    "heads": ["first": heads.audioBytes, "seconds": heads.seconds, "tail": heads.tailBytes] as [String: Any],
                    "full_heads_bytes": plan?.fullHeadsBytes.map { $0 as Any } ?? NSNull(),
                    "mean_head_bytes": s.meanStartBytes.map { $0 as Any } ?? NSNull(), "heads_to_derive": stale,
                ]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                console.out(String(decoding: data, as: UTF8.self) + "\n")
            } else {
                var text = """
                path:     \(s.root.path)
                budget:   \(ByteSize.format(limit)) (max_size \(ByteSize.format(config.cache.maxSize)); \
                keeps \(ByteSize.format(floor)) of the disk free\(floor > config.cache.minFree ? " for its index" : ""), \
                \(ByteSize.format(free)) free now)
                used:     \(ByteSize.format(s.bytesPresent)) for a library of \(ByteSize.format(s.libraryBytes))\
                \(plan.map { fits($0, limitedByDisk: limit < config.cache.maxSize) } ?? "")
                tracks:   \(s.entries) (\(s.complete) complete, \(s.pinned) pinned)
                heads:    \(headsLine(heads, plan: plan, config: config, limitedByDisk: limit < config.cache.maxSize))\
                \(s.meanStartBytes.map { "; \(ByteSize.format($0)) a track on average over \(counted(s.analysedStartSets, "track")) analysed" } ?? "")\
                \(stale > 0 ? "; \(stale) computed under other settings, derived again by the next pull" : "")
                max age:  \(config.cache.maxAge.map { "tracks unused for \(Int($0 / 86400)) days keep only their heads" } ?? "off")

                """
                for r in s.remotes {
                    text += "\(TerminalText.escape(r.remote)): \(counted(r.tracks, "track")), \(r.complete) complete, \(r.headOnly) head only, "
                        + "\(r.partial) partial, \(r.missing) missing; \(ByteSize.format(r.bytesPresent)) of \(ByteSize.format(r.libraryBytes))\n"
                }
                console.out(text)
            }
        case "evict":
            let dryRun = context.arguments.has("dry-run")
            let budget = budget(config, cache)
            // Heads shortened to fit are derived from the cached bytes first, so shrinking keeps the shorter ones.
            let heads = dryRun ? nil : try budget.fitHeads()
            let (plan, tracks) = try budget.plan(heads: heads)
            let report = try budget.reduce(to: plan, tracks: tracks, dryRun: dryRun)
            for e in report.items where !quiet {
                let verb = e.action == "head" ? (dryRun ? "would shrink" : "shrunk") : (dryRun ? "would evict" : "evicted")
                console.out("\(verb.rightPad(12)) \(ByteSize.format(e.bytes).leftPad(9))  \(TerminalText.escape("\(e.remote)/\(e.path)"))\(e.action == "head" ? "  (keeps its head)" : "")\n")
            }
            for busy in report.busy { console.err("cloudsync: \(TerminalText.escape(busy)) is being written by another process; left as it is\n") }
            let after = try cache.heldBytes()
            if !quiet { console.out("\(counted(report.items.count, "track")), \(ByteSize.format(report.freedBytes)) \(dryRun ? "would be freed" : "freed"); "
                + "cache now \(ByteSize.format(dryRun ? after - report.freedBytes : after)) of a \(ByteSize.format(plan.budget)) budget\n") }
        case "verify":
            let report = try cache.verify { expected, bytes in
                var hasher = makeHasher(for: expected.kind)
                try bytes.forEachChunk { chunk in chunk.withUnsafeBytes { hasher.update($0) } }
                return hasher.finalize()
            }
            if context.json {
                let object: [String: Any] = ["checked": report.checked, "skipped_no_hash": report.skippedNoHash,
                                             "mismatched": report.mismatched, "vanished": report.vanished,
                                             "wrong_size": report.wrongSize, "mtime_drift": report.mtimeDrift,
                                             "damaged": report.damaged]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                console.out(String(decoding: data, as: UTF8.self) + "\n")
            } else {
                let e = TerminalText.escape
                for m in report.mismatched { console.out("mismatch  \(e(m))  (removed; the next pull fetches it again)\n") }
                for m in report.wrongSize { console.out("size      \(e(m))  (not the remote's size; removed, the next pull fetches it again)\n") }
                for v in report.vanished { console.out("missing   \(e(v))  (marked for refetch)\n") }
                for d in report.mtimeDrift { console.out("mtime     \(e(d))  (modified time differs from the remote's; bytes kept)\n") }
                for d in report.damaged { console.out("damaged   \(e(d))  (a block failed its authentication check; dropped, fetched again)\n") }
                console.out("\(report.checked) checked, \(report.mismatched.count) mismatched, \(report.wrongSize.count) of the wrong size, "
                    + "\(report.vanished.count) missing, \(report.mtimeDrift.count) with another mtime"
                    + (cache.encryption.key != nil ? ", \(report.damaged.count) with a damaged block" : "")
                    + "; \(report.skippedNoHash) without a hash (size compared)\n")
            }
            return report.mismatched.isEmpty && report.vanished.isEmpty && report.wrongSize.isEmpty && report.damaged.isEmpty
                ? .ok : .partialFailure
        case "pin", "unpin":
            let remote = try singleRemote(config)
            // pin takes the filter flags (unpin does not): only the tracks under PATH that pass them.
            let filter = sub == "pin" ? try FilterOptions.filter(context.arguments) : .everything
            let now = Date()
            // PATHs as pull, ls and rm read them (a track or folder, relative to the root or prefixed with the
            // remote's name), every one checked before any is pinned.
            let entries = try cache.entries(remote: remote)
            try Self.checkPaths(context.arguments.positionals, remote: remote, known: Set(entries.map(\.path)))
            for path in context.arguments.positionals {
                let selection = PathSelection([path], remote: remote)
                let matches = entries.filter {
                    selection.selects($0.path) && filter.includes($0.file.path, size: $0.file.size, modified: $0.file.modified, now: now)
                }
                if matches.isEmpty {
                    throw CacheError(.notFound, "no track '\(path)' in remote '\(remote)' passes the filters; see 'cloudsync ls --offline --remote \(remote)'")
                }
                for m in matches {
                    if sub == "pin" { try cache.pin(remote: remote, path: m.path) } else { try cache.unpin(remote: remote, path: m.path) }
                }
                let shown = path.split(separator: "/").joined(separator: "/")
                if !quiet { console.out("\(sub == "pin" ? "pinned" : "unpinned") \(counted(matches.count, "track")) under \(TerminalText.escape(shown.hasPrefix(remote + "/") || shown == remote ? shown : "\(remote)/\(shown)"))\n") }
            }
            // Pins come first in the budget: say so when they push other tracks' heads out.
            if sub == "pin", let warning = pinWarning(try budget(config, cache).plan().0) {
                console.err("cloudsync: warning: \(warning)\n")
            }
        case "clear":
            let remote = context.arguments.value("remote")
            // A remote gone from the config may still have cached tracks: those can be cleared too.
            try Setup.checkRemoteName(remote, in: config, option: "--remote", alsoKnown: { try cache.status().remotes.map(\.remote) })
            if !context.arguments.has("yes") {
                guard console.stdinIsTTY else {
                    throw UsageError(message: "cloudsync: cache clear deletes cached tracks; add --yes to confirm when not on a terminal",
                                     hint: "Run 'cloudsync cache clear --help' for usage.")
                }
                console.err("Delete every cached track\(remote.map { " of remote '\($0)'" } ?? "") in \(config.cache.dir.path)? [y/N] ")
                let answer = readLine()?.lowercased() ?? ""
                guard answer == "y" || answer == "yes" else {
                    console.err("nothing deleted\n")
                    return .ok
                }
            }
            let report = try cache.clear(remote: remote)
            if !quiet { console.out("cleared \(counted(report.evicted.count, "track")) (\(ByteSize.format(report.freedBytes))); pinned tracks kept: \(report.keptPinned)\n") }
            // As `cache rm` says it: a track a pull or serve is writing now is left to it (run clear again after).
            for busy in report.skippedBusy { console.err("cloudsync: \(TerminalText.escape(busy)) is being written by another process; left as it is\n") }
            if !report.skippedBusy.isEmpty { return .partialFailure }
        case "path":
            let args = context.arguments.positionals
            guard args.count == 2 else {
                throw UsageError(message: "cloudsync: cache path takes no argument or REMOTE PATH", hint: "Run 'cloudsync cache path --help' for usage.")
            }
            try Setup.checkRemoteName(args[0], in: config, option: "", alsoKnown: { try cache.status().remotes.map(\.remote) })
            guard let entry = try cache.entry(remote: args[0], path: args[1].trimmingCharacters(in: CharacterSet(charactersIn: "/"))) else {
                let known = try cache.knownPaths(remote: args[0])
                let selection = PathSelection([args[1]], remote: args[0])
                if known.contains(where: selection.selects) {
                    throw UsageError(message: "cloudsync: '\(args[1])' is a folder of remote '\(args[0])'; cache path takes one track",
                                     hint: "See 'cloudsync ls --offline --remote \(args[0]) \(args[1])'.")
                }
                let closest = selection.unmatched(in: known).first?.closest
                throw UsageError(message: "cloudsync: no track '\(args[1])' in remote '\(args[0])'" + (closest.map { " (the closest is '\($0)')" } ?? ""),
                                 hint: "See 'cloudsync ls --offline --remote \(args[0])'.")
            }
            if entry.sealed {
                // Ciphertext: no player can read the file itself.
                console.err("cloudsync: \(TerminalText.escape("\(args[0])/\(entry.path)")) is stored encrypted (cache.encrypt); "
                    + "play it through 'cloudsync serve'.\n")
                return .partialFailure
            }
            if entry.state == .complete {
                console.out(entry.localURL.path + "\n")
                return .ok
            }
            // Not complete: nothing is printed on stdout (a script must not open a file that is not there).
            let name = TerminalText.escape("\(args[0])/\(entry.path)")
            var text = "cloudsync: \(name) is not complete: "
            if entry.presentBytes > 0, let partial = try cache.partialURL(remote: args[0], path: entry.path) {
                text += "\(ByteSize.format(entry.presentBytes)) of \(ByteSize.format(entry.file.size)) are in \(partial.path) "
                    + "(a sparse file: the holes are zeros, not audio)"
            } else {
                text += "no byte of it is cached"
            }
            if entry.outdatedTrackBytes > 0 { text += "; \(entry.localURL.path) holds an older version" }
            text += ". Play it through 'cloudsync serve', or fetch it with 'cloudsync pull --remote \(args[0]) \(entry.path)'.\n"
            console.err(text)
            return .partialFailure
        case "rm":
            let remote = try singleRemote(config)
            let paths = context.arguments.positionals.map { $0.split(separator: "/").joined(separator: "/") }
            let known = try cache.knownPaths(remote: remote)
            let selection = PathSelection(paths, remote: remote)
            try Self.checkPaths(paths, remote: remote, known: known)
            let report = try cache.dropBytes(remote: remote, paths: known.filter(selection.selects).sorted())
            for e in report.evicted where !quiet { console.out("removed  \(ByteSize.format(e.bytes).leftPad(9))  \(TerminalText.escape("\(e.remote)/\(e.path)"))\n") }
            for busy in report.skippedBusy { console.err("cloudsync: \(TerminalText.escape(busy)) is being written by another process; left as it is\n") }
            if !context.arguments.has("quiet") {
                console.err("\(counted(report.evicted.count, "track")), \(ByteSize.format(report.freedBytes)) freed; they stay listed as missing and the next pull fetches them again\n")
            }
            return report.skippedBusy.isEmpty ? .ok : .partialFailure
        default:
            throw UsageError(message: "cloudsync: unknown cache command '\(sub)'", hint: "Run 'cloudsync cache --help' for usage.")
        }
        return .ok
    }

    /// `cache encrypt` / `cache decrypt`: converts every entry in place, resumably.
    private func convert(sealing: Bool, config: Configuration) throws -> ExitCode {
        let console = context.console
        let quiet = context.arguments.has("quiet")
        let cache = try Setup(context: context).openCacheForConversion(config, sealing: sealing)
        let verb = sealing ? "encrypted" : "decrypted"
        let report = try cache.convert(sealing: sealing) { name in
            if !quiet { console.out("\(verb)  \(TerminalText.escape(name))\n") }
        }
        for busy in report.skippedBusy {
            console.err("cloudsync: \(TerminalText.escape(busy)) is being written by another process; run 'cloudsync cache "
                + "\(sealing ? "encrypt" : "decrypt")' again when it is done\n")
        }
        if !quiet {
            var text = "\(counted(report.converted, "track")) \(verb) (\(ByteSize.format(report.convertedBytes)))"
            if report.droppedBytes > 0 {
                text += "; \(ByteSize.format(report.droppedBytes)) of incomplete blocks dropped (fetched again)"
            }
            console.out(text + "\n")
        }
        if report.finished && config.cache.encrypt != sealing {
            console.err("cloudsync: the cache is now \(sealing ? "encrypted" : "plaintext"); set cache.encrypt = \(sealing) in "
                + "\(config.file ?? "the configuration")\n")
        }
        return report.finished ? .ok : .partialFailure
    }

    private func budget(_ config: Configuration, _ cache: Cache) -> CacheBudget {
        Setup(context: context).budget(config, cache: cache)
    }

    private func singleRemote(_ config: Configuration) throws -> String {
        if let name = context.arguments.value("remote") {
            try Setup.checkRemoteName(name, in: config, option: "--remote")
            return name
        }
        guard config.remotes.count == 1, let only = config.remotes.first else {
            throw UsageError(message: "cloudsync: several remotes are configured; say which with --remote NAME",
                             hint: "Remotes: \(config.remotes.map(\.name).joined(separator: ", "))")
        }
        return only.name
    }
}

/// Hashes a whole file the way its provider prints `kind`.
func hashFile(at url: URL, kind: HashKind) throws -> String {
    let handle = try FileHandle(forReadingFrom: url)
    defer { try? handle.close() }
    var hasher = makeHasher(for: kind)
    while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
        chunk.withUnsafeBytes { hasher.update($0) }
    }
    return hasher.finalize()
}

extension CacheCommand {
    /// Throws a usage error naming the first PATH that selects nothing of `known` (with the closest path).
    static func checkPaths(_ paths: [String], remote: String, known: Set<String>) throws {
        if let miss = PathSelection(paths, remote: remote).unmatched(in: known).first {
            throw UsageError(message: "cloudsync: no track or folder '\(miss.path)' in remote '\(remote)'"
                + (miss.closest.map { " (the closest is '\($0)')" } ?? ""),
                hint: "See 'cloudsync ls --offline --remote \(remote)'.")
        }
    }
}
