import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The authorization-code grant with PKCE S256 (RFC 6749 §4.1, RFC 7636) for a person without a local
/// browser: the URL is shown, the person approves anywhere and pastes the code back.
///
/// - `.paste` (Dropbox; Yandex confirmation code): no `redirect_uri` unless `fixedRedirect` is given
///   (Yandex: `https://oauth.yandex.ru/verification_code`); the provider shows the code, the person pastes it.
/// - `.loopback` (Google installed-app): `redirect_uri=http://127.0.0.1:PORT/` with a one-shot listener.
///   When the browser runs on this machine the listener gets the code; otherwise the person pastes the
///   address the browser ended on (or just the code). Whichever comes first wins; `state` is checked.
///
/// Errors: `.denied` (`error=access_denied` in the redirect), `.invalidGrant` (pasted code refused),
/// `.noInput` (input ended), `.network`.
public struct AuthorizationCodeFlow: Sendable {
    public enum Redirect: Sendable {
        case paste(fixedRedirect: String?)
        case loopback
    }

    public var authURL: URL
    public var tokenURL: URL
    public var clientID: String
    public var clientSecret: String?
    public var scope: String?
    public var redirect: Redirect
    /// Extra authorization parameters, e.g. Dropbox `token_access_type=offline`, Google `access_type=offline`.
    public var extraParameters: [(String, String)]
    /// How long `.loopback` waits for the browser or a paste.
    public var timeout: TimeInterval = 900

    public init(authURL: URL, tokenURL: URL, clientID: String, clientSecret: String?, scope: String?,
                redirect: Redirect, extraParameters: [(String, String)] = []) {
        self.authURL = authURL
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scope = scope
        self.redirect = redirect
        self.extraParameters = extraParameters
    }

    /// The URL the person opens (shown by `run`; public for tests and docs).
    public func authorizationURL(pkce: PKCE, redirectURI: String?, state: String?) -> URL {
        var query: [(String, String)] = [("client_id", clientID), ("response_type", "code")]
        if let redirectURI { query.append(("redirect_uri", redirectURI)) }
        if let scope { query.append(("scope", scope)) }
        query += extraParameters
        query += [("code_challenge", pkce.challenge), ("code_challenge_method", "S256")]
        if let state { query.append(("state", state)) }
        return url(authURL, adding: query)
    }

    public func run(interaction: any LoginInteraction, transport: any Transport, logger: Logger,
                    pkce: PKCE = .random()) async throws -> TokenSet {
        let state = PKCE.random().verifier.prefix(24).description
        let code: String
        let redirectURI: String?
        switch redirect {
        case .paste(let fixed):
            redirectURI = fixed
            let link = authorizationURL(pkce: pkce, redirectURI: fixed, state: nil)
            interaction.show("""
                To authorize cloudsync, open this URL in a browser (on any device), sign in and allow access:

                    \(link.absoluteString)

                Then paste the code the page shows.
                """)
            code = try await readCode(interaction: interaction, state: nil)
        case .loopback:
            let listener = try LoopbackListener()
            defer { listener.close() }
            let uri = "http://127.0.0.1:\(listener.port)/"
            redirectURI = uri
            let link = authorizationURL(pkce: pkce, redirectURI: uri, state: state)
            interaction.show("""
                To authorize cloudsync, open this URL in a browser, sign in and allow access:

                    \(link.absoluteString)

                If the browser runs on this machine, cloudsync continues by itself. Otherwise the browser ends on \
                a page at \(uri) that fails to load: copy that whole address from the address bar and paste it \
                here (or just the value of its code= parameter).
                """)
            code = try await withThrowingTaskGroup(of: String.self) { group in
                group.addTask {
                    while true {
                        let target = try await listener.waitForRequest(state: state)
                        guard target.contains("code=") || target.contains("error=") else { continue }
                        return try Self.code(fromPasted: uri + target.drop { $0 == "/" }, state: state)
                    }
                }
                group.addTask { try await self.readCode(interaction: interaction, state: state) }
                group.addTask {
                    try await Task.sleep(nanoseconds: UInt64(self.timeout * 1_000_000_000))
                    throw AuthError(.expired, "no authorization arrived within \(Int(self.timeout / 60)) min; nothing was stored. Run login again")
                }
                defer { group.cancelAll() }
                guard let first = try await group.next() else { throw CancellationError() }
                return first
            }
            logger.debug("authorization code received")
            return try await exchange(code: code, pkce: pkce, redirectURI: redirectURI, state: state,
                                      transport: transport, logger: logger)
        }
        return try await exchange(code: code, pkce: pkce, redirectURI: redirectURI, state: state,
                                  transport: transport, logger: logger)
    }

    private func exchange(code: String, pkce: PKCE, redirectURI: String?, state: String, transport: any Transport,
                          logger: Logger) async throws -> TokenSet {
        var fields = [("grant_type", "authorization_code"), ("code", code), ("code_verifier", pkce.verifier),
                      ("client_id", clientID)]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        if let clientSecret { fields.append(("client_secret", clientSecret)) }
        switch try await TokenEndpoint(url: tokenURL, transport: transport, logger: logger).post(fields) {
        case .tokens(let tokens): return tokens
        case .error(let error, let status, _): throw grantError(error, status: status, endpoint: tokenURL, what: "authorization code")
        }
    }

    /// Reads one non-empty line: a bare code, or a redirect URL whose query has `code` (and `state`, checked
    /// when `state` is given) or `error`.
    func readCode(interaction: any LoginInteraction, state: String?) async throws -> String {
        while true {
            guard let line = try await interaction.readLine(prompt: "Code: ") else {
                throw AuthError(.noInput, "input ended before an authorization code was pasted; nothing was stored. Run login again")
            }
            let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if text.isEmpty { continue }
            return try Self.code(fromPasted: text, state: state)
        }
    }

    /// The code in `text`: the text itself, or the `code` query parameter of a pasted redirect URL.
    static func code(fromPasted text: String, state: String?) throws(AuthError) -> String {
        guard text.contains("code=") || text.contains("error="), let components = URLComponents(string: text) else {
            return text
        }
        let items = components.queryItems ?? []
        func item(_ name: String) -> String? { items.first { $0.name == name }?.value }
        if let error = item("error") {
            throw grantError(error, status: 400, endpoint: URL(fileURLWithPath: "/"), what: "authorization")
        }
        if let state, let got = item("state"), got != state {
            throw AuthError(.invalidGrant, "the pasted address belongs to another login attempt (its state does not match); nothing was stored. Paste the address from the URL shown by this run")
        }
        guard let code = item("code"), !code.isEmpty else {
            throw AuthError(.invalidGrant, "the pasted address has no code= parameter; paste the whole address the browser ended on")
        }
        return code
    }
}
