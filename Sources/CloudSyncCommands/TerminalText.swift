/// Text from the cloud (remote names, server messages) made safe for a terminal: human output shows control
/// characters as visible escapes, so a name cannot colour the screen, set the window title, move the cursor
/// or forge a line (`\r`, `\n`). `--json`, m3u playlists, HTML pages and local file names are not changed.
enum TerminalText {
    /// `text` with C0 and C1 controls and DEL as `\n`, `\r`, `\t` or `\xHH`, and the Unicode line separators
    /// and bidirectional overrides (which reorder what follows them) as `\u{HHHH}`. Pure.
    static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value <= 0xFF: out += "\\x" + hex(scalar.value, digits: 2)
            default: out += "\\u{" + hex(scalar.value, digits: 4) + "}"
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00 ... 0x1F, 0x7F ... 0x9F: true
        case 0x2028, 0x2029, 0x202A ... 0x202E, 0x2066 ... 0x2069: true
        default: false
        }
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
