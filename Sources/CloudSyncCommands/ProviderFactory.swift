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
    let logger: Logger

    struct Remote: Sendable {
        let config: RemoteConfig
        let provider: any Provider
        let pacer: Pacer
    }

    func make(_ remote: RemoteConfig, retries: Int?) throws -> Remote {
        let pacer = Pacer(policy: .init(retries: retries ?? settings.retries), logger: logger)
        let provider: any Provider
        switch remote.provider {
        case .webdav:
            provider = try makeWebDAV(remote, pacer: pacer)
        case .dropbox:
            var options = DropboxOptions(remoteName: remote.name, root: remote.root)
            if let url = remote.apiURL { options.apiURL = url }
            if let url = remote.contentURL { options.contentURL = url }
            if let url = remote.tokenURL { options.tokenURL = url }
            let tokens = try tokenSource(remote, client: options.oauthClient(clientID: remote.clientID, clientSecret: remote.clientSecret))
            provider = DropboxProvider(options: options, transport: transport, pacer: pacer, tokens: tokens, audio: audio, logger: logger)
        case .yandex:
            var options = YandexOptions(remoteName: remote.name, root: remote.root)
            if let url = remote.apiURL { options.apiURL = url }
            let client = OAuthRefresher.Client(tokenURL: remote.tokenURL ?? YandexOptions.defaultTokenURL,
                                               clientID: remote.clientID, clientSecret: remote.clientSecret)
            provider = YandexDiskProvider(options: options, transport: transport, pacer: pacer,
                                          tokens: try tokenSource(remote, client: client), audio: audio, logger: logger)
        case .onedrive:
            var options = OneDriveOptions(remoteName: remote.name, root: remote.root)
            if let url = remote.apiURL { options.apiURL = url }
            if let url = remote.tokenURL { options.tokenURL = url }
            let tokens = try tokenSource(remote, client: options.oauthClient(clientID: remote.clientID, clientSecret: remote.clientSecret))
            provider = OneDriveProvider(options: options, transport: transport, pacer: pacer, tokens: tokens, audio: audio, logger: logger)
        case .gdrive:
            var options = GoogleDriveOptions(remoteName: remote.name, root: remote.root,
                                             acknowledgeAbuse: remote.acknowledgeAbuse,
                                             listingStrategy: remote.driveListing == .walk ? .walk : .flat)
            if let url = remote.apiURL { options.apiURL = url }
            if let url = remote.contentURL { options.contentURL = url }
            if let url = remote.tokenURL { options.tokenURL = url }
            let tokens = try tokenSource(remote, client: options.oauthClient(clientID: remote.clientID, clientSecret: remote.clientSecret))
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
        case .bearer: auth = .bearer(try token(remote))
        case .oauth: auth = .oauth(try token(remote))
        }
        var password = remote.password ?? ""
        if remote.password == nil, let command = remote.passwordCommand {
            password = try runPasswordCommand(command, remote: remote.name)
        }
        let options = WebDAVOptions(remoteName: remote.name, url: url, root: remote.root, user: remote.user ?? "",
                                    password: password, auth: auth)
        return WebDAVProvider(options: options, transport: transport, pacer: pacer, audio: audio, logger: logger)
    }

    /// The remote's tokens: refreshable when a refresh token and client are known, else the access token as is.
    private func tokenSource(_ remote: RemoteConfig, client: OAuthRefresher.Client) throws -> any TokenSource {
        if let refresh = remote.refreshToken, !refresh.isEmpty {
            return OAuthRefresher(remoteName: remote.name,
                                  tokens: TokenSet(accessToken: remote.accessToken ?? "", refreshToken: refresh, expiresAt: remote.accessToken == nil ? .distantPast : nil),
                                  client: client, transport: transport, logger: logger, persist: { _ in })
        }
        return StaticTokenSource(token: try token(remote), remoteName: remote.name)
    }

    private func token(_ remote: RemoteConfig) throws -> String {
        guard let token = remote.accessToken, !token.isEmpty else {
            throw ProviderError(.unauthorized, "remote '\(remote.name)' uses token auth but has no access_token; set access_token (or env:VAR) in the config")
        }
        return token
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
