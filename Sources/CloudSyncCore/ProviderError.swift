import Foundation

/// An error from a provider or the transport, with what the user should do next.
public struct ProviderError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// Token missing, expired beyond refresh, or refused: log in again (exit 4).
        case unauthorized
        /// The access token expired: refresh it and retry once.
        case tokenExpired
        /// The path or item does not exist.
        case notFound
        /// Throttled: retry after `retryAfter` or with backoff.
        case rateLimited
        /// Temporary failure (5xx, cut connection, timeout): retry with backoff.
        case transient
        /// The host cannot be reached at all: DNS failure, connection refused, no route, connect timeout.
        /// Retryable, but interactive callers (`ls`, `serve`) fail fast on it and fall back to the cache.
        case unreachable
        /// The server answered something that does not follow its API.
        case invalidResponse
        /// Storage or download quota exhausted; retrying will not help soon.
        case quotaExceeded
        /// The server refuses this file (malware, abusive, restricted, not downloadable).
        case forbidden
        /// A download link expired or the content host refused it: resolve the download again.
        case linkExpired
        /// A change cursor is no longer valid: list everything again.
        case cursorReset
        /// Misconfiguration found while talking to the provider (bad URL, missing credential).
        case configuration
    }

    public var code: Code
    /// Says what went wrong and what to do next. Never contains tokens or signed URLs.
    public var message: String
    /// Seconds to wait before retrying, when the server said (Retry-After or a body field).
    public var retryAfter: TimeInterval?
    /// HTTP status, when the error came from a response.
    public var status: Int?
    public var cause: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, status: Int? = nil, retryAfter: TimeInterval? = nil,
                cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
        self.cause = cause
    }

    /// Whether the pacer may retry the same request.
    public var isRetryable: Bool { code == .rateLimited || code == .transient || code == .unreachable }

    /// This error once its retries are spent: the advice that promised them ("cloudsync waits 1 s (Retry-After)
    /// and retries", "cloudsync retries with backoff") says instead that it gave up after `retries`; the rest is kept.
    public func givenUp(after retries: Int) -> ProviderError {
        var copy = self
        let gaveUp = retries == 0 ? "cloudsync does not retry here" : "cloudsync gave up after \(retries) \(retries == 1 ? "retry" : "retries")"
        for promise in ["cloudsync retries with backoff"] where copy.message.contains(promise) {
            copy.message = copy.message.replacingOccurrences(of: promise, with: gaveUp)
        }
        if let start = copy.message.range(of: "cloudsync waits"),
           let end = copy.message.range(of: "and retries", range: start.upperBound ..< copy.message.endIndex) {
            copy.message.replaceSubrange(start.lowerBound ..< end.upperBound, with: gaveUp)
        }
        return copy
    }

    public var description: String { message }
}
