import CloudSyncCache
import CloudSyncConfig
import CloudSyncCore
import CloudSyncProviders
import CloudSyncEngine
import CloudSyncHTTP
import Foundation

/// Dispatches a parsed command line to its command.
enum Commands {
    static func run(_ context: CommandContext) async throws -> ExitCode {
        let path = context.arguments.commandPath
        switch path.first {
        case "completion": return try CompletionCommand(context: context).run()
        case "man":
            context.console.out(ManPage(root: CommandTree.root, globals: CommandTree.globals, version: CommandTree.version).render())
            return .ok
        case "help": return try help(context)
        case "status": return try StatusCommand(context: context).run()
        case "ls": return try await ListCommand(context: context).run()
        case "pull": return try await PullCommand(context: context).run()
        case "cache": return try CacheCommand(context: context).run(path.dropFirst().first ?? "")
        case "config": return try ConfigCommand(context: context).run(path.dropFirst().first ?? "")
        case "login": return try await LoginCommand(context: context).run()
        case "logout": return try await LogoutCommand(context: context).run()
        case "serve": return try await ServeCommand(context: context).run()
        default:
            throw UsageError(message: "cloudsync: unknown command", hint: "Run 'cloudsync --help' for usage.")
        }
    }
}

extension Commands {
    /// `cloudsync help [COMMAND…]`: the same text as `cloudsync COMMAND… --help`.
    static func help(_ context: CommandContext) throws -> ExitCode {
        var spec = CommandTree.root
        var path: [String] = []
        for name in context.arguments.positionals {
            guard let sub = spec.subcommands.first(where: { $0.name == name }) else {
                let names = spec.subcommands.map(\.name)
                let near = nearest(name, in: names).map { " Did you mean '\($0)'?" } ?? ""
                throw UsageError(message: "cloudsync: no command '\((path + [name]).joined(separator: " "))'.\(near)",
                                 hint: "Commands: \(names.joined(separator: ", ")).")
            }
            spec = sub
            path.append(name)
        }
        context.console.out(HelpRenderer(programName: "cloudsync", globals: CommandTree.globals).render(spec, path: path))
        return .ok
    }
}

/// Loading the configuration and opening the cache, shared by the commands.
struct Setup {
    let context: CommandContext

    var configURL: URL {
        ConfigLocation.resolve(explicit: context.arguments.value("config"), environment: context.environment)
    }

    func configuration() throws -> Configuration {
        try Configuration.load(path: configURL, environment: context.environment, providers: ProviderRegistry.catalog)
    }

    /// The remotes chosen by --remote / --provider (all when neither). A name or provider the config does not
    /// have, or both options at once, is a usage error (exit 2) listing what there is.
    func selectedRemotes(_ config: Configuration) throws -> [RemoteConfig] {
        let remote = context.arguments.value("remote"), provider = context.arguments.value("provider")
        let command = "cloudsync \(context.arguments.commandPath.joined(separator: " "))"
        if remote != nil && provider != nil {
            throw UsageError(message: "cloudsync: --remote and --provider exclude each other (a remote has one provider)",
                             hint: "Give one of them; run '\(command) --help' for usage.")
        }
        try Self.checkRemoteName(remote, in: config, option: "--remote")
        if let provider, ProviderRegistry.catalog.descriptor(named: provider.lowercased()) == nil {
            let names = ProviderRegistry.catalog.names
            let near = nearest(provider, in: names).map { " Did you mean '\($0)'?" } ?? ""
            throw UsageError(message: "cloudsync: unknown provider '\(provider)'.\(near)", hint: "Providers: \(names.joined(separator: ", ")).")
        }
        if remote == nil, let provider, let kind = ProviderRegistry.catalog.descriptor(named: provider.lowercased())?.kind,
           !config.remotes.isEmpty, !config.remotes.contains(where: { $0.provider == kind }) {
            throw UsageError(message: "cloudsync: --provider: no remote of provider \(kind.rawValue) in \(config.file ?? "the configuration").",
                             hint: "Remotes: \(config.remotes.map { "\($0.name) (\($0.provider.rawValue))" }.joined(separator: ", ")).")
        }
        return try config.select(remote: remote, provider: provider)
    }

