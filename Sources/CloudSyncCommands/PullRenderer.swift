import CloudSyncCore
import CloudSyncEngine
import Foundation
import Synchronization

/// Renders pull progress on stderr: live lines on a terminal; otherwise one line per finished file and a
/// summary per remote (what a cron mail contains). `--quiet` keeps errors only.
final class PullRenderer: Sendable {
    let console: Console
    let quiet: Bool
    let dryRun: Bool
    private let state = Mutex(State())

    struct Active {
        var size: Int64
        var done: Int64
    }

    struct State {
        var total = 0
        var finished = 0
        var totalBytes: Int64 = 0
        var doneBytes: Int64 = 0
        var active: [String: Active] = [:]
        var started = Date()
        var lastDraw = Date.distantPast
        var drawnLines = 0
        /// The cache against its budget after the last remote planned.
        var budget: BudgetSummary?
    }

    init(console: Console, quiet: Bool, dryRun: Bool) {
        self.console = console
        self.quiet = quiet
        self.dryRun = dryRun
    }

    var live: Bool { console.stderrIsTTY && !quiet }

    @Sendable func handle(_ event: SyncEvent) {
        switch event {
        case .listing(let remote):
            if live { console.err("\(remote): listing…\n") }
        case .listed:
            break
        case .planned(let remote, let plan):
            state.withLock {
                $0.total = plan.fetch.count
                $0.totalBytes = plan.fetchBytes
                $0.finished = 0
                $0.doneBytes = 0
                $0.started = Date()
            }
            if dryRun {
                for item in plan.fetch {
                    console.out("would fetch  \(ByteSize.format(item.missingBytes).leftPad(9))  \(remote)/\(item.file.path)\(item.changed ? "  (changed)" : "")\n")
                }
                for path in plan.remove { console.out("would remove             \(remote)/\(path)\n") }
                console.out("\(remote): \(plan.fetch.count) to fetch (\(ByteSize.format(plan.fetchBytes))), \(plan.remove.count) to remove, \(plan.upToDate) up to date\n")
            } else if !quiet && !plan.fetch.isEmpty {
                console.err("\(remote): \(plan.fetch.count) files to fetch (\(ByteSize.format(plan.fetchBytes))), \(plan.upToDate) up to date\n")
            }
        case .fileStarted(_, let path, let size, let missing):
            state.withLock { $0.active[path] = Active(size: size, done: size - missing) }
            draw()
        case .progress(_, let path, let bytes):
            state.withLock {
                $0.active[path]?.done += bytes
                $0.doneBytes += bytes
            }
            draw()
        case .fileFinished(let remote, let path, let result):
            let line: String? = state.withLock { s in
                s.active[path] = nil
                switch result {
                case .completed(let fetched, let kind):
                    s.finished += 1
                    return quiet ? nil : "fetched  \(ByteSize.format(fetched).leftPad(9))  \(remote)/\(path)\(kind.map { "  (\($0.rawValue) ok)" } ?? "")"
                case .headCached:
                    return nil
                case .failed(let message, _):
                    s.finished += 1
                    return "\(console.paint("failed", "31"))   \(remote)/\(path): \(message)"
                }
            }
            if let line { clearLive(); console.err(line + "\n"); draw(force: true) }
        case .removed(let remote, let path, let keptPinned):
            if !quiet {
                clearLive()
                console.err(keptPinned ? "kept     \(remote)/\(path) (deleted remotely, but pinned)\n" : "removed  \(remote)/\(path) (deleted remotely)\n")
            }
        case .warning(let remote, let message):
            clearLive()
            console.err("cloudsync: warning: \(remote): \(message)\n")
        case .budget(_, let summary, let reduced):
            state.withLock { $0.budget = summary }
            if dryRun {
                for item in reduced {
                    let verb = item.action == "head" ? "would shrink" : "would evict "
                    console.out("\(verb) \(ByteSize.format(item.bytes).leftPad(9))  \(item.remote)/\(item.path)\(item.action == "head" ? "  (keeps its head)" : "")\n")
                }
                if let summary { console.out(Self.budgetLine(summary, after: true) + "\n") }
            } else if !quiet {
                clearLive()
                for item in reduced {
                    let verb = item.action == "head" ? "shrunk " : "evicted"
                    console.err("\(verb)  \(ByteSize.format(item.bytes).leftPad(9))  \(item.remote)/\(item.path)\(item.action == "head" ? " (its head stays)" : "")\n")
                }
            }
        }
    }

