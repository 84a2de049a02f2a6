import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncEngine
import Foundation

/// `cloudsync status`: "is my music ready?" on one screen, from the index and the kernel's lock table only
/// (no network, no lock taken, so it is safe beside a running pull or serve).
struct StatusCommand {
    let context: CommandContext

    func run() throws -> ExitCode {
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let cache = try setup.openCache(config)
        let status = try cache.status()
        let limit = try setup.budget(config, cache: cache).budget(held: status.bytesPresent)
        let free = try cache.freeDiskBytes()
        let runs = try cache.pullRuns()
        let byName = Dictionary(status.remotes.map { ($0.remote, $0) }, uniquingKeysWith: { a, _ in a })
        // Configured remotes first (in config order), then remotes only the index still knows.
        var names = config.remotes.map(\.name)
        names += status.remotes.map(\.remote).filter { !names.contains($0) }
        if let only = context.arguments.value("remote") {
            try Setup.checkRemoteName(only, in: config, option: "--remote", alsoKnown: { status.remotes.map(\.remote) })
            names = [only]
        }
        let rows = names.map { name in
            Row(name: name, provider: config.remotes.first { $0.name == name }?.provider.rawValue,
                counts: byName[name], run: runs[name], puller: cache.pullLockHolder(remote: name))
        }
        let serves = cache.serveHolders()
        // Whether every head fits: the plan over the index (only for a library bigger than the budget).
        let plan = status.libraryBytes > limit ? try setup.budget(config, cache: cache).plan().0 : nil
        if context.json {
            context.console.out(try json(rows: rows, serves: serves, status: status, limit: limit, free: free, plan: plan, config: config))
        } else {
            context.console.out(text(rows: rows, serves: serves, status: status, limit: limit, free: free, plan: plan, config: config))
        }
        return .ok
    }

    struct Row {
        var name: String
        var provider: String?
        var counts: RemoteStatus?
        var run: PullRun?
        var puller: LockHolder?

        /// How the last pull stands, accounting for one that was killed (started, never ended, lock free).
        var outcome: String? {
            guard let run else { return nil }
            if run.outcome == .running && puller == nil { return "killed" }
            return run.outcome.rawValue
        }
    }

    private func text(rows: [Row], serves: [LockHolder], status: CacheStatus, limit: Int64, free: Int64, plan: CachePlan?,
                      config: Configuration) -> String {
        var out = "cache \(status.root.path): \(ByteSize.format(status.bytesPresent)) used of a \(ByteSize.format(limit)) budget, "
            + "\(ByteSize.format(free)) free on its disk\n"
        var tracks = 0, instant = 0
        for row in rows {
            out += "\n\(TerminalText.escape(row.name))\(row.provider.map { " (\($0))" } ?? " (not in the config)")\n"
            if let c = row.counts {
                tracks += c.tracks
                instant += c.complete + c.headOnly
                out += "  tracks      \(counted(c.tracks, "track")): \(c.complete) complete, \(c.headOnly) head only, "
                    + "\(c.partial) partial, \(c.missing) missing\n"
                out += "  bytes       \(ByteSize.format(c.bytesPresent)) cached of \(ByteSize.format(c.libraryBytes))\n"
            } else {
                out += "  tracks      none indexed yet: run 'cloudsync pull --remote \(TerminalText.escape(row.name))'\n"
            }
            if let run = row.run {
                var line = "  last pull   \(Self.localTime(run.started))"
                if let ended = run.ended { line += ", \(Self.duration(ended.timeIntervalSince(run.started)))" }
                line += ": \(row.outcome ?? "")"
                if run.outcome != .running {
                    line += ", fetched \(counted(run.fetchedFiles, "track")) (\(ByteSize.format(run.fetchedBytes)))"
                    if run.failed > 0 { line += ", \(run.failed) failed" }
                }
                out += line + "\n"
                if let message = run.message { out += "  why         \(TerminalText.escape(message))\n" }
            } else {
                out += "  last pull   never\n"
            }
            if let puller = row.puller { out += "  now         pulling (pid \(puller.pid))\n" }
        }
        out += "\n"
        for serve in serves { out += "serve         \(serve.detail.isEmpty ? "running" : serve.detail) (pid \(serve.pid))\n" }
        if serves.isEmpty { out += "serve         not running\n" }
        out += "ready         \(instant) of \(counted(tracks, "track")) start at once offline"
        if tracks > instant {
            out += "; \(tracks - instant) \(tracks - instant == 1 ? "needs" : "need") the network"
            if let plan, !plan.allHeadsFit {
                out += " (the heads do not all fit: \(headsAdvice(plan.headsBytes, limitedByDisk: limit < config.cache.maxSize)))"
            }
        }
        if let plan, let full = plan.fullHeadsBytes {
            out += "\n              \(shortenedAdvice(plan.heads, fullHeadsBytes: full, limitedByDisk: limit < config.cache.maxSize))"
        }
        return out + "\n"
    }

