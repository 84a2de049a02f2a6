/// Percent-encoding per RFC 3986 component, on UTF-8 bytes, uppercase hex. The one encoder of the project: every
/// provider's URLs and `serve`'s answers.
public enum PercentEncoding {
    public enum Component: Sendable {
        /// A path of segments (`serve`'s track URLs): unreserved characters and `/` stay, everything else is encoded.
        case path
        /// A query name or value (§3.4), or a path segment that must survive servers which decode differently
        /// (WebDAV: Apache, nginx and sabre each keep other characters literal): only unreserved `A-Za-z0-9-._~`
        /// stay, so `+ & = ; ' / ? # %` and non-ASCII mean themselves everywhere (`+` is never a space).
        case unreserved
        /// One path segment (§3.3 `pchar`) of an id-based API path: unreserved, sub-delims but `;`, `:` and `@`
        /// stay (Graph item ids keep their `!`); `/ ? # % ;` and everything else are encoded.
        case pathSegment
    }

    /// `text` with every byte its component does not allow written as `%XX`.
    public static func encode(_ text: some StringProtocol, _ component: Component = .unreserved) -> String {
        var text = String(text)
        return text.withUTF8 { encode($0, component) }
    }

    /// ``encode(_:_:)`` of a `String` without generics (a WebDAV listing, every download URL and every serve
    /// answer encode each segment of a path).
    public static func encode(_ text: String, _ component: Component = .unreserved) -> String {
        var text = text
        return text.withUTF8 { encode($0, component) }
    }

    private static func encode(_ bytes: UnsafeBufferPointer<UInt8>, _ component: Component) -> String {
        var escapes = 0
        for byte in bytes where !allows(byte, component) { escapes += 1 }
        if escapes == 0 { return String(decoding: bytes, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: bytes.count + 2 * escapes) { out in
            var i = 0
            for byte in bytes {
                if allows(byte, component) {
                    out[i] = byte
                    i += 1
                } else {
                    out[i] = UInt8(ascii: "%")
                    out[i + 1] = hexDigit(byte >> 4)
                    out[i + 2] = hexDigit(byte & 0x0F)
                    i += 3
                }
            }
            return i
        }
    }

    /// `application/x-www-form-urlencoded` (WHATWG URL §5.2) of `fields`: ASCII letters, digits and `*-._` as
    /// is, space as `+`, every other byte `%XX`. Token requests and OAuth forms.
    public static func form(_ fields: [(String, String)]) -> String {
        func enc(_ s: String) -> String {
            var out: [UInt8] = []
            for byte in s.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                     UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                    out.append(byte)
                case UInt8(ascii: " "):
                    out.append(UInt8(ascii: "+"))
                default:
                    out.append(UInt8(ascii: "%"))
                    out.append(hexDigit(byte >> 4))
                    out.append(hexDigit(byte & 0x0F))
                }
            }
            return String(decoding: out, as: UTF8.self)
        }
        return fields.map { enc($0.0) + "=" + enc($0.1) }.joined(separator: "&")
    }

    /// `text` with every `%XX` replaced by its byte, or nil when an escape is malformed or the result is not UTF-8.
    public static func decode(_ text: some StringProtocol) -> String? { decode(Substring(text)) }

    /// ``decode(_:)`` without generics (a WebDAV listing decodes every href's segments).
    public static func decode(_ text: Substring) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var it = text.utf8.makeIterator()
        while let byte = it.next() {
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard let hi = it.next().flatMap(hexValue), let lo = it.next().flatMap(hexValue) else { return nil }
            out.append(hi << 4 | lo)
        }
        return String(validating: out, as: UTF8.self)
    }

    /// The uppercase hex digit of `nibble` (0–15), as RFC 3986 §2.1 recommends.
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    private static func allows(_ byte: UInt8, _ component: Component) -> Bool {
        if isUnreserved(byte) { return true }
        switch component {
        case .unreserved: return false
        case .path: return byte == UInt8(ascii: "/")
        case .pathSegment:
            switch byte {
            case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
                 UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: "="),
                 UInt8(ascii: ":"), UInt8(ascii: "@"): return true
            default: return false
            }
        }
    }
}
