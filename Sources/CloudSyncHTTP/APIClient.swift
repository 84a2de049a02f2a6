import CloudSyncCore
import Foundation

/// How a provider puts its token into a request: `Authorization: <scheme> <token>`.
public struct AuthScheme: Sendable {
    /// "Bearer" for Dropbox, Drive, Graph; "OAuth" for Yandex.
    public var scheme: String

    public init(scheme: String) { self.scheme = scheme }

    public static let bearer = AuthScheme(scheme: "Bearer")
    public static let oauth = AuthScheme(scheme: "OAuth")
}

/// Maps a provider's answer to an error: nil means success. Each provider supplies one (retries as data).
public typealias ResponseClassifier = @Sendable (HTTPResponse) -> ProviderError?

/// Sends API requests for one remote: adds the token, retries through the remote's pacer, refreshes the
/// token on `.tokenExpired` (again only when a different token is refused, at most three times). Returns only successful responses; everything else throws `ProviderError`.
public struct APIClient: Sendable {
    public let transport: any Transport
    public let pacer: Pacer
    public let tokens: (any TokenSource)?
    public let auth: AuthScheme
    public let classify: ResponseClassifier
    public let logger: Logger

    public init(transport: any Transport, pacer: Pacer, tokens: (any TokenSource)?, auth: AuthScheme = .bearer,
                logger: Logger = .silent, classify: @escaping ResponseClassifier) {
        self.transport = transport
        self.pacer = pacer
        self.tokens = tokens
        self.auth = auth
        self.logger = logger
        self.classify = classify
    }

    /// The value of the `Authorization` header, or nil without a token source.
    public func authorization() async throws -> String? {
        guard let tokens else { return nil }
        return "\(auth.scheme) \(try await tokens.accessToken())"
    }

    /// After a content host refused a download with 401: refreshes the token when `headers` carried this
    /// client's current one (`Authorization: <scheme> <token>`); a token another caller already replaced is not
    /// refreshed again. Headers without this client's token (pre-authenticated links) change nothing.
    public func refreshToken(carriedBy headers: [(name: String, value: String)]) async throws {
        let prefix = "\(auth.scheme) "
        guard let tokens,
              let sent = headers.first(where: { ASCII.equalsIgnoringCase($0.name, "Authorization") })?.value,
              sent.hasPrefix(prefix) else { return }
        _ = try await tokens.refresh(rejected: String(sent.dropFirst(prefix.count)))
    }

    /// Sends `request` with auth, retrying transient failures and refreshing an expired token once.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let what = "\(request.method) \(redactedURL(request.url))"
        return try await pacer.run(what) {
            // Tokens refused as expired by this request. Each refusal of a new token may refresh again (another
            // job may have spent or replaced the fresh one meanwhile); the same token twice means refresh failed.
            var rejected: Set<String> = []
            while true {
                var req = request
                var token: String?
                if let tokens {
                    let t = try await tokens.accessToken()
                    token = t
                    req.headers.set("Authorization", "\(auth.scheme) \(t)")
                }
                let started = Date()
                let response = try await transport.send(req)
                logger.debug("\(what) → \(response.status), \(response.body.count) B, \(String(format: "%.3f", Date().timeIntervalSince(started))) s")
                guard let error = classify(response) else { return response }
                if error.code == .tokenExpired, let tokens, let token, rejected.count < 3, rejected.insert(token).inserted {
                    _ = try await tokens.refresh(rejected: token)
                    continue
                }
                throw error
            }
        }
    }
}
