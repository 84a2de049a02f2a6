import CloudSyncCore
import Foundation

/// Percent-encoding and href resolution, done by hand: servers encode different characters (Apache keeps
/// `+&'` literal and writes lowercase hex, nginx keeps `[ ]` literal, sabre encodes `+&[]'`), and
/// Foundation's `URL(string:)` re-encodes hrefs with raw `[`/`]` so that `.path` is no longer decoded.
enum WebDAVPath {
    private static let unreserved: Set<UInt8> = Set(
        Array(UInt8(ascii: "A")...UInt8(ascii: "Z")) + Array(UInt8(ascii: "a")...UInt8(ascii: "z"))
            + Array(UInt8(ascii: "0")...UInt8(ascii: "9")) + [UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~")])

    /// `segment` with every byte of its UTF-8 form except `A-Za-z0-9-._~` written as `%XX` (uppercase hex).
    static func encodeSegment(_ segment: String) -> String {
        var out = ""
        out.reserveCapacity(segment.utf8.count)
        let hex = Array("0123456789ABCDEF")
        for byte in segment.utf8 {
            if unreserved.contains(byte) {
                out.append(Character(Unicode.Scalar(byte)))
            } else {
                out.append("%")
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }

    /// Decoded segments of a percent-encoded path: empty segments (`//`, leading and trailing `/`) and `.`
    /// are dropped, `..` removes the previous segment (RFC 3986 §5.2.4, applied to the encoded form).
    /// Nil when a segment is not valid percent-encoded UTF-8 or decodes to something that cannot be a name
    /// (`/`, NUL, `.` or `..` spelled with escapes).
    static func decodeSegments(ofEncodedPath path: Substring) -> [String]? {
        var result: [String] = []
        for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
            if raw == "." { continue }
            if raw == ".." {
                if result.isEmpty { return nil }
                result.removeLast()
                continue
            }
            guard let decoded = percentDecode(raw), !decoded.isEmpty, decoded != ".", decoded != "..",
                  !decoded.contains("/"), !decoded.contains("\0") else { return nil }
            result.append(decoded)
        }
        return result
    }

    /// Decodes `%XX` escapes; a `+` stays a `+` (paths are not forms). Nil on a bad escape or invalid UTF-8.
    static func percentDecode(_ text: Substring) -> String? {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var it = Array(text.utf8)[...]
        while let byte = it.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard let hi = it.popFirst().flatMap(hexValue), let lo = it.popFirst().flatMap(hexValue) else { return nil }
                bytes.append(hi << 4 | lo)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The decoded path segments `href` names, resolved against `requestPath` (the percent-encoded path of the
    /// URL the PROPFIND went to). `href` may be a full URL (`https://host/a/b`, IIS style; its host is not
    /// compared because the href is only used to name an entry, never fetched), an absolute path or a
    /// relative reference. Query and fragment are cut. Nil when it cannot be decoded.
    static func resolve(href: String, requestPath: String) -> [String]? {
        var ref = Substring(ASCII.trimmed(href))
        if let cut = ref.firstIndex(where: { $0 == "?" || $0 == "#" }) { ref = ref[..<cut] }
        if let schemeEnd = ref.range(of: "://"), ref[..<schemeEnd.lowerBound].allSatisfy({ $0.isLetter || $0 == "+" || $0 == "-" || $0 == "." }),
           !ref[..<schemeEnd.lowerBound].isEmpty {
            let afterScheme = ref[schemeEnd.upperBound...]
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
