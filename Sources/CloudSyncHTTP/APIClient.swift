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
        let transport = transport
        return try await run(request) { try await (transport.send($0), ()) }.0
    }

    /// Like ``send(_:)``, but the body of the answer streams into a sink made afresh for every attempt by
    /// `makeSink` (a retried request starts over); the successful attempt's sink is returned for the caller to
    /// read. The classifier sees the head, and the body only of answers the sink did not accept.
    public func send<Sink: ResponseBodySink>(_ request: HTTPRequest, streamingInto makeSink: @escaping @Sendable () throws -> Sink)
        async throws -> (HTTPResponse, Sink) {
        let transport = transport
        return try await run(request) { req in
            let sink = try makeSink()
            return (try await transport.send(req, into: sink), sink)
        }
    }

    /// The retry loop of both sends: `attempt` sends one authorised request.
    private func run<T: Sendable>(_ request: HTTPRequest, _ attempt: @escaping @Sendable (HTTPRequest) async throws -> (HTTPResponse, T))
        async throws -> (HTTPResponse, T) {
        let what = "\(request.method) \(redactedLink(request.url))"
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
                // The transport logs each exchange once at debug level (method, redacted URL, status, time).
                let (response, result) = try await attempt(req)
                guard let error = classify(response) else { return (response, result) }
                if error.code == .tokenExpired, let tokens, let token, rejected.count < 3, rejected.insert(token).inserted {
                    _ = try await tokens.refresh(rejected: token)
                    continue
                }
                throw error
            }
        }
    }
}
