import CloudSyncAuth
import CloudSyncConfig
import CloudSyncCore
import CloudSyncHTTP
import Dropbox
import Foundation
import GoogleDrive
import OneDrive
import WebDAV
import YandexDisk

/// Builds a remote's provider, pacer and transport from its configuration. The one place that knows every
/// provider target.
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
    }

    /// `unreachableRetries` bounds the retries of a host that cannot be reached at all (nil: like `retries`).
    /// Secrets are resolved here, for the remote being built only: an unset `env:` variable is a config error.
    func make(_ remote: RemoteConfig, retries: Int?, unreachableRetries: Int? = nil) throws -> Remote {
        try remote.requireSecrets()
        let pacer = Pacer(policy: .init(retries: retries ?? settings.retries, unreachableRetries: unreachableRetries),
                          logger: logger)
        let provider: any Provider
        switch remote.provider {
        case .webdav:
            provider = try makeWebDAV(remote, pacer: pacer)
        case .dropbox:
            var options = DropboxOptions(remoteName: remote.name, root: remote.root)
            if let url = remote.apiURL { options.apiURL = url }
            if let url = remote.contentURL { options.contentURL = url }
            if let url = remote.tokenURL { options.tokenURL = url }
            let tokens = try tokenSource(remote, tokenURL: options.tokenURL)
            provider = DropboxProvider(options: options, transport: transport, pacer: pacer, tokens: tokens, audio: audio, logger: logger)
        case .yandex:
            var options = YandexOptions(remoteName: remote.name, root: remote.root)
            if let url = remote.apiURL { options.apiURL = url }
            provider = YandexDiskProvider(options: options, transport: transport, pacer: pacer,
                                          tokens: try tokenSource(remote, tokenURL: remote.tokenURL ?? YandexOptions.defaultTokenURL),
                                          audio: audio, logger: logger)
        case .onedrive:
            var options = OneDriveOptions(remoteName: remote.name, root: remote.root)
            if let url = remote.apiURL { options.apiURL = url }
            if let url = remote.tokenURL { options.tokenURL = url }
            let tokens = try tokenSource(remote, tokenURL: options.tokenURL)
            provider = OneDriveProvider(options: options, transport: transport, pacer: pacer, tokens: tokens, audio: audio, logger: logger)
        case .gdrive:
            var options = GoogleDriveOptions(remoteName: remote.name, root: remote.root,
                                             acknowledgeAbuse: remote.acknowledgeAbuse,
                                             listingStrategy: remote.driveListing == .walk ? .walk : .flat)
            if let url = remote.apiURL { options.apiURL = url }
            if let url = remote.contentURL { options.contentURL = url }
            if let url = remote.tokenURL { options.tokenURL = url }
            let tokens = try tokenSource(remote, tokenURL: options.tokenURL)
            provider = GoogleDriveProvider(options: options, transport: transport, pacer: pacer, tokens: tokens, audio: audio, logger: logger)
        }
        return Remote(config: remote, provider: provider, pacer: pacer)
    }

    private func makeWebDAV(_ remote: RemoteConfig, pacer: Pacer) throws -> WebDAVProvider {
        guard let url = remote.url else {
            throw ProviderError(.configuration, "remote '\(remote.name)': webdav needs url")
        }
        let auth: WebDAVOptions.Auth
        switch remote.webdavAuth {
        case .basic: auth = .basic
        case .bearer: auth = .bearer(try staticToken(remote))
        case .oauth: auth = .oauth(try staticToken(remote))
        }
        var user = remote.user ?? ""
        var password = remote.password ?? ""
        if remote.password == nil, let command = remote.passwordCommand {
            password = try runPasswordCommand(command, remote: remote.name)
        } else if remote.password == nil, auth == .basic,
                  let stored = try AuthSetup.storedPassword(remoteName: remote.name, stateDirectory: stateDirectory) {
            password = stored.password
            if user.isEmpty, let storedUser = stored.user { user = storedUser }
        }
        let options = WebDAVOptions(remoteName: remote.name, url: url, root: remote.root, user: user,
                                    password: password, auth: auth)
        return WebDAVProvider(options: options, transport: transport, pacer: pacer, audio: audio, logger: logger)
    }

    /// The remote's tokens: those stored by `cloudsync login` (refreshed under a file lock shared by every
    /// process), else the config's refresh_token (seeding the store) or access_token.
    private func tokenSource(_ remote: RemoteConfig, tokenURL: URL) throws -> any TokenSource {
        try AuthSetup.tokenSource(remoteName: remote.name, provider: remote.provider.rawValue, tokenURL: tokenURL,
                                  clientID: remote.clientID, clientSecret: remote.clientSecret,
                                  configAccessToken: remote.accessToken, configRefreshToken: remote.refreshToken,
                                  stateDirectory: stateDirectory, transport: transport, logger: logger)
    }

    /// A WebDAV token (bearer/oauth): the config's access_token, else the one `login` stored.
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
