import Foundation

/// Dropbox API v2 wire types (spec `files.stone`, dossier §1) and the header-safe JSON of `Dropbox-API-Arg`.
enum DropboxAPI {
    /// `POST /2/files/list_folder` body. `path` is "" for the account root, never "/".
    struct ListFolderArg: Encodable {
        var path: String
        var recursive: Bool
        var limit: Int
        var include_non_downloadable_files: Bool
    }

    /// `POST /2/files/list_folder/continue` body.
    struct ContinueArg: Encodable {
        var cursor: String
    }

    /// `ListFolderResult`: a page of entries; call `continue` with `cursor` while `has_more`.
    struct ListFolderResult: Decodable {
        var entries: [Metadata]
        var cursor: String
        var has_more: Bool
    }

    /// `FileMetadata` (the fields cloudsync reads).
    struct FileMetadata: Decodable {
        var name: String
        var path_lower: String?
        var path_display: String?
        var id: String
        var client_modified: String?
        var server_modified: String?
        var rev: String
        var size: Int64
        var is_downloadable: Bool?
        var content_hash: String?
    }

    /// `FolderMetadata` and `DeletedMetadata` share these fields.
    struct NamedMetadata: Decodable {
        var name: String
        var path_lower: String?
        var path_display: String?
    }

    /// A listing entry: a union tagged by `.tag`. Unknown tags are kept so they can be skipped, not fail.
    enum Metadata: Decodable {
        case file(FileMetadata)
        case folder(NamedMetadata)
        case deleted(NamedMetadata)
        case other(tag: String)

        private enum Keys: String, CodingKey { case tag = ".tag" }

        init(from decoder: any Decoder) throws {
            let tag = try decoder.container(keyedBy: Keys.self).decode(String.self, forKey: .tag)
            switch tag {
            case "file": self = .file(try FileMetadata(from: decoder))
            case "folder": self = .folder(try NamedMetadata(from: decoder))
            case "deleted": self = .deleted(try NamedMetadata(from: decoder))
            default: self = .other(tag: tag)
            }
        }
    }

    /// A JSON request body; slashes are not escaped (Dropbox accepts both, this reads better in logs of fakes).
    static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    /// `{"path":"…"}` as header-safe JSON for `Dropbox-API-Arg`.
    static func pathArg(_ path: String) -> String {
        "{\"path\":" + headerSafeJSONString(path) + "}"
    }

    /// `text` as a JSON string literal (quotes included) that is pure printable ASCII, as Dropbox requires in
    /// `Dropbox-API-Arg` (https://www.dropbox.com/developers/reference/json-encoding): `"` and `\` are
    /// backslash-escaped, control characters, 0x7F and every non-ASCII character become `\uXXXX` (lowercase
    /// hex, UTF-16 surrogate pairs above U+FFFF).
    static func headerSafeJSONString(_ text: String) -> String {
        let hexDigits = Array("0123456789abcdef")
        func unicodeEscape(_ unit: UInt16) -> String {
            var s = "\\u"
            for shift in stride(from: 12, through: 0, by: -4) { s.append(hexDigits[Int((unit >> UInt16(shift)) & 0xf)]) }
            return s
        }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            case 0x20...0x7E: out.unicodeScalars.append(scalar)
            default:
                for unit in String(scalar).utf16 { out += unicodeEscape(unit) }
            }
        }
        return out + "\""
    }

    /// A parsed error body: `{"error_summary": "path/not_found/..", "error": {".tag": "path", "path": {".tag": "not_found"}}}`.
    struct ErrorBody {
        /// `error_summary`, e.g. "path/not_found/..." (for people; may change).
        var summary: String?
        /// The chain of `.tag`s from the outside in, e.g. ["path", "not_found"].
        var tags: [String]
        /// `error.retry_after` of a 429 `RateLimitError`.
        var retryAfter: TimeInterval?

        /// Nil when `body` is not a JSON object (400s and some 429s are plain text).
        init?(_ body: Data) {
            guard let json = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else { return nil }
            summary = json["error_summary"] as? String
            var tags: [String] = []
            var node = json["error"] as? [String: Any]
            while let current = node, let tag = current[".tag"] as? String {
                tags.append(tag)
                node = current[tag] as? [String: Any]
            }
            if let error = json["error"] as? [String: Any] {
                if let reason = (error["reason"] as? [String: Any])?[".tag"] as? String, tags.isEmpty { tags = [reason] }
                retryAfter = (error["retry_after"] as? NSNumber)?.doubleValue
            }
            self.tags = tags
        }

        /// Whether `tag` names this error, in the tag chain or in `error_summary`.
        func has(_ tag: String) -> Bool {
            tags.contains(tag) || (summary?.split(separator: "/").contains { $0 == tag } ?? false)
        }
    }
}
