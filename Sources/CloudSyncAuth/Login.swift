import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The settings of one remote that a login needs (copied from the config by the CLI).
public struct LoginRemote: Sendable {
    public var name: String
    /// dropbox, gdrive, onedrive, yandex or webdav.
    public var provider: String
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
    /// WebDAV: the password from the config or its `password_command`; nil means prompt and store it.
    public var configuredPassword: String?
    /// WebDAV: `basic` (user/password), `bearer` or `oauth` (tokens).
    public var webdavAuth: String

    public init(name: String, provider: String, clientID: String? = nil, clientSecret: String? = nil, tokenURL: URL? = nil,
                authURL: URL? = nil, deviceURL: URL? = nil, apiURL: URL? = nil, url: URL? = nil, user: String? = nil,
                configuredPassword: String? = nil, webdavAuth: String = "basic") {
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
        self.webdavAuth = webdavAuth
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
    /// How the credentials were obtained, e.g. "device code", "pasted code", "imported", "password".
    public var method: String
}

/// `cloudsync login`: obtains credentials with the flow the remote's provider supports, proves them with
/// one authenticated request, then stores them. Nothing is written unless every step succeeded.
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
        if provider == "webdav" {
            guard remote.webdavAuth == "basic" else {
                throw AuthError(.configuration, "remote '\(remote.name)' uses auth = \"\(remote.webdavAuth)\": obtain its tokens elsewhere and run `cloudsync login \(remote.name) --token-json FILE`")
            }
            return try await loginWebDAV(interaction: interaction)
        }
        let clientID = try requireClientID()
        let tokenURL = try endpoint(remote.tokenURL, AuthSetup.defaultTokenURL(provider: provider), "token_url")
        let secret = nonEmpty(remote.clientSecret)
        let tokens: TokenSet
        let method: String
        switch provider {
        case "onedrive", "yandex":
            let deviceURL = try endpoint(remote.deviceURL, AuthSetup.defaultDeviceURL(provider: provider), "device_url")
            var flow = DeviceFlow(style: provider == "yandex" ? .yandex : .rfc8628, deviceURL: deviceURL, tokenURL: tokenURL,
                                  clientID: clientID, clientSecret: secret, scope: AuthSetup.scope(provider: provider))
            flow.slowDownIncrement = slowDownIncrement
            do {
                tokens = try await flow.run(interaction: interaction, transport: transport, logger: logger)
                method = "device code"
            } catch let refused as DeviceFlow.Unsupported {
                guard provider == "yandex" else {
                    throw AuthError(.invalidGrant, "the device endpoint \(redactedURL(deviceURL)) refused the client (HTTP \(refused.status), \(refused.error)); check client_id and that the app allows public client flows (see docs/login.md)")
                }
                interaction.show("The device flow is not available for this app (\(refused.error)); using a confirmation code instead.")
                let authURL = try endpoint(remote.authURL, AuthSetup.defaultAuthURL(provider: provider), "auth_url")
                tokens = try await AuthorizationCodeFlow(authURL: authURL, tokenURL: tokenURL, clientID: clientID, clientSecret: secret,
                                                         scope: nil, redirect: .paste(fixedRedirect: "https://oauth.yandex.ru/verification_code"))
                    .run(interaction: interaction, transport: transport, logger: logger)
                method = "confirmation code"
            }
        case "dropbox", "gdrive":
            let authURL = try endpoint(remote.authURL, AuthSetup.defaultAuthURL(provider: provider), "auth_url")
            let flow = provider == "dropbox"
                ? AuthorizationCodeFlow(authURL: authURL, tokenURL: tokenURL, clientID: clientID, clientSecret: secret, scope: nil,
                                        redirect: .paste(fixedRedirect: nil), extraParameters: [("token_access_type", "offline")])
                : AuthorizationCodeFlow(authURL: authURL, tokenURL: tokenURL, clientID: clientID, clientSecret: secret,
                                        scope: AuthSetup.scope(provider: provider), redirect: .loopback,
                                        extraParameters: [("access_type", "offline"), ("prompt", "consent")])
            tokens = try await flow.run(interaction: interaction, transport: transport, logger: logger)
            method = "pasted code"
        default:
            throw AuthError(.configuration, "remote '\(remote.name)': unknown provider '\(provider)'; use dropbox, gdrive, onedrive, yandex or webdav")
        }
        return try await finish(tokens, method: method)
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
            tokens = await refresher.current
        }
        return try await finish(tokens, method: "imported")
    }

    private func finish(_ tokens: TokenSet, method: String) async throws -> LoginOutcome {
        let account = try await TokenCheck(remote: remote, transport: transport, logger: logger).prove(tokens)
        let stored = StoredCredentials(provider: remote.provider, tokens: tokens)
        try store.save(stored, for: remote.name)
        logger.info("remote '\(remote.name)': tokens stored in \(store.fileURL(for: remote.name).path)")
        return LoginOutcome(storedAt: store.fileURL(for: remote.name), expiresAt: tokens.expiresAt,
                            hasRefreshToken: tokens.refreshToken != nil, account: account, method: method)
    }

    private func loginWebDAV(interaction: any LoginInteraction) async throws -> LoginOutcome {
        guard let url = remote.url else {
            throw AuthError(.configuration, "remote '\(remote.name)': webdav needs url, the collection URL")
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
        try store.save(StoredCredentials(provider: "webdav", user: user, password: password), for: remote.name)
        return LoginOutcome(storedAt: store.fileURL(for: remote.name), expiresAt: nil, hasRefreshToken: false,
                            account: user, method: "password")
    }

    private func requireClientID() throws(AuthError) -> String {
        guard let id = nonEmpty(remote.clientID) else {
            throw AuthError(.missingClientID, """
                remote '\(remote.name)' has no client_id: register an app with \(Self.console(remote.provider)), then set \
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

    static func console(_ provider: String) -> String {
        switch provider {
        case "dropbox": "Dropbox (https://www.dropbox.com/developers/apps)"
        case "gdrive": "Google Cloud (https://console.cloud.google.com/apis/credentials, type \"Desktop app\")"
        case "onedrive": "Microsoft Entra (https://entra.microsoft.com → App registrations, allow public client flows)"
        case "yandex": "Yandex OAuth (https://oauth.yandex.com/client/new)"
        default: "the provider"
        }
    }
}
