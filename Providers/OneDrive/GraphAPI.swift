import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// Microsoft Graph wire types and error mapping for OneDrive (see ../shared/providers.md §3 and docs/onedrive.md).
enum GraphAPI {
    /// driveItem properties the provider reads; asked for with `$select` on the delta feed. `root` marks the
    /// drive's top item, `fileSystemInfo` carries the client-side modification time.
    static let deltaSelect = [
        "id", "name", "size", "lastModifiedDateTime", "fileSystemInfo", "eTag", "cTag", "file", "folder", "package",
        "deleted", "root", "parentReference", "remoteItem", "malware", "audio",
    ]

    /// The instance annotation holding a pre-authenticated download URL (driveItem resource, "Instance Attributes").
    static let downloadURLAnnotation = "@microsoft.graph.downloadUrl"

    /// One page of `GET /me/drive/root/delta`: items, then either `@odata.nextLink` or `@odata.deltaLink`.
    struct DeltaPage: Decodable {
        var value: [Item]
        var nextLink: String?
        var deltaLink: String?

        enum CodingKeys: String, CodingKey {
            case value
            case nextLink = "@odata.nextLink"
            case deltaLink = "@odata.deltaLink"
        }
    }

    /// A facet whose presence is what matters (`folder`, `deleted`, `root`, `package`, `malware`, `audio`).
    struct Facet: Decodable, Sendable {}

    struct Hashes: Decodable {
        var quickXorHash: String?
        var sha1Hash: String?
        var sha256Hash: String?
    }

    struct FileFacet: Decodable {
        var mimeType: String?
        var hashes: Hashes?
    }

    struct ItemReference: Decodable {
        var id: String?
        var driveId: String?
    }

    struct FileSystemInfo: Decodable {
        var lastModifiedDateTime: String?
    }

    /// A shared item added to this drive: its content lives in `parentReference.driveId` under `id`.
    struct RemoteItem: Decodable {
        var id: String?
        var size: Int64?
        var parentReference: ItemReference?
        var file: FileFacet?
        var folder: Facet?
    }

    /// A driveItem as the delta feed and `GET /items/{id}` return it. Every field but `id` may be missing
    /// (deleted items lack `name` on Business and `size` on Personal).
    struct Item: Decodable {
        var id: String
        var name: String?
        var size: Int64?
        var lastModifiedDateTime: String?
        var fileSystemInfo: FileSystemInfo?
        var eTag: String?
        var cTag: String?
        var file: FileFacet?
        var folder: Facet?
        var package: Facet?
        var deleted: Facet?
        var root: Facet?
        var malware: Facet?
        var audio: Facet?
        var parentReference: ItemReference?
        var remoteItem: RemoteItem?
        var downloadURL: String?

        enum CodingKeys: String, CodingKey {
            case id, name, size, lastModifiedDateTime, fileSystemInfo, eTag, cTag, file, folder, package, deleted, root,
                 malware, audio, parentReference, remoteItem
            case downloadURL = "@microsoft.graph.downloadUrl"
        }
    }

    /// `410 Gone` on the delta feed: the token is too old. `location` (from the `Location` header) starts a
    /// fresh enumeration; nil means start from the root delta URL.
    struct ResyncRequired: Error, Sendable {
        var location: URL?
    }

    /// The Graph error body `{"error": {"code", "message", "innerError"|"innererror": {"code"}}}`, keys matched
    /// case-insensitively. OAuth-style `{"error": "invalid_grant"}` gives just a code.
    struct ErrorBody: Sendable, Equatable {
        var code: String?
        var message: String?
        var innerCode: String?

        /// Every code, lowercased, outermost first.
        var codes: [String] { [code, innerCode].compactMap { $0?.lowercased() } }

        init?(_ body: Data) {
            guard !body.isEmpty, let object = try? JSONSerialization.jsonObject(with: body),
                  let top = object as? [String: Any], let error = Self.value(top, "error") else { return nil }
            if let code = error as? String {
                self.code = code
                message = Self.value(top, "error_description") as? String
                return
            }
            guard let error = error as? [String: Any] else { return nil }
            code = Self.value(error, "code") as? String
            message = Self.value(error, "message") as? String
            innerCode = (Self.value(error, "innerError") as? [String: Any]).flatMap { Self.value($0, "code") as? String }
        }

        private static func value(_ object: [String: Any], _ key: String) -> Any? {
            object.first { $0.key.caseInsensitiveCompare(key) == .orderedSame }?.value
        }
    }

