import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// `cloudsync cache status|evict|verify|pin|unpin|clear|path`.
struct CacheCommand {
    let context: CommandContext

    func run(_ sub: String) throws -> ExitCode {
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let console = context.console
        if sub == "path" && context.arguments.positionals.isEmpty {
            console.out(config.cache.dir.path + "\n")
            return .ok
        }
        let cache = try setup.openCache(config)
        switch sub {
        case "status":
            let s = try cache.status()
            if context.json {
                let object: [String: Any] = [
                    "path": s.root.path, "entries": s.entries, "complete": s.complete, "partial": s.partial,
                    "pinned": s.pinned, "bytes": s.bytesPresent, "max_size": s.limits.maxSize,
                    "max_age_s": s.limits.maxAge ?? NSNull(),
                ]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                console.out(String(decoding: data, as: UTF8.self) + "\n")
            } else {
                console.out("""
                path:     \(s.root.path)
                entries:  \(s.entries) (\(s.complete) complete, \(s.partial) partial, \(s.pinned) pinned)
                size:     \(ByteSize.format(s.bytesPresent)) of \(ByteSize.format(s.limits.maxSize))
                max age:  \(s.limits.maxAge.map { "\(Int($0 / 86400)) days since last access" } ?? "none")

                """)
            }
        case "evict":
            let report = try cache.evict(dryRun: context.arguments.has("dry-run"))
            for e in report.evicted {
                console.out("\(report.dryRun ? "would evict" : "evicted")  \(ByteSize.format(e.bytes).leftPad(9))  \(e.remote)/\(e.path)  (\(e.reason))\n")
            }
            console.out("\(report.evicted.count) tracks, \(ByteSize.format(report.freedBytes)) \(report.dryRun ? "would be freed" : "freed"); cache now \(ByteSize.format(report.bytesAfter))\n")
        case "verify":
            let report = try cache.verify { url, expected in try hashFile(at: url, kind: expected.kind) }
            if context.json {
                let object: [String: Any] = ["checked": report.checked, "skipped_no_hash": report.skippedNoHash,
                                             "mismatched": report.mismatched, "vanished": report.vanished]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                console.out(String(decoding: data, as: UTF8.self) + "\n")
            } else {
                for m in report.mismatched { console.out("mismatch  \(m)  (removed; the next pull fetches it again)\n") }
                for v in report.vanished { console.out("missing   \(v)  (marked for refetch)\n") }
                console.out("\(report.checked) checked, \(report.mismatched.count) mismatched, \(report.vanished.count) missing, \(report.skippedNoHash) without a hash\n")
            }
            return report.mismatched.isEmpty && report.vanished.isEmpty ? .ok : .partialFailure
        case "pin", "unpin":
            let remote = try singleRemote(config)
            for path in context.arguments.positionals {
                let trimmed = path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
                let matches = try cache.entries(remote: remote).filter { $0.path == trimmed || $0.path.hasPrefix(trimmed + "/") }
                if matches.isEmpty {
                    throw CacheError(.notFound, "no track '\(path)' in remote '\(remote)'; see 'cloudsync ls --offline --remote \(remote)'")
                }
                for m in matches {
                    if sub == "pin" { try cache.pin(remote: remote, path: m.path) } else { try cache.unpin(remote: remote, path: m.path) }
                }
                console.out("\(sub == "pin" ? "pinned" : "unpinned") \(matches.count) track\(matches.count == 1 ? "" : "s") under \(remote)/\(trimmed)\n")
            }
        case "clear":
            let remote = context.arguments.value("remote")
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
            console.out("cleared \(report.evicted.count) tracks (\(ByteSize.format(report.freedBytes))); pinned tracks kept: \(report.keptPinned)\n")
        case "path":
            let args = context.arguments.positionals
            guard args.count == 2 else {
                throw UsageError(message: "cloudsync: cache path takes no argument or REMOTE PATH", hint: "Run 'cloudsync cache path --help' for usage.")
            }
            guard let entry = try cache.entry(remote: args[0], path: args[1].trimmingCharacters(in: CharacterSet(charactersIn: "/"))) else {
                throw CacheError(.notFound, "no track '\(args[1])' in remote '\(args[0])'; see 'cloudsync ls --offline'")
            }
            console.out(entry.localURL.path + "\n")
            return entry.state == .complete ? .ok : .partialFailure
        default:
            throw UsageError(message: "cloudsync: unknown cache command '\(sub)'", hint: "Run 'cloudsync cache --help' for usage.")
        }
        return .ok
    }

    private func singleRemote(_ config: Configuration) throws -> String {
        if let name = context.arguments.value("remote") {
            _ = try config.select(remote: name, provider: nil)
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
