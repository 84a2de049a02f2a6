/// JSON text written by hand (RFC 8259) where Foundation's encoders cost too much per value: `ls --json` over
/// 100,000 rows, and a pull's record of every analysed track's tags. Written as UTF-8 bytes: the characters it
/// escapes are all ASCII, which never occur inside a multi-byte sequence.
public enum JSONText {
    /// `text` as a JSON string literal: quote, backslash, control characters and DEL escaped, the rest as it is.
    /// Every escape it writes is also one of TOML's, so the literal is a TOML basic string too (`config show`).
    public static func string(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 2)
        append(string: text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends ``string(_:)``'s literal to `out`.
    public static func append(string text: String, to out: inout [UInt8]) {
        out.append(quote)
        for byte in text.utf8 {
            switch byte {
            case quote, backslash: out.append(backslash); out.append(byte)
            case 0x0A: out.append(backslash); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(backslash); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(backslash); out.append(UInt8(ascii: "t"))
            case 0..<0x20, 0x7F:
                out.append(contentsOf: [backslash, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(quote)
    }

    /// `value` as a JSON number (the shortest text that reads back as the same `Double`), or `null` when it is
    /// not finite (JSON has no infinity or NaN).
    public static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        return value.description
    }

    /// An object written member by member, in the order they are added; nil values are left out.
    public struct Object {
        private var bytes: [UInt8] = [UInt8(ascii: "{")]

        public init() { bytes.reserveCapacity(256) }

        public mutating func add(_ key: String, _ value: String?) {
            guard let value else { return }
            self.key(key)
            JSONText.append(string: value, to: &bytes)
        }

        public mutating func add(_ key: String, _ value: Int?) {
            guard let value else { return }
            self.key(key)
            bytes.append(contentsOf: String(value).utf8)
        }

        public mutating func add(_ key: String, _ value: Double?) {
            guard let value else { return }
            self.key(key)
            bytes.append(contentsOf: JSONText.number(value).utf8)
        }

        private mutating func key(_ key: String) {
            if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
            JSONText.append(string: key, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
        }

        /// The object's text.
        public var text: String { String(decoding: bytes + [UInt8(ascii: "}")], as: UTF8.self) }
    }

    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")
    private static let hex = Array("0123456789ABCDEF".utf8)
}
