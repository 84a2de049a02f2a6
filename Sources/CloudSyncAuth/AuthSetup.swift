import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// Each provider's documented OAuth endpoints and scopes, and the factory the CLI uses to get a remote's
/// `TokenSource`. Providers are named as in the config: dropbox, gdrive, onedrive, yandex, webdav.
public enum AuthSetup {
    /// The token endpoint (`token_url` default); nil for webdav (no default).
    public static func defaultTokenURL(provider: String) -> URL? {
        switch provider {
        case "dropbox": URL(string: "https://api.dropboxapi.com/oauth2/token")
        case "gdrive": URL(string: "https://oauth2.googleapis.com/token")
        case "onedrive": URL(string: "https://login.microsoftonline.com/common/oauth2/v2.0/token")
        case "yandex": URL(string: "https://oauth.yandex.ru/token")
        default: nil
        }
    }

    /// The authorization endpoint (`auth_url` default) a person opens in a browser.
    public static func defaultAuthURL(provider: String) -> URL? {
        switch provider {
        case "dropbox": URL(string: "https://www.dropbox.com/oauth2/authorize")
        case "gdrive": URL(string: "https://accounts.google.com/o/oauth2/auth")
        case "onedrive": URL(string: "https://login.microsoftonline.com/common/oauth2/v2.0/authorize")
        case "yandex": URL(string: "https://oauth.yandex.ru/authorize")
        default: nil
        }
    }

    /// The device-authorization endpoint (`device_url` default); nil where the provider has no usable one
    /// (Dropbox has none; Google's cannot grant a Drive scope that reads an existing library).
    public static func defaultDeviceURL(provider: String) -> URL? {
        switch provider {
        case "onedrive": URL(string: "https://login.microsoftonline.com/common/oauth2/v2.0/devicecode")
        case "yandex": URL(string: "https://oauth.yandex.ru/device/code")
        default: nil
        }
    }

    /// The documented `https://HOST` of the API, replaced by the remote's `api_url`.
    public static func defaultAPIURL(provider: String) -> URL? {
        switch provider {
        case "dropbox": URL(string: "https://api.dropboxapi.com")
        case "gdrive": URL(string: "https://www.googleapis.com")
        case "onedrive": URL(string: "https://graph.microsoft.com")
        case "yandex": URL(string: "https://cloud-api.yandex.net")
        default: nil
        }
    }

    /// The read-only scope requested at login (and on Microsoft refreshes); nil where scopes are fixed in
    /// the app's registration (Dropbox, Yandex).
    public static func scope(provider: String) -> String? {
        switch provider {
        case "onedrive": "Files.Read Files.Read.All offline_access"
        case "gdrive": "https://www.googleapis.com/auth/drive.readonly"
        default: nil
        }
    }

    /// The `Authorization` scheme: "OAuth" for Yandex, "Bearer" for every other provider.
    public static func authScheme(provider: String) -> AuthScheme {
        provider == "yandex" ? .oauth : .bearer
    }

    /// The refresh client of a remote: token endpoint (config, else default), credentials, and Microsoft's
    /// `scope` field. Throws `.configuration` when there is no token endpoint.
    public static func refreshClient(remoteName: String, provider: String, tokenURL: URL?, clientID: String?,
                                     clientSecret: String?) throws(AuthError) -> OAuthRefresher.Client {
        guard let url = tokenURL ?? defaultTokenURL(provider: provider) else {
            throw AuthError(.configuration, "remote '\(remoteName)': set token_url (the full URL of the OAuth token endpoint) to refresh its tokens")
        }
        var extra: [(String, String)] = []
        if provider == "onedrive", let scope = scope(provider: provider) { extra.append(("scope", scope)) }
        return OAuthRefresher.Client(tokenURL: url, clientID: nonEmpty(clientID), clientSecret: nonEmpty(clientSecret), extraFields: extra)
    }

    /// The token source of a remote, for the CLI.
    ///
    /// - Stored tokens (`stateDirectory/tokens/NAME.json`) win over the config's.
    /// - Else a config `refresh_token` (with `access_token` if any) seeds a `StoredTokenSource`: the first
    ///   refresh writes the store.
    /// - Else a config `access_token` alone gives a `StaticTokenSource`.
    /// - Else throws `ProviderError(.unauthorized)` telling the user to run `cloudsync login NAME`.
    /// An unreadable token file throws `ProviderError(.unauthorized)` naming the file.
    public static func tokenSource(remoteName: String, provider: String, tokenURL: URL?, clientID: String?,
                                   clientSecret: String?, configAccessToken: String?, configRefreshToken: String?,
                                   stateDirectory: URL, transport: any Transport, logger: Logger) throws -> any TokenSource {
        let store = TokenStore(stateDirectory: stateDirectory)
        let stored: StoredCredentials?
        do { stored = try store.load(remoteName, for: provider) } catch {
            throw ProviderError(.unauthorized, error.message, cause: error)
        }
        func client() throws -> OAuthRefresher.Client {
            do {
                return try refreshClient(remoteName: remoteName, provider: provider, tokenURL: tokenURL,
                                         clientID: clientID, clientSecret: clientSecret)
            } catch {
                throw ProviderError(.configuration, error.message, cause: error)
            }
        }
        if let tokens = stored?.tokenSet {
            guard tokens.refreshToken != nil || tokenURL != nil || defaultTokenURL(provider: provider) != nil else {
                return StaticTokenSource(token: tokens.accessToken, remoteName: remoteName)
            }
            logger.debug("remote '\(remoteName)': using the tokens stored in \(store.fileURL(for: remoteName).path)")
            return StoredTokenSource(remoteName: remoteName, provider: provider, store: store, client: try client(),
                                     transport: transport, logger: logger)
        }
        if let refresh = nonEmpty(configRefreshToken) {
            let seed = TokenSet(accessToken: nonEmpty(configAccessToken) ?? "", refreshToken: refresh)
            return StoredTokenSource(remoteName: remoteName, provider: provider, store: store, client: try client(),
                                     transport: transport, seed: seed, logger: logger)
        }
        if let access = nonEmpty(configAccessToken) {
            return StaticTokenSource(token: access, remoteName: remoteName)
        }
        throw ProviderError(.unauthorized,
            "remote '\(remoteName)' has no tokens; run `cloudsync login \(remoteName)` (or set refresh_token / access_token in its config section)")
    }

    /// The WebDAV password `cloudsync login` stored for the remote, nil when none; for remotes whose config
    /// has neither `password` nor `password_command`.
    public static func storedPassword(remoteName: String, stateDirectory: URL) throws(AuthError) -> (user: String?, password: String)? {
        guard let stored = try TokenStore(stateDirectory: stateDirectory).load(remoteName),
              let password = stored.password else { return nil }
        return (stored.user, password)
    }
}

func nonEmpty(_ s: String?) -> String? {
    guard let s, !s.isEmpty else { return nil }
    return s
}