    /// The one line a run prints when the library does not fit its budget (not an error: exit 0).
    func finish() {
        guard !quiet, !dryRun, let summary = state.withLock({ $0.budget }), summary.libraryExceedsBudget else { return }
        clearLive()
        console.err(Self.budgetLine(summary, after: false) + "\n")
    }

    static func budgetLine(_ s: BudgetSummary, after: Bool) -> String {
        let tracks = { (n: Int) in n == 1 ? "1 track" : "\(n) tracks" }
        var line = after ? "after the pull: " : ""
        line += s.libraryExceedsBudget
            ? "library \(ByteSize.format(s.libraryBytes)) > budget \(ByteSize.format(s.budget)): "
            : "library \(ByteSize.format(s.libraryBytes)) within budget \(ByteSize.format(s.budget)): "
        line += "\(tracks(s.complete)) complete, \(s.headOnly) heads only"
        if s.none > 0 { line += ", \(tracks(s.none)) without a head (the heads alone do not fit)" }
        if s.pinnedOverBudget { line += "; pinned tracks alone exceed the budget" }
        if s.libraryExceedsBudget && !after { line += "; pin what you want offline" }
        return line
    }

    func summary(_ report: SyncReport) {
        clearLive()
        guard !quiet || !report.failed.isEmpty || !report.unreadableFolders.isEmpty, !dryRun else { return }
        let elapsed = state.withLock { Date().timeIntervalSince($0.started) }
        var line = "\(report.remote): \(report.listed) listed, \(report.new) new, \(report.changed) changed, \(report.deleted) deleted; "
        line += "fetched \(report.fetchedFiles) files (\(ByteSize.format(report.fetchedBytes))) in \(String(format: "%.1f", elapsed)) s"
        line += report.failed.isEmpty ? "" : "; \(report.failed.count) failed"
        if !report.unreadableFolders.isEmpty {
            // Every one is named: they are what a person has to look at (their new tracks were not fetched).
            let names = report.unreadableFolders.map { $0.isEmpty ? "/" : $0 }.joined(separator: ", ")
            line += "; \(report.unreadableFolders.count) folder(s) could not be read: \(names)"
        }
        if report.fatal == nil { console.err(line + "\n") }
    }

    // MARK: - Live lines (terminal only)

    private func draw(force: Bool = false) {
        guard live else { return }
        let text: String? = state.withLock { s in
            let now = Date()
            guard force || now.timeIntervalSince(s.lastDraw) >= 0.1 else { return nil }
            s.lastDraw = now
            let elapsed = max(0.001, now.timeIntervalSince(s.started))
            let speed = Double(s.doneBytes) / elapsed
            let remaining = max(0, s.totalBytes - s.doneBytes)
            let eta = speed > 0 ? formatDuration(Double(remaining) / speed) : "--:--"
            var lines = ["[\(s.finished)/\(s.total)] \(ByteSize.format(s.doneBytes)) / \(ByteSize.format(s.totalBytes))  \(ByteSize.format(Int64(speed)))/s  ETA \(eta)"]
            for (path, a) in s.active.sorted(by: { $0.key < $1.key }).prefix(8) {
                let pct = a.size > 0 ? Int(Double(a.done) * 100 / Double(a.size)) : 100
                lines.append("  \(String(pct).leftPad(3))%  \(path)")
            }
            var out = String(repeating: "\u{1B}[1A\u{1B}[2K", count: s.drawnLines)
            out += lines.map { "\u{1B}[2K" + $0 }.joined(separator: "\n") + "\n"
            s.drawnLines = lines.count
            return out
        }
        if let text { console.err(text) }
    }

    private func clearLive() {
        guard live else { return }
        let text: String = state.withLock { s in
            defer { s.drawnLines = 0 }
            return String(repeating: "\u{1B}[1A\u{1B}[2K", count: s.drawnLines)
        }
        if !text.isEmpty { console.err(text) }
    }
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
