import CloudSyncCore
import Foundation

/// Wire types and request building of the Yandex.Disk REST API v1
/// (https://yandex.com/dev/disk-api/doc/en/reference/response-objects). Only the keys cloudsync reads.
enum YandexAPI {
    /// A `Resource` (file or folder metadata). Every key is optional: `fields=` trims answers, and the API
    /// omits what a resource does not have (folders have no size or hashes).
    struct Resource: Decodable, Sendable {
        var name: String?
        /// `disk:/Music/a.mp3` (or `app:/...` for app folders).
        var path: String?
        /// `"dir"` or `"file"`.
        var type: String?
        var size: Int64?
        var md5: String?
        var sha256: String?
        /// ISO 8601 with an offset, e.g. `2014-04-21T14:57:14+04:00`.
        var modified: String?
        /// An integer in real answers; a string is accepted too.
        var revision: Revision?
        var mime_type: String?
        /// `"audio"`, `"image"`, ...
        var media_type: String?
        var resource_id: String?
        /// A folder's children (`ResourceList`), only in answers to `GET /v1/disk/resources` for a folder.
        var _embedded: ResourceList?
    }

    /// `ResourceList`: one page of a folder's children.
    struct ResourceList: Decodable, Sendable {
        var items: [Resource]?
        var limit: Int?
        var offset: Int?
        var total: Int?
    }

    /// `FilesResourceList`: one page of the flat file list. The documents give it `items`, `limit` and
    /// `offset` only — no `total` — so the end is a page shorter than the limit (a `total`, if a server sends
    /// one, is honoured too).
    struct FilesResourceList: Decodable, Sendable {
        var items: [Resource]?
        var limit: Int?
        var offset: Int?
        var total: Int?
    }

    /// `Link`: where to GET a file's bytes.
    struct Link: Decodable, Sendable {
        var href: String?
        var method: String?
        var templated: Bool?
    }

    /// The error body: `{"message": localized, "description": English, "error": "UnauthorizedError"}`.
    struct ErrorBody: Decodable, Sendable {
        var message: String?
        var description: String?
        var error: String?
    }

    /// `revision` as the API prints it (a JSON number, or a string).
    struct Revision: Decodable, Sendable {
        var text: String

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let i = try? c.decode(Int64.self) {
                text = String(i)
            } else if let d = try? c.decode(Double.self) {
                text = d.rounded() == d && abs(d) < 9e18 ? String(Int64(d)) : String(d)
            } else {
                text = try c.decode(String.self)
            }
        }
    }

    /// Resource keys read from listings (each also requested with `fields=`).
    static let itemFields = ["name", "path", "type", "size", "md5", "sha256", "modified", "revision", "mime_type",
                             "media_type", "resource_id"]

    /// `fields=` of a folder page: the folder's own `type` and `path`, its children's keys and the paging keys.
    static let folderFields: String = (["type", "path"] + itemFields.map { "_embedded.items.\($0)" }
        + ["_embedded.limit", "_embedded.offset", "_embedded.total"]).joined(separator: ",")

    /// `fields=` of a flat-list page (documented keys only: `items`, `limit`, `offset`).
    static let filesFields: String = (itemFields.map { "items.\($0)" } + ["limit", "offset"]).joined(separator: ",")

    /// `fields=` of a download link.
    static let linkFields = "href,method,templated"

    /// The root as path segments: "", "/", "disk:", "disk:/" → []; "Music", "/Music/", "disk:/Music" → ["Music"].
    static func rootSegments(_ root: String) -> [String] {
        var r = Substring(root)
        if r.hasPrefix("disk:") { r = r.dropFirst("disk:".count) }
        return r.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// The API path of a folder or file given as segments under the disk root: `disk:/a/b`.
    static func diskPath(_ segments: [String]) -> String {
        "disk:/" + segments.joined(separator: "/")
    }

    /// Segments of an API `path` (`disk:/a/b` or `/a/b`); nil for other namespaces (`app:/`, `trash:/`) and junk.
    static func segments(ofAPIPath path: String) -> [String]? {
        var p = Substring(path)
        if let colon = p.firstIndex(of: ":"), !p[..<colon].contains("/") {
            guard p[..<colon] == "disk" else { return nil }
            p = p[p.index(after: colon)...]
        }
        guard p.hasPrefix("/") else { return nil }
        return p.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }
}
