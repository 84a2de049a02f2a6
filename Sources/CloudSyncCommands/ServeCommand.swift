import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncEngine
import CloudSyncHTTP
import CloudSyncServer
import Foundation

/// `cloudsync serve`: starts the track server on the configured remotes and runs until SIGINT/SIGTERM.
/// Prints `listening on http://ADDR:PORT/` on stdout once it accepts connections.
struct ServeCommand {
    let context: CommandContext

    func run() async throws -> ExitCode {
        let args = context.arguments
        let port = try args.integer("port", in: 0 ... 65535) ?? ServerOptions.defaultPort
        let token = try Self.token(args.value("token"), environment: context.environment)
        let options = ServerOptions(bind: args.value("bind") ?? "127.0.0.1", port: port, token: token)
        do {
            try options.validate()
        } catch let error as ServerError {
            throw UsageError(message: "cloudsync: \(error.message)", hint: "Run 'cloudsync serve --help' for usage.")
        }
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let cache = try setup.openCache(config)
        // Connection failures count as unreachable for API calls (link resolution) too, so the pacers'
        // unreachableRetries of 0 bound them as well; API calls have the configured deadline.
        var transportOptions = CurlTransportOptions()
        transportOptions.apiTimeout = config.pull.apiTimeout
        // A player waits on the first fetch after the network went away without a word (packets dropped: a dead
        // Wi-Fi, a VPN down): a connect that has not answered in 10 s will not, and until it fails the remote is
        // not marked offline (every request after it is answered at once). Pulls keep 30 s.
        transportOptions.connectTimeout = min(transportOptions.connectTimeout, Self.connectTimeout)
        let transport = try CurlTransport(options: transportOptions, logger: context.logger)
        let factory = setup.providerFactory(config, transport: transport)
        var sources: [String: OnDemand] = [:]
        var unavailable: [String: String] = [:]
        let remotes = try setup.selectedRemotes(config)
        for remote in remotes {
            do {
                // A player waits on these fetches: a cloud that cannot be reached is not retried (serve marks it
                // offline, answers 503 and probes in the background); other failures keep the usual retries.
                let built = try factory.make(remote, retries: nil, unreachableRetries: 0)
                sources[remote.name] = OnDemand(remote: remote.name, provider: built.provider, transport: built.transport,
                                                pacer: built.pacer, cache: cache, logger: context.logger)
            } catch {
                unavailable[remote.name] = String(describing: error)
                context.logger.warning("\(remote.name): \(CommandLineTool.message(of: error)); serving its cached bytes only")
            }
        }
        let openTracks = OpenTracks()
        let server = TrackServer(cache: cache, sources: sources, unavailable: unavailable, options: options,
                                 openTracks: openTracks, logger: context.logger)
        let bound = try server.start()
        // What players fetch stays within cache.max_size and cache.min_free, as a pull keeps it.
        let budget = setup.budget(config, cache: cache)
        let keeper = ServeBudgetKeeper(budget: budget, sources: Array(sources.values), openTracks: openTracks,
                                       logger: context.logger)
        keeper.start()
        defer { keeper.stop() }
        // A disk that other programs filled since the last round: a fetch asks for room rather than cut its player.
        for source in sources.values { source.whenTheDiskIsFull { await keeper.makeRoom() } }
        let shown = options.urlHost
        context.console.out("listening on http://\(shown):\(bound)/\n")
        let quiet = context.arguments.has("quiet")
        // `cloudsync status` shows the serves of this cache (locks/serve-<pid>.lock, gone with the process).
        let announcement = cache.announceServe(url: "http://\(shown):\(bound)/")
        defer { announcement?.withdraw() }
        if !quiet { context.console.err("cloudsync: playlist at http://\(shown):\(bound)/playlist.m3u; Ctrl-C stops\n") }
        // serve offers the index's tracks and lists nothing itself: a remote never listed offers none, which a
        // player shows as an empty library. The index is read per request, so a listing made now shows at once.
        if let status = try? cache.status() {
            // A disk that sets a budget below the library: what players fetch past it is dropped again once they
            // let go (a pull says the same).
            if let limit = try? budget.budget(), status.libraryBytes > limit, let message = budget.diskLimit(limit) {
                context.logger.warning("\(message); tracks played beyond it are fetched again each time")
            }
            let indexed = Dictionary(status.remotes.map { ($0.remote, $0.tracks) }, uniquingKeysWith: +)
            for remote in remotes where (indexed[remote.name] ?? 0) == 0 {
                context.logger.warning("\(remote.name): no track of this remote is in the index yet, so serve offers none: "
                    + "run 'cloudsync ls --remote \(remote.name)' (or a pull); its tracks then appear here without a restart")
            }
        }

        let (signals, continuation) = AsyncStream<Void>.makeStream()
        let interrupt = InterruptHandler { continuation.yield() }
        defer { interrupt.stop() }
        for await _ in signals { break }
        server.stop()
        if !quiet { context.console.err("cloudsync: serve stopped\n") }
        return .ok
    }

    /// The `--token` value: `env:VAR` (the variable's value), `file:PATH` (the file's first line), or the token
    /// itself (which `ps` shows to every user of the machine; the other two keep it off the command line).
    /// serve's connect timeout (TCP and TLS), seconds.
    static let connectTimeout: TimeInterval = 10

    static func token(_ value: String?, environment: [String: String]) throws -> String? {
        guard let value else { return nil }
        let hint = "Run 'cloudsync serve --help' for usage."
        if value.hasPrefix("env:") {
            let name = String(value.dropFirst(4))
            guard !name.isEmpty else { throw UsageError(message: "cloudsync: --token env: names no variable; write env:VARIABLE", hint: hint) }
            guard let token = environment[name], !token.isEmpty else {
                throw UsageError(message: "cloudsync: --token refers to environment variable \(name), which is not set or empty", hint: hint)
            }
            return token
        }
        if value.hasPrefix("file:") {
            let path = String(value.dropFirst(5))
            let text: String
            do {
                text = String(decoding: try WholeFile.read(path, limit: 1 << 20), as: UTF8.self)
            } catch {
                throw UsageError(message: "cloudsync: --token file \(path) cannot be read: \(error.reason)", hint: hint)
            }
            let line = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard !line.isEmpty else { throw UsageError(message: "cloudsync: --token file \(path) is empty", hint: hint) }
            return line
        }
        return value
    }
}
