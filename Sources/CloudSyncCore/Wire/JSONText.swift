/// JSON text written by hand (RFC 8259) where Foundation's encoders cost too much per value: `ls --json` over
/// 100,000 rows, and a pull's record of every analysed track's tags.
public enum JSONText {
    /// `text` as a JSON string literal: quote, backslash, control characters and DEL escaped, the rest as it is.
    /// Every escape it writes is also one of TOML's, so the literal is a TOML basic string too (`config show`).
    public static func string(_ text: String) -> String {
        var out = "\""
        out.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `value` as a JSON number (the shortest text that reads back as the same `Double`), or `null` when it is
    /// not finite (JSON has no infinity or NaN).
    public static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        return value.description
    }
}
