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

    /// The kit's ``StatusTable`` for an answer nobody reads the body of (content hosts, tests): nil below 400.
    /// `context` names the operation and host (never a token or a query string), e.g.
    /// "GET https://api.example.com/v1/files"; a short excerpt of a textual body follows the status.
    /// `remote`: the remote's name, so a refusal's advice names the login to run.
    public static func fromHTTP(status: Int, headers: HTTPHeaders, body: Data = Data(), context: String,
                                remote: String? = nil, now: Date = Date()) -> ProviderError? {
        ErrorAnswer(provider: "the server", remote: remote, call: context, status: status, headers: headers,
                    detail: bodyExcerpt(body).map { ": \($0)" }, now: now).standard
    }

    /// At most 200 characters of a UTF-8 body on one line, or nil when the body is empty or binary.
    public static func bodyExcerpt(_ body: Data) -> String? {
        guard !body.isEmpty, let text = String(data: body.prefix(400), encoding: .utf8) else { return nil }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ").trimmingCharacters(in: .whitespaces)
        guard !line.isEmpty else { return nil }
        return line.count > 200 ? String(line.prefix(200)) + "…" : line
    }
}
