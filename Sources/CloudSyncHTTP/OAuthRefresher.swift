import CloudSyncCore
import Foundation

/// An OAuth 2 token set as stored by the token store and handed back after each refresh.
public struct TokenSet: Codable, Sendable, Hashable {
    public var accessToken: String
    public var refreshToken: String?
    /// When the access token stops working, if the server said (`expires_in`).
    public var expiresAt: Date?
    /// "Bearer" usually, as the token endpoint spelled it.
    public var tokenType: String?

    public init(accessToken: String, refreshToken: String? = nil, expiresAt: Date? = nil, tokenType: String? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.tokenType = tokenType
    }
}

/// A `TokenSource` that refreshes with the OAuth 2 `refresh_token` grant (RFC 6749 §6).
///
/// - Refreshes ahead of expiry (when fewer than `margin` seconds remain) and on `refresh(rejected:)`.
/// - One refresh at a time: concurrent callers share it. A caller whose rejected token is no longer the
///   current one gets the current one without a new refresh.
/// - A rotated `refresh_token` (Microsoft) replaces the old one; the new set goes to `persist` before any
///   caller sees the new access token, so a crash never loses a rotated refresh token.
/// - Token endpoint refusals (`invalid_grant`, `invalid_client`, 400/401) throw `.unauthorized` telling the
///   user to run `cloudsync login NAME`; network failures and 5xx throw `.transient`.
public actor OAuthRefresher: TokenSource {
    public struct Client: Sendable {
        public var tokenURL: URL
        public var clientID: String?
        public var clientSecret: String?
        /// Extra form fields, e.g. `scope` for Microsoft.
        public var extraFields: [(String, String)]

        public init(tokenURL: URL, clientID: String? = nil, clientSecret: String? = nil, extraFields: [(String, String)] = []) {
            self.tokenURL = tokenURL
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.extraFields = extraFields
        }
    }

    private let remoteName: String
    private let client: Client
    private let transport: any Transport
    private let persist: @Sendable (TokenSet) async throws -> Void
    private let margin: TimeInterval
    private let now: @Sendable () -> Date
    private let logger: Logger
    private var tokens: TokenSet
    private var inFlight: Task<TokenSet, any Error>?

    public init(remoteName: String, tokens: TokenSet, client: Client, transport: any Transport,
                margin: TimeInterval = 60, logger: Logger = .silent, now: @escaping @Sendable () -> Date = { Date() },
                persist: @escaping @Sendable (TokenSet) async throws -> Void) {
        self.remoteName = remoteName
        self.tokens = tokens
        self.client = client
        self.transport = transport
        self.margin = margin
        self.logger = logger
        self.now = now
        self.persist = persist
    }

    /// The current token set (for inspection and tests).
    public var current: TokenSet { tokens }

    public func accessToken() async throws -> String {
        if let expiresAt = tokens.expiresAt, expiresAt.timeIntervalSince(now()) < margin {
            return try await refreshShared().accessToken
        }
        return tokens.accessToken
    }

    public func refresh(rejected: String) async throws -> String {
        if rejected != tokens.accessToken { return tokens.accessToken }
        return try await refreshShared().accessToken
    }

    private func refreshShared() async throws -> TokenSet {
        if let inFlight { return try await inFlight.value }
        let task = Task { try await self.performRefresh() }
        inFlight = task
        defer { inFlight = nil }
        let fresh = try await task.value
        return fresh
    }

    private func performRefresh() async throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken, !refreshToken.isEmpty else {
            throw ProviderError(.unauthorized, "the access token of remote '\(remoteName)' expired and there is no refresh token; run `cloudsync login \(remoteName)`")
        }
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let id = client.clientID { fields.append(("client_id", id)) }
        if let secret = client.clientSecret { fields.append(("client_secret", secret)) }
        fields += client.extraFields
        let request = HTTPRequest(method: "POST", url: client.tokenURL,
                                  headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                                  body: Data(Self.formEncode(fields).utf8))
        let started = now()
        let response = try await transport.send(request)
        let where_ = "token endpoint \(redactedURL(client.tokenURL))"
        let json = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard (200..<300).contains(response.status) else {
            let code = json?["error"] as? String
            if response.status >= 500 || response.status == 429 {
                throw ProviderError(response.status == 429 ? .rateLimited : .transient,
                    "\(where_) answered HTTP \(response.status) while refreshing the token of remote '\(remoteName)'; retry later",
                    status: response.status, retryAfter: retryAfter(from: response.headers, now: now()))
            }
            throw ProviderError(.unauthorized,
                "\(where_) refused to refresh the token of remote '\(remoteName)' (HTTP \(response.status)\(code.map { ", \($0)" } ?? "")); run `cloudsync login \(remoteName)`",
                status: response.status)
        }
        guard let json, let access = json["access_token"] as? String, !access.isEmpty else {
            if response.head.isHTMLPage {
                throw ProviderError(.invalidResponse, "\(where_) answered an HTML page, not a token: \(HTTPResponseHead.strangerAdvice); "
                    + "the stored tokens are kept", status: response.status)
            }
            throw ProviderError(.invalidResponse, "\(where_) answered without an access_token; run `cloudsync login \(remoteName)` or check auth_url", status: response.status)
        }
        let expiresIn = (json["expires_in"] as? NSNumber)?.doubleValue ?? (json["expires_in"] as? String).flatMap(Double.init)
        let fresh = TokenSet(accessToken: access,
                             refreshToken: (json["refresh_token"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? refreshToken,
                             expiresAt: expiresIn.map { started.addingTimeInterval($0) },
                             tokenType: json["token_type"] as? String ?? tokens.tokenType)
        try await persist(fresh)
        tokens = fresh
        logger.debug("refreshed the access token of remote '\(remoteName)'")
        return fresh
    }

    /// `application/x-www-form-urlencoded` (WHATWG URL §5.2): unreserved bytes as is, space as `+`.
    static func formEncode(_ fields: [(String, String)]) -> String { PercentEncoding.form(fields) }
}
