import CloudSyncCore
import Foundation

/// Track URLs (encoded with ``PercentEncoding``) and the rules that keep hostile paths out. Tracks are looked up in the
/// index by remote and path; no file path is ever built from a URL, but traversal-looking paths are refused
/// before the lookup anyway.
public enum TrackPaths {
    /// Longest decoded remote path accepted (bytes).
    static let maxPathBytes = 4096

    /// `/tracks/<remote>/<path>` for an indexed track; the remote name is one encoded segment (a `/` in it
    /// becomes `%2F`), the path keeps its `/` separators.
    public static func urlPath(remote: String, path: String) -> String {
        "/tracks/" + PercentEncoding.encode(remote) + "/" + PercentEncoding.encode(path, .path)
    }

    /// What a `/tracks/...` target names.
    enum Parsed: Equatable {
        case track(remote: String, path: String)
        /// 400: a malformed escape.
        case malformed
        /// 404 without touching the index: traversal, NUL, control characters, over-long, empty segments.
        case refused
    }

    /// Parses the encoded path after `/tracks/`. A remote path with a `\` is allowed (it is only a lookup key),
    /// but `.` and `..` segments are refused whether separated by `/` or `\`.
    static func parse(afterPrefix encoded: Substring) -> Parsed {
        guard let slash = encoded.firstIndex(of: "/") else { return .refused }
        guard let remote = PercentEncoding.decode(encoded[..<slash]),
              let path = PercentEncoding.decode(encoded[encoded.index(after: slash)...]) else {
            return .malformed
        }
        if remote.isEmpty || path.isEmpty || path.utf8.count > maxPathBytes || remote.utf8.count > 255 { return .refused }
        for text in [remote, path] where text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return .refused
        }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        if segments.contains(where: \.isEmpty) { return .refused }
        for segment in path.split(whereSeparator: { $0 == "/" || $0 == "\\" }) where segment == "." || segment == ".." {
            return .refused
        }
        if remote == "." || remote == ".." || remote.contains("\\") { return .refused }
        return .track(remote: remote, path: path)
    }

    /// The query's parameters, decoded (`+` as space); malformed pairs are skipped.
    static func queryItems(_ query: Substring) -> [(String, String)] {
        query.split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            // A query is a form: `+` is a space (a literal `+` comes as `%2B`).
            guard let name = PercentEncoding.decode(parts[0].replacing("+", with: " ")) else { return nil }
            let value = parts.count > 1 ? PercentEncoding.decode(parts[1].replacing("+", with: " ")) : ""
            return value.map { (name, $0) }
        }
    }
}

/// Content-Type and validators of tracks.
enum TrackMetadata {
    static let types: [String: String] = [
        "mp3": "audio/mpeg", "flac": "audio/flac", "m4a": "audio/mp4", "alac": "audio/mp4", "aac": "audio/aac",
        "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/ogg", "wav": "audio/wav", "aiff": "audio/aiff",
        "aif": "audio/aiff", "ape": "audio/x-ape", "wv": "audio/x-wavpack", "wma": "audio/x-ms-wma",
        "mka": "audio/x-matroska", "dsf": "audio/x-dsf", "dff": "audio/x-dff", "mpc": "audio/x-musepack",
    ]

    /// The remote's MIME type when it names an audio type, else one from the extension, else the remote's, else
    /// `application/octet-stream`.
    static func contentType(for file: RemoteFile) -> String {
        if let mime = file.mimeType, mime.lowercased().hasPrefix("audio/"), isSafeHeaderValue(mime) { return mime }
        let ext = extensionOf(file.path)
        if let known = types[ext] { return known }
        if let mime = file.mimeType, !mime.isEmpty, isSafeHeaderValue(mime) { return mime }
        return "application/octet-stream"
    }

    /// The lowercased extension of the last path component ("" without one), read byte-wise: listings call this
    /// for every file.
    static func extensionOf(_ path: String) -> String {
        let bytes = path.utf8
        let leafStart = bytes.lastIndex(of: UInt8(ascii: "/")).map { bytes.index(after: $0) } ?? bytes.startIndex
        guard let dot = bytes[leafStart...].lastIndex(of: UInt8(ascii: ".")), dot != leafStart else { return "" }
        return String(decoding: bytes[bytes.index(after: dot)...], as: UTF8.self).lowercased()
    }

    /// A strong ETag from the fingerprint (size, modified seconds, revision): changes whenever cached bytes would
    /// be dropped, and never reveals the revision itself.
    static func etag(for file: RemoteFile) -> String {
        let f = file.fingerprint
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "\(f.size)\u{0}\(f.modified)\u{0}\(f.revision)".utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return "\"cs-\(String(f.size, radix: 16))-\(String(hash, radix: 16))\""
    }

    /// IMF-fixdate (RFC 9110 §5.6.7), e.g. `Tue, 14 Nov 2023 22:13:20 GMT`. Dates outside years 0–9999 are
    /// clamped into them (a hostile listing may hold any date).
    static func httpDate(_ date: Date) -> String { HTTPDate.format(date) }

    /// RFC 3339 in UTC, e.g. `2023-11-14T22:13:20Z` (WebDAV's `creationdate`).
    static func iso8601(_ date: Date) -> String { RFC3339.format(date) }

    /// Whether an `If-Range` value still names this version: the strong ETag, or exactly the Last-Modified date.
    static func ifRangeMatches(_ value: String, file: RemoteFile) -> Bool {
        EntityTag(parsing: etag(for: file)).map { EntityTag.ifRangeMatches(value, current: $0, lastModified: file.modified) } ?? false
    }

    static func isSafeHeaderValue(_ s: String) -> Bool {
        s.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
    }
}
