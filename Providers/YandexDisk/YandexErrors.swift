import CloudSyncCore
import CloudSyncHTTP
import Foundation

extension YandexDiskProvider {
    /// Maps an API answer to an error (nil below 400): the kit's ``StatusTable``, refined by the body
    /// `{"message", "description", "error": "<Name>"}`, whose name wins over the status:
    ///
    /// - `UnauthorizedError` / 401 → `.tokenExpired` (the API client refreshes once; a second refusal becomes
    ///   `.unauthorized` with "run `cloudsync login NAME`").
    /// - `FieldValidationError` / 400 → `.configuration` (a parameter built from the config was refused: root, api_url).
    /// - `ForbiddenError` / 403 → `.forbidden`, naming the read access the token needs.
    /// - `LockedError`, `DiskResourceLockedError` / 423 → `.transient`; `DiskNotFoundError` → `.notFound`;
    ///   `TooManyRequestsError` → `.rateLimited`; `DiskInsufficientStorageError` → `.quotaExceeded`.
    ///
    /// Messages name the API path (never the query, never a token) and quote the English `description`.
    static func classify(_ response: HTTPResponse, remoteName: String, now: Date = Date()) -> ProviderError? {
        guard response.status >= 400 else { return nil }
        let body = try? JSONDecoder().decode(YandexAPI.ErrorBody.self, from: response.body)
        let name = body?.error ?? ""
        let answer = ErrorAnswer(provider: "Yandex.Disk", remote: remoteName,
                                 call: "Yandex.Disk \(response.head.url.path) (remote '\(remoteName)')",
                                 status: response.status, headers: response.headers,
                                 detail: (name.isEmpty ? "" : " \(name)") + ((body?.description ?? body?.message).map { ": \($0)" } ?? ""),
                                 now: now)
        switch (name, response.status) {
        case ("UnauthorizedError", _), (_, 401):
            return answer.error(.tokenExpired, "the token was refused; cloudsync refreshes it once, else run `cloudsync login \(remoteName)`")
        case ("FieldValidationError", _), (_, 400):
            return answer.error(.configuration)
        case ("ForbiddenError", _), (_, 403):
            return answer.error(.forbidden, "access denied; check that the token was granted Yandex.Disk read access (cloudsync login \(remoteName))")
        case ("LockedError", _), ("DiskResourceLockedError", _), (_, 423):
            return answer.error(.transient, "the resource is locked by another operation; cloudsync retries")
        case ("DiskNotFoundError", _): return answer.error(.notFound)
        case ("TooManyRequestsError", _): return answer.error(.rateLimited)
        case ("DiskInsufficientStorageError", _): return answer.error(.quotaExceeded)
        default: return answer.standard
        }
    }
}
