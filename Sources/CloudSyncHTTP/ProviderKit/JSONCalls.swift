import CloudSyncCore
import Foundation

/// JSON calls of the API providers, their decode errors worded in one place.
extension APIClient {
    /// `GET url` (`Accept: application/json`) through ``send(_:)``, the answer decoded as `T`.
    /// `what` names the call in messages ("Yandex.Disk answered the flat list of audio files of remote 'r'").
    /// Errors: those of ``send(_:)``, and an answer that is not `T` → ``APIClient/undecodable(_:response:what:)``.
    public func getJSON<T: Decodable>(_ type: T.Type = T.self, from url: URL, what: String) async throws -> T {
        let response = try await send(HTTPRequest(url: url, headers: ["Accept": "application/json"]))
        return try Self.decode(type, from: response, what: what)
    }

    /// `POST url` with a JSON `body`, the answer decoded as `T`; errors as for ``getJSON(_:from:what:)``.
    public func postJSON<T: Decodable>(_ type: T.Type = T.self, to url: URL, body: Data, what: String) async throws -> T {
        let request = HTTPRequest(method: "POST", url: url, headers: ["Content-Type": "application/json"],
                                  body: body)
        return try Self.decode(type, from: try await send(request), what: what)
    }

    /// `response.body` decoded as `T`, or ``undecodable(_:response:what:)``.
    public static func decode<T: Decodable>(_ type: T.Type = T.self, from response: HTTPResponse, what: String) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: response.body)
        } catch {
            throw undecodable(error, response: response, what: what)
        }
    }

    /// The one wording of an answer that is not the documented JSON: `.invalidResponse` naming the call, the URL
    /// without its query, where decoding failed (`bad value at items.0.size`, `not JSON`) and what to check; the
    /// decoding error is the cause.
    public static func undecodable(_ error: any Error, response: HTTPResponse, what: String) -> ProviderError {
        if response.head.isHTMLPage {
            return ProviderError(.invalidResponse, "\(what): \(redactedURL(response.head.url)) answered an HTML page, not the documented JSON: "
                + "\(HTTPResponseHead.strangerAdvice); else check api_url", status: response.status, cause: error)
        }
        return ProviderError(.invalidResponse,
                             "\(what): \(redactedURL(response.head.url)) answered a body that is not the documented JSON (\(describe(error))); check api_url, and report it if it persists",
                             status: response.status, cause: error)
    }

    /// Where a `DecodingError` failed, without echoing the body.
    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c), DecodingError.keyNotFound(_, let c),
             DecodingError.dataCorrupted(let c):
            let path = c.codingPath.map(\.stringValue).joined(separator: ".")
            if case DecodingError.keyNotFound(let key, _) = error { return "missing \(path.isEmpty ? "" : path + ".")\(key.stringValue)" }
            return path.isEmpty ? "not JSON" : "bad value at \(path)"
        default:
            return "unreadable"
        }
    }
}

/// A provider whose downloads may carry its API token (Dropbox, Drive, Yandex, OneDrive's `/content` fallback): the
/// refused-link re-resolution is the kit's, written once.
public protocol TokenDownloadProvider: Provider {
    /// The client whose token the download requests carry.
    var apiClient: APIClient { get }
}

extension TokenDownloadProvider {
    /// After the content host refused `rejected` with `status`: on 401 the token is refreshed when `rejected`
    /// carried the current one (one that another caller already replaced is not refreshed again); then the
    /// download is resolved afresh (a new link where the provider hands out links).
    public func resolveDownload(for file: RemoteFile, rejected: DownloadRequest, status: Int) async throws -> DownloadRequest {
        if status == 401 { try await apiClient.refreshToken(carriedBy: rejected.headers) }
        return try await resolveDownload(for: file)
    }
}
