import CloudSyncAuth
import CloudSyncConfig
import CloudSyncCore
import CloudSyncHTTP
import CloudSyncProviders
import Foundation

/// Builds a remote's provider, pacer and transport from its configuration: the provider's own factory
/// (`ProviderEntry`, found in `ProviderRegistry`) gets the remote's settings and the credentials resolved here.
struct ProviderFactory {
    let transport: any Transport
    let settings: PullSettings
    let audio: AudioFilter
    /// Where `cloudsync login` keeps tokens ($XDG_STATE_HOME/cloudsync).
    let stateDirectory: URL
    let logger: Logger

    struct Remote: Sendable {
        let config: RemoteConfig
        let provider: any Provider
        let pacer: Pacer
        /// What the remote's requests go through (the engine's downloads too): the shared transport, trusting the
        /// remote's `ca_file` when it has one.
        let transport: any Transport
    }

    /// `unreachableRetries` bounds the retries of a host that cannot be reached at all (nil: like `retries`).
    /// Secrets are resolved here, for the remote being built only: an unset `env:` variable is a config error.
    func make(_ remote: RemoteConfig, retries: Int?, unreachableRetries: Int? = nil) throws -> Remote {
        try remote.requireSecrets()
        guard let entry = ProviderRegistry.entry(remote.provider) else {
            throw ProviderError(.configuration, "remote '\(remote.name)': unknown provider '\(remote.provider)'")
        }
        let pacer = Pacer(policy: .init(retries: retries ?? settings.retries, unreachableRetries: unreachableRetries),
                          logger: logger)
        let transport = try transport(for: remote)
        let descriptor = entry.descriptor
        let tokenURL = remote.tokenURL ?? descriptor.oauth?.tokenURL
        let build = ProviderBuild(
            remoteName: remote.name, root: remote.root, apiURL: remote.apiURL, contentURL: remote.contentURL, url: remote.url,
            tokenURL: tokenURL, options: remote.options, transport: transport, pacer: pacer, audio: audio, logger: logger,
            tokens: { [self] in try tokenSource(remote, provider: descriptor, tokenURL: tokenURL, transport: transport) },
            password: { [self] in try password(remote, provider: descriptor) },
            staticToken: { [self] in try staticToken(remote) })
        return Remote(config: remote, provider: try entry.make(build), pacer: pacer, transport: transport)
    }

    /// The shared transport, or for a remote with `ca_file` the same one trusting it.
    private func transport(for remote: RemoteConfig) throws -> any Transport {
        guard let caFile = remote.caFile else { return transport }
        guard let curl = transport as? CurlTransport else {
            throw ProviderError(.configuration, "remote '\(remote.name)': ca_file needs the HTTP transport")
        }
        return curl.trusting(caFile: caFile.path)
    }

    /// User and password: the config's `password`, else what `password_command` prints, else (for remotes whose
    /// credential is a password) the one `cloudsync login` stored, with its user when the config names none.
    private func password(_ remote: RemoteConfig, provider: ProviderDescriptor) throws -> (user: String, password: String) {
        var user = remote.user ?? ""
        var password = remote.password ?? ""
        if remote.password == nil, let command = remote.passwordCommand {
            password = try runPasswordCommand(command, remote: remote.name)
        } else if remote.password == nil, provider.credential(remote.options) == .password,
                  let stored = try AuthSetup.storedPassword(remoteName: remote.name, stateDirectory: stateDirectory) {
            password = stored.password
            if user.isEmpty, let storedUser = stored.user { user = storedUser }
        }
        return (user, password)
    }

    /// The remote's tokens: those stored by `cloudsync login` (refreshed under a file lock shared by every
    /// process), else the config's refresh_token (seeding the store) or access_token.
    private func tokenSource(_ remote: RemoteConfig, provider: ProviderDescriptor, tokenURL: URL?,
                             transport: any Transport) throws -> any TokenSource {
        try AuthSetup.tokenSource(remoteName: remote.name, provider: provider, tokenURL: tokenURL,
                                  clientID: remote.clientID, clientSecret: remote.clientSecret,
                                  configAccessToken: remote.accessToken, configRefreshToken: remote.refreshToken,
                                  stateDirectory: stateDirectory, transport: transport, logger: logger)
    }

    /// A fixed token (WebDAV bearer/oauth): the config's access_token, else the one `login` stored.
    private func staticToken(_ remote: RemoteConfig) throws -> String {
        if let token = remote.accessToken, !token.isEmpty { return token }
        if let stored = try TokenStore(stateDirectory: stateDirectory).load(remote.name)?.tokenSet?.accessToken, !stored.isEmpty {
            return stored
        }
        throw ProviderError(.unauthorized, "remote '\(remote.name)' uses token auth but has no access_token; set access_token (or env:VAR) in the config")
    }
}

/// Runs `password_command` with /bin/sh and returns the first line of its standard output.
func runPasswordCommand(_ command: String, remote: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    let output = Pipe()
    process.standardOutput = output
    process.standardInput = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        throw ProviderError(.configuration, "remote '\(remote)': could not run password_command: \(error.localizedDescription)")
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw ProviderError(.configuration, "remote '\(remote)': password_command exited with status \(process.terminationStatus); run it by hand to check it prints the password")
    }
    let text = String(decoding: data, as: UTF8.self)
    guard let line = text.split(separator: "\n", omittingEmptySubsequences: false).first, !line.isEmpty else {
        throw ProviderError(.configuration, "remote '\(remote)': password_command printed nothing")
    }
    return String(line)
}
