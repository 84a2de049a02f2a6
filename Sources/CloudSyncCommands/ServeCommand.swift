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
        let options = ServerOptions(bind: args.value("bind") ?? "127.0.0.1", port: port, token: args.value("token"))
        do {
            try options.validate()
        } catch let error as ServerError {
            throw UsageError(message: "cloudsync: \(error.message)", hint: "Run 'cloudsync serve --help' for usage.")
        }
        let setup = Setup(context: context)
        let config = try setup.configuration()
        let cache = try setup.openCache(config)
        let transport = try CurlTransport(logger: context.logger)
        let factory = setup.providerFactory(config, transport: transport)
        var sources: [String: OnDemand] = [:]
        var unavailable: [String: String] = [:]
        for remote in try setup.selectedRemotes(config) {
            do {
                // A player waits on these fetches: a cloud that cannot be reached is not retried (serve marks it
                // offline, answers 503 and probes in the background); other failures keep the usual retries.
                let built = try factory.make(remote, retries: nil, unreachableRetries: 0)
                sources[remote.name] = OnDemand(remote: remote.name, provider: built.provider, transport: transport,
                                                pacer: built.pacer, cache: cache, logger: context.logger)
            } catch {
                unavailable[remote.name] = String(describing: error)
                context.console.err("cloudsync: warning: \(remote.name): \(error); serving its cached bytes only\n")
            }
        }
        let server = TrackServer(cache: cache, sources: sources, unavailable: unavailable, options: options,
                                 logger: context.logger)
        let bound = try server.start()
        let shown = options.bind.contains(":") ? "[\(options.bind)]" : options.bind
        context.console.out("listening on http://\(shown):\(bound)/\n")
        context.console.err("cloudsync: playlist at http://\(shown):\(bound)/playlist.m3u; Ctrl-C stops\n")

        let (signals, continuation) = AsyncStream<Void>.makeStream()
        let interrupt = InterruptHandler { continuation.yield() }
        defer { interrupt.stop() }
        for await _ in signals { break }
        server.stop()
        context.console.err("cloudsync: serve stopped\n")
        return .ok
    }
}
