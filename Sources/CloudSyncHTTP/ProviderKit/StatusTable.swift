import CloudSyncCore
import Foundation

/// An error answer, seen by the kit's one status → ``ProviderError`` table. A provider builds one per answer with
/// what its error body said, handles the few body codes (or documented statuses) its API gives their own meaning,
/// and leaves every other status to ``standard``: retries as data, written once.
///
/// Every message reads `<call>: HTTP <status><detail> — <advice>`, the advice telling what to do next.
public struct ErrorAnswer: Sendable {
    /// The provider as users know it: "Dropbox", "Drive", "OneDrive", "Yandex.Disk", "the WebDAV server".
    public var provider: String
    /// The remote's name, for `cloudsync login NAME`; nil when unknown.
    public var remote: String?
    /// Which call answered: what and where, never a query or a token ("Dropbox files/list_folder for remote 'db'").
    public var call: String
    public var status: Int
    /// What the body said, ready to follow the status (": path/not_found/..", " rateLimitExceeded (m)"); "" for none.
    public var detail: String
    /// From `Retry-After`, or a body field the provider trusts; carried by every error made from this answer.
    public var retryAfter: TimeInterval?

    public init(provider: String, remote: String?, call: String, status: Int, headers: HTTPHeaders,
                detail: String? = nil, now: Date = Date()) {
        self.provider = provider
        self.remote = remote
        self.call = call
        self.status = status
        self.detail = detail ?? ""
        retryAfter = CloudSyncHTTP.retryAfter(from: headers, now: now)
    }

    /// An error with `code` and `advice` (nil: the table's advice for `code`), the answer's status and wait.
    public func error(_ code: ProviderError.Code, _ advice: String? = nil, cause: (any Error & Sendable)? = nil) -> ProviderError {
        ProviderError(code, "\(call): HTTP \(status)\(detail) — \(advice ?? StatusTable.advice(for: code, status: status, in: self))",
                      status: status, retryAfter: retryAfter, cause: cause)
    }

    /// The table's error for the status; nil below 400.
    public var standard: ProviderError? {
        StatusTable.code(for: status).map { error($0) }
    }

    /// `cloudsync login NAME` for this remote.
    var login: String { remote.map { "`cloudsync login \($0)`" } ?? "`cloudsync login NAME` for this remote" }
}

/// The default meaning of HTTP statuses for every provider (RFC 9110, and rclone's `retryErrorCodes`).
public enum StatusTable {
    /// - 429, 503 → `.rateLimited` (the whole remote pauses; `Retry-After` when sent, else backoff).
    /// - 408, 423, 425, 500, 502, 504, 509 and other 5xx → `.transient` (one request retried with backoff).
    /// - 401 → `.unauthorized` (providers that can tell an expired token say `.tokenExpired` from the body).
    /// - 403 → `.forbidden`; 404, 410 → `.notFound`; 507 → `.quotaExceeded`.
    /// - 416 and every other 4xx → `.invalidResponse`; below 400 → nil.
    public static func code(for status: Int) -> ProviderError.Code? {
        switch status {
        case ..<400: nil
        case 429, 503: .rateLimited
        case 401: .unauthorized
        case 403: .forbidden
        case 404, 410: .notFound
        case 507: .quotaExceeded
        case 408, 423, 425, 500...: .transient
        default: .invalidResponse
        }
    }

    /// What to do next after an error of `code`, worded once for every provider.
    public static func advice(for code: ProviderError.Code, status: Int, in answer: ErrorAnswer) -> String {
        switch code {
        case .rateLimited:
            "\(answer.provider) is throttling requests; cloudsync waits\(answer.retryAfter.map { " \(Int($0)) s (Retry-After)" } ?? "") and retries"
        case .transient, .unreachable:
            "temporary server failure; cloudsync retries with backoff"
        case .unauthorized:
            "\(answer.provider) refused the credentials; run \(answer.login)"
        case .tokenExpired:
            "the access token was refused; cloudsync refreshes it, and if that keeps failing run \(answer.login)"
        case .forbidden:
            "access denied; check the account's permissions on this file"
        case .notFound:
            "no such file or folder; it may have been moved or deleted: run `cloudsync pull` again to refresh the listing, or check root in the config"
        case .quotaExceeded:
            "the account's quota is exhausted; retrying will not help until space or quota is freed"
        case .cursorReset:
            "the saved change cursor is no longer valid; cloudsync lists everything again"
        case .configuration:
            "the request built from the config was refused; check root and api_url in the config"
        case .linkExpired:
            "the download link expired; cloudsync resolves it again"
        case .invalidResponse where status == 416:
            "range outside the file; its size changed, run `cloudsync pull` again"
        case .invalidResponse where status == 400:
            "\(answer.provider) refused the request as malformed; check api_url and root in the config, or report a cloudsync bug"
        case .invalidResponse:
            "unexpected answer from \(answer.provider); check the remote's URL settings (api_url, root), or report a cloudsync bug"
        }
    }
}
