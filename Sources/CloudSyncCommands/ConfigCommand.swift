import CloudSyncConfig
import CloudSyncCore

/// `cloudsync config check|path|show`.
struct ConfigCommand {
    let context: CommandContext

    func run(_ sub: String) throws -> ExitCode {
        let setup = Setup(context: context)
        switch sub {
        case "path":
            context.console.out(setup.configURL.path + "\n")
        case "check":
            let config = try setup.configuration()
            let names = config.remotes.map { "\($0.name) (\($0.provider.rawValue))" }
            context.console.out("\(setup.configURL.path): OK, \(config.remotes.count) remote\(config.remotes.count == 1 ? "" : "s")\(names.isEmpty ? "" : ": " + names.joined(separator: ", "))\n")
        case "show":
            context.console.out(try setup.configuration().renderMasked())
        default:
            throw UsageError(message: "cloudsync: unknown config command '\(sub)'", hint: "Run 'cloudsync config --help' for usage.")
        }
        return .ok
    }
}