    private func json(rows: [Row], serves: [LockHolder], status: CacheStatus, limit: Int64, free: Int64, plan: CachePlan?,
                      config: Configuration) throws -> String {
        var tracks = 0, instant = 0
        let remotes: [[String: Any]] = rows.map { row in
            var object: [String: Any] = ["remote": row.name, "provider": row.provider ?? NSNull(),
                                         "pulling_pid": row.puller.map { Int($0.pid) } ?? NSNull()]
            if let c = row.counts {
                tracks += c.tracks
                instant += c.complete + c.headOnly
                object.merge(["tracks": c.tracks, "complete": c.complete, "head": c.headOnly, "partial": c.partial,
                              "missing": c.missing, "bytes": c.bytesPresent, "library_bytes": c.libraryBytes]) { a, _ in a }
            } else {
                object.merge(["tracks": 0, "complete": 0, "head": 0, "partial": 0, "missing": 0, "bytes": 0,
                              "library_bytes": 0]) { a, _ in a }
            }
            if let run = row.run {
                object["last_pull"] = [
                    "started": Self.iso(run.started), "ended": run.ended.map(Self.iso) ?? NSNull(),
                    "outcome": row.outcome ?? run.outcome.rawValue,
                    // A pull still running, or killed, has no exit code yet (null, not 0).
                    "exit_code": run.ended == nil ? NSNull() : Int(run.exitCode) as Any,
                    "fetched_files": run.fetchedFiles, "fetched_bytes": run.fetchedBytes, "failed": run.failed,
                    "message": run.message ?? NSNull(),
                ] as [String: Any]
            } else {
                object["last_pull"] = NSNull()
            }
            return object
        }
        let object: [String: Any] = [
            "cache": ["path": status.root.path, "bytes": status.bytesPresent, "budget": limit,
                      "max_size": config.cache.maxSize, "free_disk": free, "library_bytes": status.libraryBytes,
                      "heads_fit": plan?.allHeadsFit ?? true, "heads_bytes": plan?.headsBytes ?? NSNull(),
                      "full_heads_bytes": plan?.fullHeadsBytes.map { $0 as Any } ?? NSNull()] as [String: Any],
            "remotes": remotes,
            "serves": serves.map { ["pid": Int($0.pid), "url": $0.detail] },
            "ready": ["tracks": tracks, "instant": instant, "need_network": tracks - instant],
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }


    /// Local time with its zone, e.g. `2026-12-02 05:10:03 +0100`.
    static func localTime(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd HH:mm:ss Z"
        return f.string(from: date)
    }

    static func iso(_ date: Date) -> String { RFC3339.format(date) }

    static func duration(_ seconds: TimeInterval) -> String {
        let s = max(0, Int(seconds.rounded()))
        if s < 60 { return "\(s) s" }
        if s < 3600 { return "\(s / 60) min \(s % 60) s" }
        return "\(s / 3600) h \(s % 3600 / 60) min"
    }
}
