import CloudSyncCore
import CloudSyncEngine
import Foundation
import Synchronization

/// Whether `pull` draws its live progress frame: `auto` on a terminal that moves the cursor (not TERM=dumb),
/// `on` / `off` from `--progress` / `--no-progress`.
enum ProgressMode: Sendable {
    case auto, on, off
}

/// Renders pull progress on stderr: a live frame on a terminal (redrawn in place, cut to its width, with
/// finished files, warnings and log lines printed above it); otherwise one line per finished file and a
/// summary per remote (what a cron mail contains). `--quiet` keeps errors only. Names from the cloud are
/// printed with control characters made visible (``TerminalText``).
final class PullRenderer: Sendable {
    let console: Console
    let quiet: Bool
    let dryRun: Bool
    /// `--json`: stdout holds the JSON summary only, so a dry run's plan is not printed as text.
    let json: Bool
    /// The live frame is drawn.
    let live: Bool
    private let state = Mutex(State())

    struct Active {
        var size: Int64
        var done: Int64
        /// Bytes of it arrived in this run. A pull opens twice `--jobs` files and lets `--jobs` transfer: the frame
        /// and `--stats` show the files whose bytes move, not those opened ahead and waiting for their turn.
        var moving = false
    }

    struct State {
        var total = 0
        var finished = 0
        var totalBytes: Int64 = 0
        var doneBytes: Int64 = 0
        /// Bytes arrived in this run, over every remote.
        var downloadedAny = false
        var upToDate = 0
        var active: [String: Active] = [:]
        var started = Date()
        var lastDraw = Date.distantPast
        /// The cache against its budget after the last remote planned.
        var budget: BudgetSummary?
    }

    init(console: Console, quiet: Bool, dryRun: Bool, json: Bool = false, progress: ProgressMode = .auto) {
        self.console = console
        self.quiet = quiet
        self.dryRun = dryRun
        self.json = json
        switch progress {
        case .off: live = false
        case .on: live = !console.dumbTerminal && !quiet && !dryRun
        case .auto: live = console.cursorMovement && !quiet && !dryRun
        }
    }

    @Sendable func handle(_ event: SyncEvent) {
        switch event {
        case .listing(let remote):
            if live { console.showFrame([DisplayWidth.cut("\(TerminalText.escape(remote)): listing…", to: console.width - 1)]) }
        case .listed:
            break
        case .planned(let remote, let plan):
            state.withLock {
                $0.total = plan.fetch.count
                $0.totalBytes = plan.fetchBytes
                $0.upToDate = plan.upToDate
                $0.finished = 0
                $0.doneBytes = 0
                $0.started = Date()
            }
            let name = TerminalText.escape(remote)
            if !dryRun {
                for move in plan.moved {
                    console.note("moved    \(name)/\(TerminalText.escape(move.from)) → \(TerminalText.escape(move.to))\n", quiet: quiet)
                }
            }
            guard dryRun, !json else { break }
            for move in plan.moved {
                console.out("would move               \(name)/\(TerminalText.escape(move.from)) → \(TerminalText.escape(move.to))\n")
            }
            for item in plan.fetch {
                let notes = [item.headOnly ? "head" : nil, item.changed ? "changed" : nil].compactMap { $0 }
                console.out("would fetch  \(ByteSize.format(item.missingBytes).leftPad(9))  \(name)/\(TerminalText.escape(item.file.path))"
                    + "\(notes.isEmpty ? "" : "  (\(notes.joined(separator: ", ")))")\n")
            }
            for path in plan.remove { console.out("would remove             \(name)/\(TerminalText.escape(path))\n") }
            let heads = plan.fetch.count(where: \.headOnly)
            let fetch = heads == 0 ? "\(plan.fetch.count) to fetch"
                : "\(plan.fetch.count - heads) to fetch and the heads of \(counted(heads, "more track", "more tracks"))"
            console.out("\(name): \(fetch) (\(ByteSize.format(plan.fetchBytes))), \(plan.remove.count) to remove, "
                + "\(plan.moved.isEmpty ? "" : "\(plan.moved.count) to move, ")\(plan.upToDate) up to date"
                + "\(plan.leftOut > 0 ? ", \(plan.leftOut) left out by the budget" : "")\n")
        case .scheduled(let remote, let files, let headsOnly, let bytes):
            // The budget decides what is really fetched: the totals of the progress frame come from here.
            let upToDate = state.withLock { s -> Int in
                s.total = files
                s.totalBytes = bytes
                return s.upToDate
            }
            if files + headsOnly > 0 {
                let heads = headsOnly > 0 ? " and the heads of \(counted(headsOnly, "more track", "more tracks"))" : ""
                console.note("\(TerminalText.escape(remote)): \(counted(files, "file")) to fetch\(heads) (\(ByteSize.format(bytes))), \(upToDate) up to date\n", quiet: quiet)
            }
        case .fileStarted(_, let path, let size, let missing):
            state.withLock { $0.active[path] = Active(size: size, done: size - missing) }
            draw()
        case .progress(_, let path, let bytes):
            state.withLock {
                $0.active[path]?.done += bytes
                $0.active[path]?.moving = true
                $0.doneBytes += bytes
                $0.downloadedAny = true
            }
            draw()
        case .fileFinished(let remote, let path, let result):
            let name = "\(TerminalText.escape(remote))/\(TerminalText.escape(path))"
            let line: (text: String, failed: Bool)? = state.withLock { s in
                s.active[path] = nil
                switch result {
                case .completed(let fetched, let kind):
                    s.finished += 1
                    return ("fetched  \(ByteSize.format(fetched).leftPad(9))  \(name)\(kind.map { "  (\($0.rawValue) ok)" } ?? "")", false)
                case .headCached:
                    return nil
                case .failed(let message, _):
                    s.finished += 1
                    return ("\(console.paint("failed", "31"))   \(name): \(TerminalText.escape(message))", true)
                }
            }
            if let line { console.note(line.text + "\n", quiet: quiet && !line.failed) }
            draw(force: true)
        case .removed(let remote, let path, let keptPinned):
            let name = "\(TerminalText.escape(remote))/\(TerminalText.escape(path))"
            console.note(keptPinned ? "kept     \(name) (deleted remotely, but pinned)\n" : "removed  \(name) (deleted remotely)\n", quiet: quiet)
        case .warning(let remote, let message):
            console.err("cloudsync: \(console.paint("warning:", "33")) \(TerminalText.escape(remote)): \(TerminalText.escape(message))\n")
        case .budget(_, let summary, let reduced):
            state.withLock { $0.budget = summary }
            if dryRun && json {
                break
            } else if dryRun {
                for item in reduced {
                    let verb = item.action == "head" ? "would shrink" : "would evict "
                    console.out("\(verb) \(ByteSize.format(item.bytes).leftPad(9))  \(TerminalText.escape(item.remote))/\(TerminalText.escape(item.path))\(item.action == "head" ? "  (keeps its head)" : "")\n")
                }
                if let summary { console.out(Self.budgetLine(summary, after: true) + "\n") }
            } else {
                // A head shrunk back to its start set was never complete: its extra bytes came with its first
                // request (metadata room). One line per such track buried what a person wants to see (a complete
                // track that is not offline any more) under hundreds on a first pull.
                for item in reduced where item.action != "head" || item.wasComplete {
                    let verb = item.action == "head" ? "shrunk " : "evicted"
                    console.note("\(verb)  \(ByteSize.format(item.bytes).leftPad(9))  \(TerminalText.escape(item.remote))/\(TerminalText.escape(item.path))\(item.action == "head" ? " (its head stays)" : "")\n", quiet: quiet)
                }
            }
        }
    }

