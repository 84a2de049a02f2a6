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

    /// Maps a Graph answer to an error (nil for 2xx): the kit's ``StatusTable`` (which is rclone's onedrive
    /// `shouldRetry`), refined by the Graph error docs: 401 `InvalidAuthenticationToken`, no body, or
    /// `WWW-Authenticate: … error="expired_token"|"invalid_token"` → `.tokenExpired`; 410 on the delta feed or with
    /// a `resync*` code → `.cursorReset` (cause ``ResyncRequired``); 403 names the scopes to check.
    static func classify(_ response: HTTPResponse, remoteName: String, now: Date = Date()) -> ProviderError? {
        let status = response.status
        if (200..<300).contains(status) { return nil }
        let body = ErrorBody(response.body)
        let codes = body?.codes ?? []
        let answer = ErrorAnswer(provider: "Graph", remote: remoteName, call: "OneDrive remote '\(remoteName)', \(describe(response.head.url))",
                                 status: status, headers: response.headers,
                                 detail: (body?.code.map { " \($0)" } ?? "") + (body?.message.map { ": \(ProviderError.bodyExcerpt(Data($0.utf8)) ?? "")" } ?? ""),
                                 now: now)
        switch status {
        case 401:
            let challenge = response.headers.values("WWW-Authenticate").joined(separator: ",").lowercased()
            guard codes.contains("invalidauthenticationtoken") || challenge.contains("expired_token")
                || challenge.contains("invalid_token") || body == nil else { return answer.standard }
            return answer.error(.tokenExpired)
        case 403:
            return answer.error(.forbidden, "access denied; check that the account may read this item (scopes Files.Read, Files.Read.All)")
        case 410 where response.head.url.path.contains("/delta") || codes.contains(where: { $0.hasPrefix("resync") }):
            let location = response.headers["Location"].flatMap { URL(string: $0, relativeTo: response.head.url)?.absoluteURL }
            return answer.error(.cursorReset, cause: ResyncRequired(location: location))
        default:
            return answer.standard ?? answer.error(.invalidResponse)  // a redirect the transport did not follow
        }
    }
}
