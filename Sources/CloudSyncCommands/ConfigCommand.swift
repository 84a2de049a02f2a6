import CloudSyncAuth
import CloudSyncConfig
import CloudSyncCore
import CloudSyncProviders
import Foundation

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
            for warning in Self.warnings(config) { context.console.err("cloudsync: warning: \(warning)\n") }
        case "show":
            let config = try setup.configuration()
            let store = TokenStore(stateDirectory: StateLocation.resolve(environment: context.environment))
            var notes: [String: String] = [:]
            for remote in config.remotes { notes[remote.name] = "credential: " + Self.credential(of: remote, store: store) }
            context.console.out(config.renderMasked(notes: notes))
        default:
            throw UsageError(message: "cloudsync: unknown config command '\(sub)'", hint: "Run 'cloudsync config --help' for usage.")
        }
        return .ok
    }

    /// What a valid configuration may still get wrong: secrets from unset variables (an error only for the
    /// commands that use that remote) and hosts reserved for examples (RFC 2606), which never resolve.
    static func warnings(_ config: Configuration) -> [String] {
        var out: [String] = []
        for remote in config.remotes {
            for unset in remote.unsetSecrets {
                out.append("\(unset.error.description) (only commands that use remote \(remote.name) stop on this)")
            }
            for url in [remote.url, remote.apiURL, remote.contentURL].compactMap({ $0 }) {
                if let host = url.host?.lowercased(), isExampleHost(host) {
                    out.append("\(config.file ?? "configuration"):\(remote.line):1: remote \(remote.name) points at \(host), a placeholder "
                        + "host from config.example.toml that does not exist; put your server's address there or remove [remote.\(remote.name)]")
                    break
                }
            }
        }
        return out
    }

    /// example.com/.net/.org and the .example and .invalid domains (RFC 2606), which never resolve.
    static func isExampleHost(_ host: String) -> Bool {
        let labels = host.split(separator: ".")
        guard let last = labels.last else { return false }
        if last == "example" || last == "invalid" { return true }
        return labels.count >= 2 && labels[labels.count - 2] == "example" && ["com", "net", "org"].contains(last)
    }

    /// Which credential a command that uses `remote` would use, in the order ProviderFactory tries them.
    static func credential(of remote: RemoteConfig, store: TokenStore) -> String {
        if let unset = remote.unsetSecrets.first {
            return "none here: \(unset.key) refers to environment variable \(unset.variable), which is not set"
        }
        let stored: StoredCredentials?
        do {
            stored = try store.load(remote.name, for: remote.provider.rawValue)
        } catch {
            return "unknown: \(error.message)"
        }
        let login = "stored login (\(store.fileURL(for: remote.name).path))"
        let none = "none: run cloudsync login \(remote.name)"
        switch ProviderRegistry.catalog.descriptor(remote.provider)?.credential(remote.options) ?? .oauth {
        case .password:
            if remote.password != nil { return "config (password)" }
            if remote.passwordCommand != nil { return "config (password_command)" }
            if let url = remote.url, let password = URLComponents(url: url, resolvingAgainstBaseURL: false)?.password,
               !password.isEmpty {
                return "config (password in url)"
            }
            if stored?.password != nil { return login }
            return "none (anonymous): if the server asks for a password, run cloudsync login \(remote.name) (or set password / password_command)"
        case .staticToken:
            if let token = remote.accessToken, !token.isEmpty { return "config (access_token)" }
            if let token = stored?.tokenSet?.accessToken, !token.isEmpty { return login }
            return none + " (or set access_token)"
        case .oauth:
            if stored?.tokenSet != nil { return login }
            if let token = remote.refreshToken, !token.isEmpty { return "config (refresh_token)" }
            if let token = remote.accessToken, !token.isEmpty { return "config (access_token)" }
            return none + " (or set refresh_token / access_token)"
        }
    }
}
