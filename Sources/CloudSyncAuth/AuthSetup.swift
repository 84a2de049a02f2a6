import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The factory the CLI uses to get a remote's `TokenSource`. Endpoints, scopes and flows are the provider's own
/// facts (`ProviderDescriptor`, declared in `Providers/<Name>/<Name>Descriptor.swift`); this reads them.
public enum AuthSetup {
    /// The `Authorization` scheme of the provider's API ("Bearer"; Yandex: "OAuth").
    public static func authScheme(_ provider: ProviderDescriptor) -> AuthScheme {
        AuthScheme(scheme: provider.authorizationScheme)
    }

    /// The refresh client of a remote: token endpoint (config, else the provider's), credentials, and the `scope`
    /// field for providers that want it on refreshes (Microsoft). Throws `.configuration` when there is no token
    /// endpoint.
    public static func refreshClient(remoteName: String, provider: ProviderDescriptor, tokenURL: URL?, clientID: String?,
                                     clientSecret: String?) throws(AuthError) -> OAuthRefresher.Client {
        guard let url = tokenURL ?? provider.oauth?.tokenURL else {
            throw AuthError(.configuration, "remote '\(remoteName)': set token_url (the full URL of the OAuth token endpoint) to refresh its tokens")
        }
        var extra: [(String, String)] = []
        if let oauth = provider.oauth, oauth.scopeOnRefresh, let scope = oauth.scope { extra.append(("scope", scope)) }
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
    public static func tokenSource(remoteName: String, provider: ProviderDescriptor, tokenURL: URL?, clientID: String?,
                                   clientSecret: String?, configAccessToken: String?, configRefreshToken: String?,
                                   stateDirectory: URL, transport: any Transport, logger: Logger) throws -> any TokenSource {
        let store = TokenStore(stateDirectory: stateDirectory)
        let stored: StoredCredentials?
        do { stored = try store.load(remoteName, for: provider.kind.rawValue) } catch {
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
            guard tokens.refreshToken != nil || tokenURL != nil || provider.oauth?.tokenURL != nil else {
                return StaticTokenSource(token: tokens.accessToken, remoteName: remoteName)
            }
            logger.debug("remote '\(remoteName)': using the tokens stored in \(store.fileURL(for: remoteName).path)")
            return StoredTokenSource(remoteName: remoteName, provider: provider.kind.rawValue, store: store, client: try client(),
                                     transport: transport, logger: logger)
        }
        if let refresh = nonEmpty(configRefreshToken) {
            let seed = TokenSet(accessToken: nonEmpty(configAccessToken) ?? "", refreshToken: refresh)
            return StoredTokenSource(remoteName: remoteName, provider: provider.kind.rawValue, store: store, client: try client(),
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
