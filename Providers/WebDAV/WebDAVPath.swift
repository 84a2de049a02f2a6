import CloudSyncCore
import Foundation

/// Percent-encoding and href resolution, done by hand: servers encode different characters (Apache keeps
/// `+&'` literal and writes lowercase hex, nginx keeps `[ ]` literal, sabre encodes `+&[]'`), and
/// Foundation's `URL(string:)` re-encodes hrefs with raw `[`/`]` so that `.path` is no longer decoded.
/// Everything works on UTF-8 bytes: a listing runs these once or twice per file (20,000 in one answer).
enum WebDAVPath {
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `segment` with every byte of its UTF-8 form except `A-Za-z0-9-._~` written as `%XX` (uppercase hex).
    static func encodeSegment(_ segment: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(segment.utf8.count)
        for byte in segment.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
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
        let utf8 = Array(text.utf8)
        guard utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "%") {
                guard i + 2 < utf8.count, let hi = hexValue(utf8[i + 1]), let lo = hexValue(utf8[i + 2]) else { return nil }
                bytes.append(hi << 4 | lo)
                i += 3
            } else {
                bytes.append(utf8[i])
                i += 1
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
