import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The settings of one remote that a login needs (copied from the config by the CLI).
public struct LoginRemote: Sendable {
    public var name: String
    /// The remote's provider: its endpoints, login flow and account check.
    public var provider: ProviderDescriptor
    public var clientID: String?
    public var clientSecret: String?
    public var tokenURL: URL?
    public var authURL: URL?
    public var deviceURL: URL?
    /// Replaces the provider's documented `https://HOST` for the proving request.
    public var apiURL: URL?
    /// WebDAV: the collection URL.
    public var url: URL?
    public var user: String?
    /// Password logins: the password from the config or its `password_command`; nil means prompt and store it.
    public var configuredPassword: String?
    /// The provider's own options, which may choose the credential (WebDAV's `auth`).
    public var options: ProviderOptions

    public init(name: String, provider: ProviderDescriptor, clientID: String? = nil, clientSecret: String? = nil, tokenURL: URL? = nil,
                authURL: URL? = nil, deviceURL: URL? = nil, apiURL: URL? = nil, url: URL? = nil, user: String? = nil,
                configuredPassword: String? = nil, options: ProviderOptions = ProviderOptions()) {
        self.name = name
        self.provider = provider
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.tokenURL = tokenURL
        self.authURL = authURL
        self.deviceURL = deviceURL
        self.apiURL = apiURL
        self.url = url
        self.user = user
        self.configuredPassword = configuredPassword
        self.options = options
    }
}

/// What a login did, for the CLI to print. Holds no secret.
public struct LoginOutcome: Sendable {
    /// The token file written; nil when nothing was stored (a WebDAV password kept in the config).
    public var storedAt: URL?
    public var expiresAt: Date?
    public var hasRefreshToken: Bool
    /// Who the provider says the account is (display name, e-mail or login), when it said.
    public var account: String?
    /// How the credentials were obtained, e.g. "device code", "pasted code", "imported tokens", "password".
    public var method: String
}

/// `cloudsync login`: obtains credentials with the flow the remote's provider declares (`ProviderDescriptor.credential`
/// and `OAuthFacts.flow`), proves them with its account check, then stores them. Nothing is written unless every
/// step succeeded. Today:
///
/// - onedrive: device code (`device_url`, `token_url`, scope `Files.Read Files.Read.All offline_access`).
/// - yandex: device code; when the device endpoint refuses the client (4xx), the confirmation-code paste
///   flow (`redirect_uri=https://oauth.yandex.ru/verification_code`).
/// - dropbox: PKCE code pasted by the person (`token_access_type=offline`).
/// - gdrive: PKCE with a loopback redirect, or the pasted redirect address/code (scope `drive.readonly`).
/// - webdav: a password typed without echo (unless the config gives one), checked with PROPFIND Depth 0;
///   stored only when typed here.
/// - `imported` tokens (`--token-json`): our stored/TokenSet JSON or rclone's; refreshed first when expired.
///
/// Throws `AuthError` (`.missingClientID` exit 3; flow failures exit 4; `.storage` exit 74).
public struct Login: Sendable {
    public let remote: LoginRemote
    public let store: TokenStore
    public let transport: any Transport
    public let logger: Logger
    /// Added to the interval on `slow_down` (RFC 8628: 5 s). Tests shorten it.
    public var slowDownIncrement: TimeInterval = 5

    public init(remote: LoginRemote, store: TokenStore, transport: any Transport, logger: Logger) {
        self.remote = remote
        self.store = store
        self.transport = transport
        self.logger = logger
    }