    /// What a Graph request did, for messages: the host and the kind of call, never the query or the delta token.
    static func describe(_ url: URL) -> String {
        let host = url.host.map { h in url.port.map { "\(h):\($0)" } ?? h } ?? "Graph"
        let path = url.path
        let what = if path.contains("/delta") { "the delta listing" }
            else if path.hasSuffix("/content") { "a download" }
            else if path.contains("/items/") { "an item lookup" }
            else { "a request" }
        return "\(what) at \(host)"
    }

    /// Maps a Graph answer to an error (nil for 2xx). Statuses and codes from the Graph error docs and rclone's
    /// onedrive `shouldRetry`: 429/503 (+Retry-After) → `.rateLimited`; 500/502/504/509/408 → `.transient`;
    /// 401 `InvalidAuthenticationToken` or `WWW-Authenticate: … error="expired_token"|"invalid_token"` →
    /// `.tokenExpired` (other 401 → `.unauthorized`); 403 → `.forbidden`; 404 → `.notFound`; 410 on the delta
    /// feed or with a `resync*` code → `.cursorReset` (cause ``ResyncRequired``); 507 → `.quotaExceeded`;
    /// other 4xx → `.invalidResponse`.
    static func classify(_ response: HTTPResponse, remoteName: String, now: Date = Date()) -> ProviderError? {
        let status = response.status
        if (200..<300).contains(status) { return nil }
        let body = ErrorBody(response.body)
        let codes = body?.codes ?? []
        let detail = (body?.code.map { " \($0)" } ?? "") + (body?.message.map { ": \(clip($0))" } ?? "")
        let what = "OneDrive remote '\(remoteName)': \(describe(response.head.url)) answered HTTP \(status)\(detail)"
        let wait = retryAfter(from: response.headers, now: now)
        switch status {
        case 401:
            let challenge = response.headers.values("WWW-Authenticate").joined(separator: ",").lowercased()
            if codes.contains("invalidauthenticationtoken") || challenge.contains("expired_token")
                || challenge.contains("invalid_token") || body == nil {
                return ProviderError(.tokenExpired, "\(what) — the access token expired; cloudsync refreshes it, and if that keeps failing run `cloudsync login \(remoteName)`", status: status)
            }
            return ProviderError(.unauthorized, "\(what) — Graph refused the credentials; run `cloudsync login \(remoteName)`", status: status)
        case 403:
            return ProviderError(.forbidden, "\(what) — access denied; check that the account may read this item (scopes Files.Read, Files.Read.All)", status: status)
        case 404:
            return ProviderError(.notFound, "\(what) — the item no longer exists; run `cloudsync pull` again to refresh the listing", status: status)
        case 410 where response.head.url.path.contains("/delta") || codes.contains(where: { $0.hasPrefix("resync") }):
            let location = response.headers["Location"].flatMap { URL(string: $0, relativeTo: response.head.url)?.absoluteURL }
            return ProviderError(.cursorReset, "\(what) — the change token is too old; cloudsync lists everything again", status: status,
                                 cause: ResyncRequired(location: location))
        case 410:
            return ProviderError(.notFound, "\(what) — the item is gone; run `cloudsync pull` again to refresh the listing", status: status)
        case 429, 503:
            return ProviderError(.rateLimited, "\(what) — Graph is throttling this account; cloudsync waits\(wait.map { " \(Int($0)) s (Retry-After)" } ?? "") and retries", status: status, retryAfter: wait)
        case 408, 500, 502, 504, 509:
            return ProviderError(.transient, "\(what) — temporary server failure; cloudsync retries with backoff", status: status, retryAfter: wait)
        case 507:
            return ProviderError(.quotaExceeded, "\(what) — the drive's quota is exhausted (quotaExceeded); free space on OneDrive", status: status)
        case 416:
            return ProviderError(.invalidResponse, "\(what) — range outside the file; its size changed, run `cloudsync pull` again", status: status)
        case 500...:
            return ProviderError(.transient, "\(what) — server error; cloudsync retries with backoff", status: status, retryAfter: wait)
        default:
            return ProviderError(.invalidResponse, "\(what) — the request was refused; check api_url and root in the config", status: status)
        }
    }

    private static func clip(_ text: String) -> String {
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return line.count > 200 ? String(line.prefix(200)) + "…" : line
    }
}