    /// Throws a usage error naming the configured remotes when `name` is not one of them (nor of `alsoKnown`:
    /// remotes the index still holds tracks of after they left the config).
    static func checkRemoteName(_ name: String?, in config: Configuration, option: String,
                                alsoKnown: () throws -> [String] = { [] }) throws {
        guard let name, !config.remotes.contains(where: { $0.name == name }) else { return }
        let alsoKnown = try alsoKnown()
        guard !config.remotes.isEmpty || !alsoKnown.isEmpty, !alsoKnown.contains(name) else { return }
        var names = config.remotes.map(\.name)
        names += alsoKnown.filter { !names.contains($0) }
        let near = nearest(name, in: names).map { " Did you mean '\($0)'?" } ?? ""
        throw UsageError(message: "cloudsync: \(option.isEmpty ? "" : option + ": ")no remote '\(name)' in \(config.file ?? "the configuration").\(near)",
                         hint: "Remotes: \(names.joined(separator: ", ")).")
    }

    /// Builds providers for `config`'s remotes, with tokens from the state directory's token store.
    func providerFactory(_ config: Configuration, transport: any Transport, settings: PullSettings? = nil) -> ProviderFactory {
        ProviderFactory(transport: transport, settings: settings ?? config.pull, audio: config.audio,
                        stateDirectory: StateLocation.resolve(environment: context.environment), logger: context.logger)
    }

    /// The cache's budget and planner, as `pull` and `cache evict` use them.
    func budget(_ config: Configuration, cache: Cache, headBytes: Int64? = nil) -> CacheBudget {
        let settings = BudgetSettings(maxSize: config.cache.maxSize, minFree: config.cache.minFree, maxAge: config.cache.maxAge,
                                      heads: HeadPolicy(audioBytes: headBytes ?? config.pull.headFirst, seconds: config.pull.headSeconds),
                                      shortenHeads: config.pull.shortenHeads)
        return CacheBudget(cache: cache, settings: settings, logger: context.logger)
    }

    /// Opens the cache as the configuration says: plaintext, or encrypted (`cache.encrypt`) with its key, made on
    /// first use (``CacheKeySource``). A configuration that disagrees with the cache, a missing or wrong key is an
    /// error naming what to do (exit 3 or 4).
    func openCache(_ config: Configuration) throws -> Cache {
        let limits = CacheLimits(checkpointBytes: config.cache.checkpoint)
        guard config.cache.encrypt else {
            return try Cache.open(root: config.cache.dir, limits: limits, logger: context.logger)
        }
        return try Cache.open(root: config.cache.dir, limits: limits, logger: context.logger,
                              encryption: .on(try cacheKey(config, creating: true)))
    }

    /// The cache key: the existing one, or (`creating`, and the cache was never encrypted) a new one.
    func cacheKey(_ config: Configuration, creating: Bool) throws -> CacheKey {
        let keys = CacheKeySource(settings: config.cache, stateDirectory: StateLocation.resolve(environment: context.environment))
        if let key = try keys.existingKey() { return key }
        // No key file yet. A cache already encrypted under a key that is gone must not get a new one.
        let probe = try Cache.open(root: config.cache.dir, logger: context.logger, checkingMode: false)
        let keyed = try probe.encryptionState().keyed
        if !creating || keyed {
            throw CacheError(.keyMissing, "The cache at \(config.cache.dir.path) is encrypted but its key \(keys.keyFile.path) "
                + "is missing. Restore that file (or set cache.key_command to print the key). A lost key cannot be "
                + "recovered: remove \(config.cache.dir.path) to start an empty cache.", path: keys.keyFile.path)
        }
        let key = try keys.createKey()
        context.logger.info("created the cache key \(keys.keyFile.path) (keep it: without it the cache cannot be read)")
        return key
    }

    /// Opens the cache for `cache encrypt` (`sealing`) or `cache decrypt`, whatever its mode.
    func openCacheForConversion(_ config: Configuration, sealing: Bool) throws -> Cache {
        try Cache.open(root: config.cache.dir, limits: CacheLimits(checkpointBytes: config.cache.checkpoint),
                       logger: context.logger,
                       encryption: CacheEncryption(key: try cacheKey(config, creating: sealing), sealsNewFiles: sealing),
                       checkingMode: false)
    }
}
