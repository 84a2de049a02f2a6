import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// Google Drive API v3 wire types and request helpers (https://developers.google.com/drive/api/reference/rest/v3).
enum DriveAPI {
    static let folderMimeType = "application/vnd.google-apps.folder"
    static let shortcutMimeType = "application/vnd.google-apps.shortcut"
    static let nativePrefix = "application/vnd.google-apps."

    /// The `files(...)` part of every `fields` we send: what a `RemoteFile` and the folder tree need.
    static let fileFields = "id,name,parents,mimeType,size,md5Checksum,sha256Checksum,modifiedTime,headRevisionId,trashed"
    static let listFields = "nextPageToken,files(\(fileFields))"
    static let changesFields = "nextPageToken,newStartPageToken,changes(fileId,removed,file(\(fileFields)))"

    /// A `File` resource, only the fields we ask for. `size` is an int64 sent as a JSON string.
    struct File: Decodable, Sendable {
        var id: String
        var name: String?
        var parents: [String]?
        var mimeType: String?
        var size: Int64?
        var md5Checksum: String?
        var sha256Checksum: String?
        var modifiedTime: String?
        var headRevisionId: String?
        var trashed: Bool?

        enum CodingKeys: String, CodingKey {
            case id, name, parents, mimeType, size, md5Checksum, sha256Checksum, modifiedTime, headRevisionId, trashed
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            name = try c.decodeIfPresent(String.self, forKey: .name)
            parents = try c.decodeIfPresent([String].self, forKey: .parents)
            mimeType = try c.decodeIfPresent(String.self, forKey: .mimeType)
            // Documented as a string ("int64 format"); accept a bare number too.
            if let text = try? c.decodeIfPresent(String.self, forKey: .size) {
                guard let value = Int64(text) else {
                    throw DecodingError.dataCorruptedError(forKey: .size, in: c, debugDescription: "size '\(text)' is not an int64")
                }
                size = value
            } else {
                size = try c.decodeIfPresent(Int64.self, forKey: .size)
            }
            md5Checksum = try c.decodeIfPresent(String.self, forKey: .md5Checksum)
            sha256Checksum = try c.decodeIfPresent(String.self, forKey: .sha256Checksum)
            modifiedTime = try c.decodeIfPresent(String.self, forKey: .modifiedTime)
            headRevisionId = try c.decodeIfPresent(String.self, forKey: .headRevisionId)
            trashed = try c.decodeIfPresent(Bool.self, forKey: .trashed)
        }

        var isFolder: Bool { mimeType == DriveAPI.folderMimeType }
        /// Google Docs, Sheets, shortcuts, ...: no bytes to download with `alt=media`.
        var isGoogleNative: Bool { (mimeType ?? "").hasPrefix(DriveAPI.nativePrefix) && !isFolder }
    }

    struct FileList: Decodable, Sendable {
        var nextPageToken: String?
        var files: [File]?
    }

    struct Change: Decodable, Sendable {
        var fileId: String?
        var removed: Bool?
        var file: File?
    }

    struct ChangeList: Decodable, Sendable {
        var nextPageToken: String?
        var newStartPageToken: String?
        var changes: [Change]?
    }

    struct StartPageToken: Decodable, Sendable {
        var startPageToken: String
    }

    /// `{"error": {"code", "message", "errors": [{"domain", "reason", "message", "location"?, "locationType"?}]}}`
    struct ErrorBody: Decodable, Sendable {
        struct Inner: Decodable, Sendable {
            struct Item: Decodable, Sendable {
                var domain: String?
                var reason: String?
                var message: String?
                var location: String?
                var locationType: String?
            }

            var code: Int?
            var message: String?
            var errors: [Item]?
            var status: String?
        }

        var error: Inner
    }

    /// A string literal for `q`: in single quotes, with `\` and `'` escaped by a backslash.
    static func literal(_ value: String) -> String {
        "'" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    // MARK: Errors

    /// Maps a Drive answer to an error (nil = success): the kit's ``StatusTable``, refined by `error.errors[0]`
    /// per the handle-errors guide and rclone `shouldRetry`:
    /// - 401 → `.tokenExpired` (Drive does not tell expired from revoked: the client refreshes once);
    /// - 403 `userRateLimitExceeded`/`rateLimitExceeded` → `.rateLimited`, as 429;
    /// - 403 `downloadQuotaExceeded`/`dailyLimitExceeded`/`quotaExceeded` → `.quotaExceeded` (not retried);
    /// - 403 `cannotDownloadAbusiveFile` → `.forbidden` naming the `acknowledge_abuse` option;
    /// - 400 on `pageToken` → `.cursorReset`;
    /// - 503 → `.transient`: Drive's `backendError`, retried by one request, not a pause of the whole remote.
    static func classify(_ response: HTTPResponse, remoteName: String) -> ProviderError? {
        let status = response.status
        let body = try? JSONDecoder().decode(ErrorBody.self, from: response.body)
        let item = body?.error.errors?.first
        let reason = item?.reason ?? ""
        let answer = ErrorAnswer(provider: "Drive", remote: remoteName, call: "Drive \(redactedURL(response.head.url))",
                                 status: status, headers: response.headers,
                                 detail: (reason.isEmpty ? "" : " \(reason)") + ((item?.message ?? body?.error.message).map { " (\($0))" } ?? ""))
        switch (status, reason) {
        case (401, _):
            return answer.error(.tokenExpired)
        case (403, "userRateLimitExceeded"), (403, "rateLimitExceeded"):
            return answer.error(.rateLimited)
        case (403, "downloadQuotaExceeded"), (403, "dailyLimitExceeded"), (403, "quotaExceeded"):
            return answer.error(.quotaExceeded, "Drive's download quota for this file or account is used up; try again in 24 hours")
        case (403, "cannotDownloadAbusiveFile"):
            return answer.error(.forbidden, "Drive flagged this file as malware or spam; set acknowledge_abuse = true for remote '\(remoteName)' to download it anyway")
        case (400, _) where item?.location == "pageToken":
            return answer.error(.cursorReset)
        case (503, _):
            return answer.error(.transient)
        default:
            return answer.standard
        }
    }
}