    /// The one line a run prints when the library does not fit its budget (not an error: exit 0).
    func finish() {
        clearLive()
        guard !dryRun, let summary = state.withLock({ $0.budget }), summary.libraryExceedsBudget else { return }
        console.note(Self.budgetLine(summary, after: false) + "\n", quiet: quiet)
    }

    static func budgetLine(_ s: BudgetSummary, after: Bool) -> String {
        let tracks = { (n: Int) in counted(n, "track") }
        var line = after ? "after the pull: " : ""
        line += s.libraryExceedsBudget
            ? "library \(ByteSize.format(s.libraryBytes)) > budget \(ByteSize.format(s.budget)): "
            : "library \(ByteSize.format(s.libraryBytes)) within budget \(ByteSize.format(s.budget)): "
        line += "\(tracks(s.complete)) complete, \(s.headOnly) \(s.headOnly == 1 ? "head" : "heads") only"
        if s.none > 0 { line += ", \(tracks(s.none)) without a head (\(headsAdvice(s.headsBytes, limitedByDisk: s.limitedByDisk)))" }
        if s.fullHeadsBytes != nil && s.none > 0 {
            // Not "so that every track keeps one": some keep none even at the shortest step.
            line += "; heads shortened to \(s.heads.policy), and still not every track has one"
        } else if let full = s.fullHeadsBytes {
            line += "; \(shortenedAdvice(s.heads.policy, fullHeadsBytes: full, limitedByDisk: s.limitedByDisk))"
        }
        if s.pinnedOverBudget { line += "; pinned tracks alone exceed the budget" }
        if s.libraryExceedsBudget && !after { line += "; pin what you want offline" }
        return line
    }

    /// Whether any bytes arrived in this run (what an interruption has to say about them).
    var downloadedAny: Bool { state.withLock(\.downloadedAny) }