    /// Runs the provider's interactive flow.
    public func run(interaction: any LoginInteraction) async throws -> LoginOutcome {
        let provider = remote.provider
        switch provider.credential(remote.options) {
        case .password:
            return try await loginWithPassword(interaction: interaction)
        case .staticToken(let setting):
            throw AuthError(.configuration, "remote '\(remote.name)' uses \(setting): obtain its tokens elsewhere and run `cloudsync login \(remote.name) --token-json FILE`")
        case .oauth:
            break
        }
        guard let oauth = provider.oauth else {
            throw AuthError(.configuration, "remote '\(remote.name)': provider \(provider.kind) has no login flow; set its credentials in the config")
        }
        let clientID = try requireClientID()
        let tokenURL = try endpoint(remote.tokenURL, oauth.tokenURL, "token_url")
        let secret = nonEmpty(remote.clientSecret)
        let tokens: TokenSet
        let method: String
        switch oauth.flow {
        case .deviceCode(let dialect, let fallback):
            let deviceURL = try endpoint(remote.deviceURL, oauth.deviceURL, "device_url")
            var flow = DeviceFlow(style: dialect == .yandex ? .yandex : .rfc8628, deviceURL: deviceURL, tokenURL: tokenURL,
                                  clientID: clientID, clientSecret: secret, scope: oauth.scope)
            flow.slowDownIncrement = slowDownIncrement
            do {
                tokens = try await flow.run(interaction: interaction, transport: transport, logger: logger)
                method = "device code"
            } catch let refused as DeviceFlow.Unsupported {
                guard let fallback else {
                    throw AuthError(.invalidGrant, "the device endpoint \(redactedURL(deviceURL)) refused the client (HTTP \(refused.status), \(refused.error)); check client_id and that the app allows public client flows (see docs/login.md)")
                }
                interaction.show("The device flow is not available for this app (\(refused.error)); using a \(fallback.method) instead.")
                tokens = try await authorizationCode(fallback, oauth: oauth, tokenURL: tokenURL, clientID: clientID, secret: secret)
                    .run(interaction: interaction, transport: transport, logger: logger)
                method = fallback.method
            }
        case .authorizationCode(let login):
            tokens = try await authorizationCode(login, oauth: oauth, tokenURL: tokenURL, clientID: clientID, secret: secret)
                .run(interaction: interaction, transport: transport, logger: logger)
            method = login.method
        }
        return try await finish(tokens, method: method)
    }

    private func authorizationCode(_ login: AuthorizationCodeLogin, oauth: OAuthFacts, tokenURL: URL, clientID: String,
                                   secret: String?) throws(AuthError) -> AuthorizationCodeFlow {
        let authURL = try endpoint(remote.authURL, oauth.authorizeURL, "auth_url")
        let redirect: AuthorizationCodeFlow.Redirect = switch login.redirect {
        case .paste(let fixed): .paste(fixedRedirect: fixed)
        case .loopback: .loopback
        }
        return AuthorizationCodeFlow(authURL: authURL, tokenURL: tokenURL, clientID: clientID, clientSecret: secret,
                                     scope: login.sendsScope ? oauth.scope : nil, redirect: redirect,
                                     extraParameters: login.extraParameters)
    }

    /// Imports tokens obtained elsewhere (`--token-json`): `text` is our token file, a `TokenSet` JSON, or
    /// rclone's `{"access_token","token_type","refresh_token","expiry"}` (surrounding text is ignored).
    public func importTokens(_ text: String) async throws -> LoginOutcome {
        var tokens = try TokenImport.parse(text)
        if let expiresAt = tokens.expiresAt, expiresAt.timeIntervalSinceNow < 60 {
            guard tokens.refreshToken != nil else {
                throw AuthError(.expired, "the imported access token has expired and there is no refresh token; obtain new tokens and import them again")
            }
            let client = try AuthSetup.refreshClient(remoteName: remote.name, provider: remote.provider, tokenURL: remote.tokenURL,
                                                     clientID: remote.clientID, clientSecret: remote.clientSecret)
            let refresher = OAuthRefresher(remoteName: remote.name, tokens: tokens, client: client, transport: transport,
                                           logger: logger) { _ in }
            do {
                _ = try await refresher.refresh(rejected: tokens.accessToken)
            } catch let error as ProviderError {
                throw AuthError(error.code == .transient || error.code == .unreachable ? .network : .invalidGrant,
                                "the imported access token has expired and refreshing it failed: \(error.message)", cause: error)
            }
            let imported = tokens
            tokens = await refresher.current
            if tokens.refreshToken != imported.refreshToken {
                // Rotated (OneDrive, Google may): the imported refresh token is spent now, so the new one is kept
                // whatever the check below says — dropping it would leave no way back but a new authorization.
                return try await finish(tokens, method: "imported tokens", storingFirst: true)
            }
        }
        return try await finish(tokens, method: "imported tokens")
    }

