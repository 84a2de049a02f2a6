import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncEngine
import CloudSyncHTTP
import Foundation

/// `cloudsync pull`: one `Sync` per selected remote, progress on stderr, summary on stdout with --json.
struct PullCommand {
    let context: CommandContext

    func run() async throws -> ExitCode {
        let refused = BatchScheduling.enter()
        if refused > 0 { context.logger.debug("\(refused) thread(s) could not be moved to SCHED_BATCH; the pull runs as it is") }
        let args = context.arguments
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let remotes = try setup.selectedRemotes(config)
        var settings = config.pull
        if let jobs = try args.integer("jobs", in: 1 ... 64) { settings.jobs = jobs }
        if let segments = try args.integer("segments", in: 1 ... 16) { settings.segments = segments }
        let retries = try args.integer("retries", in: 0 ... 1000)
        if let rate = args.value("bwlimit") {
            if rate.lowercased() == "off" {
                settings.bwlimit = nil
            } else if let bytes = ByteSize.parseRate(rate), bytes > 0 {
                settings.bwlimit = bytes
            } else {
                throw UsageError(message: "cloudsync: --bwlimit expects a rate such as 2MiB/s or 'off', got '\(rate)'",
                                 hint: "Run 'cloudsync pull --help' for usage.")
            }
        }
        var headBytes = settings.headFirst
        if args.has("head-first") {
            let text = args.value("head-first") ?? ""
            if let size = ByteSize.parse(text), size > 0 {
                headBytes = size
            } else if !text.isEmpty {
                throw UsageError(message: "cloudsync: --head-first expects a size such as 512KiB, got '\(text)'",
                                 hint: "Run 'cloudsync pull --help' for usage.")
            }
        }
        var order: FetchOrder?
        if let text = args.value("order") {
            guard let parsed = FetchOrder(parsing: text) else {
                throw UsageError(message: "cloudsync: --order expects name, size, modified or added (optionally ,asc or ,desc), got '\(text)'",
                                 hint: "Run 'cloudsync pull --help' for usage.")
            }
            order = parsed
        }
        if args.has("refetch") && args.positionals.isEmpty {
            throw UsageError(message: "cloudsync: --refetch needs the PATHs to download again (it never drops the whole library)",
                             hint: "For example: cloudsync pull --refetch 'Album/01 Track.flac'")
        }
        let commandLineFilter = try FilterOptions.filter(args)
        let cache = try setup.openCache(config)
        let budget = setup.budget(config, cache: cache, headBytes: headBytes).settings
        var options = SyncOptions(jobs: settings.jobs, chunkSize: settings.chunkSize, segments: settings.segments,
                                  segmentThreshold: settings.segmentThreshold, headBytes: headBytes,
                                  headSeconds: settings.headSeconds, budget: budget,
                                  paths: args.positionals, dryRun: args.has("dry-run"), waitForLock: args.has("wait"),
                                  order: order)
        options.refetch = args.has("refetch")

        var transportOptions = CurlTransportOptions()
        transportOptions.bandwidth = settings.bwlimit.map { BandwidthLimiter(bytesPerSecond: $0) }
        transportOptions.apiTimeout = settings.apiTimeout
        let transport = try CurlTransport(options: transportOptions, logger: context.logger)
        let factory = setup.providerFactory(config, transport: transport, settings: settings)
        if args.has("progress") && args.has("no-progress") {
            throw UsageError(message: "cloudsync: --progress and --no-progress exclude each other", hint: "Run 'cloudsync pull --help' for usage.")
        }
        var statsEvery: TimeInterval?
        if let text = args.value("stats") {
            guard let seconds = TimeSpan.parse(text), seconds >= 1, seconds <= 86400 else {
                throw UsageError(message: "cloudsync: --stats expects a duration from 1s to 24h such as 30s or 1m, got '\(text)'",
                                 hint: "Run 'cloudsync pull --help' for usage.")
            }
            statsEvery = seconds
        }
        let progress: ProgressMode = args.has("progress") ? .on : args.has("no-progress") ? .off : .auto
        let renderer = PullRenderer(console: context.console, quiet: args.has("quiet"), dryRun: options.dryRun, json: context.json,
                                    progress: progress)
        let started = Date()
        // The handler goes in before the work starts: a signal while it waits for the lock must never meet the
        // default disposition, nor the moment the handler is being installed.
        let target = CancellationTarget()
        let interrupt = InterruptHandler { target.cancel() }
        defer { interrupt.stop() }
        let work = Task { () async throws -> ([SyncReport], ExitCode) in
            var reports: [SyncReport] = []
            var worst: ExitCode = .ok
            for remote in remotes {
                try Task.checkCancellation()
                var report = SyncReport(remote: remote.name, provider: remote.provider.rawValue)
                do {
                    // A dry run is a look, like ls: a host that cannot be reached at all is retried once, not ten times.
                    let built = try factory.make(remote, retries: retries,
                                                 unreachableRetries: options.dryRun ? retries ?? ListCommand.unreachableRetries : nil)
                    var remoteOptions = options
                    remoteOptions.filters = FilterOptions.filters(for: remote, commandLine: commandLineFilter)
                    remoteOptions.delete = settings.delete && !args.has("no-delete")
                    let sync = Sync(remote: remote.name, providerName: remote.provider.rawValue, provider: built.provider,
                                    transport: built.transport, pacer: built.pacer, cache: cache, options: remoteOptions,
                                    logger: context.logger, events: renderer.handle)
                    report = try await sync.run()
                    worst = max(worst, report.exitCode)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    report.fatal = String(describing: error)
                    worst = max(worst, (error as? any ExitCodeProviding)?.exitCode ?? .partialFailure)
                    context.console.err("cloudsync: \(context.console.paint("error:", "31")) \(TerminalText.escape(remote.name)): "
                        + "\(TerminalText.escape(CommandLineTool.message(of: error)))\n")
                }
                renderer.summary(report)
                reports.append(report)
            }
            renderer.finish()
            return (reports, worst)
        }
        target.set(work)
        // --stats: one line per period while the work runs (with -q, in the log file only).
        let stats = statsEvery.map { every in
            Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(every))
                    if Task.isCancelled { break }
                    context.console.note(renderer.statsLine() + "\n", quiet: args.has("quiet"))
                }
            }
        }
        defer { stats?.cancel() }
        let reports: [SyncReport]
        let worst: ExitCode
        do {
            (reports, worst) = try await work.value
        } catch is CancellationError {
            context.console.err(renderer.downloadedAny
                ? "cloudsync: interrupted; downloaded bytes are saved and the next pull resumes them\n"
                : "cloudsync: interrupted before any download\n")
            return interrupt.exitCode
        }
        if context.json {
            context.console.out(try jsonSummary(reports, duration: Date().timeIntervalSince(started)))
        }
        let unmatched = Self.unmatchedEverywhere(reports)
        for miss in unmatched {
            let listed = reports.filter { $0.fatal == nil }.map(\.remote)
            let near = miss.closest.map { "; the closest is '\(TerminalText.escape($0))'" } ?? ""
            context.console.err("cloudsync: \(context.console.paint("error:", "31")) no file or folder '\(TerminalText.escape(miss.path))' in "
                + "\(listed.count == 1 ? "remote \(listed[0])" : "remotes \(listed.joined(separator: ", "))")\(near) "
                + "(paths are relative to the remote's root and case-sensitive; see 'cloudsync ls')\n")
        }
        return unmatched.isEmpty ? worst : max(worst, .usage)
    }

    /// The PATHs that matched nothing in any remote that was listed (a PATH needs to exist in one of them),
    /// each with the first closest path found.
    static func unmatchedEverywhere(_ reports: [SyncReport]) -> [PathSelection.Unmatched] {
        let listed = reports.filter { $0.fatal == nil }
        guard let first = listed.first else { return [] }
        return first.unmatchedPaths.compactMap { miss -> PathSelection.Unmatched? in
            let everywhere = listed.allSatisfy { $0.unmatchedPaths.contains { $0.path == miss.path } }
            guard everywhere else { return nil }
            let closest = listed.lazy.compactMap { $0.unmatchedPaths.first { $0.path == miss.path }?.closest }.first
            return PathSelection.Unmatched(path: miss.path, closest: closest)
        }
    }

    private func jsonSummary(_ reports: [SyncReport], duration: TimeInterval) throws -> String {
        struct Summary: Encodable {
            var remotes: [SyncReport]
            var duration_s: Double
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(Summary(remotes: reports, duration_s: (duration * 1000).rounded() / 1000))
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}

extension ExitCode: Comparable {
    /// Severity for combining remotes' outcomes: any failure beats success; specific causes beat "some failed".
    public static func < (a: ExitCode, b: ExitCode) -> Bool { a.severity < b.severity }

    private var severity: Int {
        switch self {
        case .ok: 0
        case .partialFailure: 1
        default: 2 + Int(rawValue)
        }
    }
}
