import CloudSyncCore
import CloudSyncHTTP
import Foundation

extension YandexDiskProvider {
    /// Maps an API answer to an error (nil below 400). The body is Yandex's
    /// `{"message", "description", "error": "<Name>"}`; the name wins over the status when both are known:
    ///
    /// - `UnauthorizedError` / 401 → `.tokenExpired` (the API client refreshes once; a second refusal becomes
    ///   `.unauthorized` with "run `cloudsync login NAME`").
    /// - `DiskNotFoundError` / 404, 410 → `.notFound`.
    /// - `FieldValidationError` / 400 → `.configuration` (a parameter built from the config was refused: root, api_url).
    /// - `ForbiddenError` / 403 → `.forbidden`.
    /// - `TooManyRequestsError` / 429 and 503 → `.rateLimited`, `retryAfter` from `Retry-After` when present.
    /// - `DiskInsufficientStorageError` / 507 → `.quotaExceeded`; `LockedError`, 423 and other 5xx → `.transient`.
    /// - anything else → `ProviderError.fromHTTP`.
    ///
    /// Messages name the API path (never the query, never a token) and quote the English `description`.
    static func classify(_ response: HTTPResponse, remoteName: String, now: Date = Date()) -> ProviderError? {
        let status = response.status
        guard status >= 400 else { return nil }
        let body = try? JSONDecoder().decode(YandexAPI.ErrorBody.self, from: response.body)
        let name = body?.error ?? ""
        let said = (body?.description ?? body?.message).map { ": \($0)" } ?? ""
        let tag = name.isEmpty ? "HTTP \(status)" : "HTTP \(status) \(name)"
        let context = "Yandex.Disk \(response.head.url.path) (remote '\(remoteName)')"
        let wait = retryAfter(from: response.headers, now: now)
        func error(_ code: ProviderError.Code, _ advice: String) -> ProviderError {
            ProviderError(code, "\(context): \(tag)\(said) — \(advice)", status: status, retryAfter: wait)
        }
        switch (name, status) {
        case ("UnauthorizedError", _), (_, 401):
            return error(.tokenExpired, "the token was refused; cloudsync refreshes it once, else run `cloudsync login \(remoteName)`")
        case ("DiskNotFoundError", _), (_, 404), (_, 410):
            return error(.notFound, "no such file or folder; check root in the config or list again")
        case ("FieldValidationError", _), (_, 400):
            return error(.configuration, "a request parameter was refused; check root and api_url in the config")
        case ("TooManyRequestsError", _), (_, 429), (_, 503):
            return error(.rateLimited, "Yandex.Disk is throttling requests; cloudsync waits and retries")
        case ("ForbiddenError", _), (_, 403):
            return error(.forbidden, "access denied; check that the token was granted Yandex.Disk read access (cloudsync login \(remoteName))")
        case ("DiskInsufficientStorageError", _), (_, 507):
            return error(.quotaExceeded, "the disk's quota is exhausted")
        case ("LockedError", _), ("DiskResourceLockedError", _), (_, 423):
            return error(.transient, "the resource is locked by another operation; cloudsync retries")
        case (_, 500...):
            return error(.transient, "temporary server failure; cloudsync retries with backoff")
        default:
            return ProviderError.fromHTTP(status: status, headers: response.headers, body: response.body, context: context, now: now)
        }
    }
}
