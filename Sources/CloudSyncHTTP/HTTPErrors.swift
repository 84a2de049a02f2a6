import CloudSyncCore
import Foundation

/// Seconds to wait from `now` according to the `Retry-After` header (RFC 9110 §10.2.3): either a
/// non-negative integer of seconds or an HTTP-date (IMF-fixdate, obsolete RFC 850 or asctime form).
/// A date in the past gives 0. Returns nil when the header is absent or unparseable.
public func retryAfter(from headers: HTTPHeaders, now: Date = Date()) -> TimeInterval? {
    guard let raw = headers["Retry-After"]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
    if raw.allSatisfy(\.isASCIIDigit) {
        return Double(raw).map { min($0, 7 * 86400) }
    }
    guard let date = HTTPDate.parse(raw) else { return nil }
    return max(0, date.timeIntervalSince(now))
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

extension ProviderError {
    /// Statuses the pacer may retry: 408/423/425/429/500/502/503/504/509.
    public static let retryableHTTPStatuses: Set<Int> = [408, 423, 425, 429, 500, 502, 503, 504, 509]

    /// Generic mapping of an HTTP status to an error, for statuses a provider does not special-case.
    /// Returns nil for 1xx–3xx and 2xx. `context` names the operation and host (never a token or a query string),
    /// e.g. "GET https://api.example.com/v1/files"; a short excerpt of a textual body is appended to the message.
    ///
    /// - 429, 503 → `.rateLimited` with `retryAfter` from the `Retry-After` header (nil when absent: back off).
    /// - 408, 423, 425, 500, 502, 504, 509 → `.transient` (with `retryAfter` when the header is present).
    /// - 401 → `.unauthorized` (providers that can tell an expired token map it to `.tokenExpired` themselves).
    /// - 403 → `.forbidden`; 404, 410 → `.notFound`; 507 → `.quotaExceeded`.
    /// - 416 → `.invalidResponse` (the requested range lies outside the file: its size changed).
    /// - other 4xx/5xx → `.invalidResponse` (5xx → `.transient`).
    public static func fromHTTP(status: Int, headers: HTTPHeaders, body: Data = Data(), context: String,
                                now: Date = Date()) -> ProviderError? {
        guard status >= 400 else { return nil }
        let wait = CloudSyncHTTP.retryAfter(from: headers, now: now)
        let detail = bodyExcerpt(body).map { ": \($0)" } ?? ""
        let (code, advice): (Code, String) = switch status {
        case 429, 503: (.rateLimited, "the server is throttling requests; cloudsync waits and retries")
        case 408, 423, 425, 500, 502, 504, 509: (.transient, "temporary server failure; cloudsync retries with backoff")
        case 401: (.unauthorized, "credentials were refused; run `cloudsync login NAME` for this remote")
        case 403: (.forbidden, "access denied; check the account's permissions on this file")
        case 404, 410: (.notFound, "no such file or folder; it may have been moved or deleted, list again")
        case 507: (.quotaExceeded, "the server's storage or quota is exhausted")
        case 416: (.invalidResponse, "range outside the file; its size changed, list again")
        case 500...: (.transient, "server error; cloudsync retries with backoff")
        default: (.invalidResponse, "unexpected answer; check the remote's URL settings")
        }
        return ProviderError(code, "\(context): HTTP \(status)\(detail) — \(advice)", status: status, retryAfter: wait)
    }

    /// At most 200 characters of a UTF-8 body on one line, or nil when the body is empty or binary.
    static func bodyExcerpt(_ body: Data) -> String? {
        guard !body.isEmpty, let text = String(data: body.prefix(400), encoding: .utf8) else { return nil }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ").trimmingCharacters(in: .whitespaces)
        guard !line.isEmpty else { return nil }
        return line.count > 200 ? String(line.prefix(200)) + "…" : line
    }
}
