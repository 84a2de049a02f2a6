import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// Href resolution, done by hand (encoding is the kit's `PercentEncoding`): servers encode different characters (Apache keeps
/// `+&'` literal and writes lowercase hex, nginx keeps `[ ]` literal, sabre encodes `+&[]'`), and
/// Foundation's `URL(string:)` re-encodes hrefs with raw `[`/`]` so that `.path` is no longer decoded.
/// Everything works on UTF-8 bytes: a listing runs these once or twice per file (20,000 in one answer).
enum WebDAVPath {
    /// Decoded segments of a percent-encoded path: empty segments (`//`, leading and trailing `/`) and `.`
    /// are dropped, `..` removes the previous segment (RFC 3986 §5.2.4, applied to the encoded form).
    /// Nil when a segment is not valid percent-encoded UTF-8 or decodes to something that cannot be a name
    /// (`/`, NUL, `.` or `..` spelled with escapes).
    static func decodeSegments(ofEncodedPath path: Substring) -> [String]? {
        var result: [String] = []
        for raw in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true) {
            if raw.elementsEqual(".".utf8) { continue }
            if raw.elementsEqual("..".utf8) {
                if result.isEmpty { return nil }
                result.removeLast()
                continue
            }
            // Byte comparisons: `String.contains(_: String)` goes through Foundation's string search.
            guard let decoded = PercentEncoding.decode(Substring(raw)), !decoded.isEmpty, decoded != ".", decoded != "..",
                  !decoded.utf8.contains(where: { $0 == UInt8(ascii: "/") || $0 == 0 }) else { return nil }
            result.append(decoded)
        }
        return result
    }

    /// The decoded path segments `href` names, resolved against `requestPath` (the percent-encoded path of the
    /// URL the PROPFIND went to). `href` may be a full URL (`https://host/a/b`, IIS style; its host is not
    /// compared because the href is only used to name an entry, never fetched), an absolute path or a
    /// relative reference. Query and fragment are cut. Nil when it cannot be decoded.
    static func resolve(href: String, requestPath: String) -> [String]? {
        var ref = Substring(ASCII.trimmed(href))
        if let cut = ref.utf8.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) { ref = ref[..<cut] }
        if let colon = ref.utf8.firstIndex(of: UInt8(ascii: ":")), ref.utf8[colon...].starts(with: "://".utf8),
           ref.startIndex < colon, ref[..<colon].allSatisfy({ $0.isLetter || $0 == "+" || $0 == "-" || $0 == "." }) {
            let afterScheme = ref[ref.utf8.index(colon, offsetBy: 3)...]
            ref = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        } else if ref.hasPrefix("//") {
            let afterSlashes = ref.dropFirst(2)
            ref = afterSlashes.firstIndex(of: "/").map { afterSlashes[$0...] } ?? "/"
        }
        if ref.hasPrefix("/") { return decodeSegments(ofEncodedPath: ref) }
        // Relative reference: merge with the request path's directory (RFC 3986 §5.2.3).
        let base = requestPath.hasSuffix("/") ? Substring(requestPath) : requestPath[..<(requestPath.lastIndex(of: "/").map { requestPath.index(after: $0) } ?? requestPath.startIndex)]
        return decodeSegments(ofEncodedPath: Substring(base + ref))
    }
}