    /// Proves `tokens` with one API call and stores them. `storingFirst`: tokens that must not be lost (a refresh
    /// token rotated by this run) are stored before the check, and a failed check says they were kept.
    private func finish(_ tokens: TokenSet, method: String, storingFirst: Bool = false) async throws -> LoginOutcome {
        let stored = StoredCredentials(provider: remote.provider.kind.rawValue, tokens: tokens)
        if storingFirst { try store.save(stored, for: remote.name) }
        let account: String?
        do {
            account = try await TokenCheck(remote: remote, transport: transport, logger: logger).prove(tokens)
        } catch let error as AuthError where storingFirst {
            var kept = error
            kept.message = kept.message.replacingOccurrences(of: "; nothing was stored", with: "")
                + " (the refreshed tokens were stored all the same: the provider replaced the imported refresh token, which no longer works)"
            throw kept
        }
        if !storingFirst { try store.save(stored, for: remote.name) }
        logger.info("remote '\(remote.name)': tokens stored in \(store.fileURL(for: remote.name).path)")
        return LoginOutcome(storedAt: store.fileURL(for: remote.name), expiresAt: tokens.expiresAt,
                            hasRefreshToken: tokens.refreshToken != nil, account: account, method: method)
    }

    private func loginWithPassword(interaction: any LoginInteraction) async throws -> LoginOutcome {
        guard let url = remote.url else {
            throw AuthError(.configuration, "remote '\(remote.name)': \(remote.provider.kind) needs url, the collection URL")
        }
        let check = TokenCheck(remote: remote, transport: transport, logger: logger)
        if let password = remote.configuredPassword {
            try await check.propfind(url: url, user: remote.user ?? "", password: password)
            return LoginOutcome(storedAt: nil, expiresAt: nil, hasRefreshToken: false, account: remote.user, method: "password from the config")
        }
        var user = nonEmpty(remote.user)
        if user == nil {
            guard let typed = try await interaction.readLine(prompt: "User for \(redactedURL(url)): "), !typed.isEmpty else {
                throw AuthError(.noInput, "no user name was entered; set user in the config or type it at the prompt")
            }
            user = typed
        }
        guard let password = try await interaction.readSecret(prompt: "Password for \(user ?? "") at \(redactedURL(url)): "),
              !password.isEmpty else {
            throw AuthError(.noInput, "no password was entered; nothing was stored")
        }
        try await check.propfind(url: url, user: user ?? "", password: password)
        try store.save(StoredCredentials(provider: remote.provider.kind.rawValue, user: user, password: password), for: remote.name)
        return LoginOutcome(storedAt: store.fileURL(for: remote.name), expiresAt: nil, hasRefreshToken: false,
                            account: user, method: "password")
    }

    private func requireClientID() throws(AuthError) -> String {
        guard let id = nonEmpty(remote.clientID) else {
            throw AuthError(.missingClientID, """
                remote '\(remote.name)' has no client_id: register an app with \(remote.provider.oauth?.appConsole ?? "the provider"), then set \
                client_id (and client_secret if the provider gave one) in [remote.\(remote.name)]; docs/login.md shows each step
                """)
        }
        return id
    }

    private func endpoint(_ configured: URL?, _ fallback: URL?, _ key: String) throws(AuthError) -> URL {
        guard let url = configured ?? fallback else {
            throw AuthError(.configuration, "remote '\(remote.name)': set \(key), the full URL of the provider's endpoint")
        }
        return url
    }
}