    func summary(_ report: SyncReport) {
        clearLive()
        guard !dryRun else { return }
        let failed = !report.failed.isEmpty || !report.unreadableFolders.isEmpty
        let elapsed = state.withLock { Date().timeIntervalSince($0.started) }
        var line = "\(TerminalText.escape(report.remote)): \(report.listed) listed, \(report.new) new, "
        if report.resumed > 0 { line += "\(report.resumed) resumed, " }
        line += "\(report.changed) changed, \(report.deleted) deleted"
        if report.moved > 0 { line += ", \(report.moved) moved" }
        line += "; "
        // Heads kept without their tails are fetched too (their bytes are in fetched_bytes): said, or the bytes
        // of a pull that fetched only heads read as bytes of no file.
        let heads = report.headsCached > 0 ? " and \(counted(report.headsCached, "head"))" : ""
        line += "fetched \(counted(report.fetchedFiles, "file"))\(heads) (\(ByteSize.format(report.fetchedBytes))) in \(String(format: "%.1f", elapsed)) s"
        line += report.failed.isEmpty ? "" : "; \(report.failed.count) failed"
        if !report.unreadableFolders.isEmpty {
            // Every one is named: they are what a person has to look at (their new tracks were not fetched).
            let names = report.unreadableFolders.map { $0.isEmpty ? "/" : TerminalText.escape($0) }.joined(separator: ", ")
            line += "; \(report.unreadableFolders.count == 1 ? "1 folder" : "\(report.unreadableFolders.count) folders") could not be read: \(names)"
        }
        if report.fatal == nil { console.note(line + "\n", quiet: quiet && !failed) }
    }

    // MARK: - Live frame (terminal only)

    /// The `--stats` line: `stats: 3 of 12 files, 40.1 MiB of 120 MiB (33 %), 4.1 MiB/s, 1:30 elapsed, 2 running`.
    func statsLine(now: Date = Date()) -> String {
        state.withLock { s in
            let elapsed = max(0.001, now.timeIntervalSince(s.started))
            let percent = s.totalBytes > 0 ? " (\(Int(Double(s.doneBytes) / Double(s.totalBytes) * 100)) %)" : ""
            return "stats: \(s.finished) of \(counted(s.total, "file")), \(ByteSize.format(s.doneBytes)) of "
                + "\(ByteSize.format(s.totalBytes))\(percent), \(ByteSize.format(Int64(Double(s.doneBytes) / elapsed)))/s, "
                + "\(formatDuration(elapsed)) elapsed, \(s.active.values.count(where: \.moving)) running"
        }
    }

    private func draw(force: Bool = false) {
        guard live else { return }
        let frame: ProgressFrame? = state.withLock { s in
            let now = Date()
            guard force || now.timeIntervalSince(s.lastDraw) >= 0.1 else { return nil }
            s.lastDraw = now
            let elapsed = max(0.001, now.timeIntervalSince(s.started))
            return ProgressFrame(finished: s.finished, total: s.total, doneBytes: s.doneBytes, totalBytes: s.totalBytes,
                                 speed: Double(s.doneBytes) / elapsed,
                                 files: s.active.filter(\.value.moving).sorted { $0.key < $1.key }
                                     .map { .init(name: $0.key, size: $0.value.size, done: $0.value.done) })
        }
        if let frame { console.showFrame(frame.lines(width: console.width)) }
    }

    private func clearLive() {
        if live { console.showFrame([]) }
    }
}

/// What a library whose heads do not all fit the budget needs (`pull`, `cache status`, `status` say it alike):
/// `headsBytes` is ``CachePlan/headsBytes``.
func headsAdvice(_ headsBytes: Int64, limitedByDisk: Bool) -> String {
    "a budget of about \(ByteSize.format(headsBytes)) fits every head: "
        + "\(limitedByDisk ? "free disk space (or lower cache.min_free)" : "raise cache.max_size to that") for every track to start at once"
}

/// What a library whose heads fit only shortened says (`pull`, `cache status`, `status` alike): `fullHeadsBytes` is
/// ``CachePlan/fullHeadsBytes``.
func shortenedAdvice(_ heads: HeadPolicy, fullHeadsBytes: Int64, limitedByDisk: Bool) -> String {
    "heads shortened to \(heads) \(shortenedReason(fullHeadsBytes: fullHeadsBytes, limitedByDisk: limitedByDisk))"
}

/// Why heads are shorter than configured, and what keeps the configured ones.
func shortenedReason(fullHeadsBytes: Int64, limitedByDisk: Bool) -> String {
    "so that every track keeps one (a budget of about \(ByteSize.format(HeadFit.budgetKeeping(fullHeadsBytes))) keeps pull.head_first and "
        + "pull.head_seconds: \(limitedByDisk ? "free disk space (or lower cache.min_free)" : "raise cache.max_size to that"))"
}

/// `1 file`, `2 files`: a count with the word in its singular or plural form.
func counted(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
    n == 1 ? "1 \(singular)" : "\(n) \(plural ?? singular + "s")"
}

func formatDuration(_ seconds: Double) -> String {
    guard seconds.isFinite else { return "--:--" }
    let s = Int(seconds)
    return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s % 3600 / 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
}

extension String {
    func leftPad(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
    func rightPad(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
