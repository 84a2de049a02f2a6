import CloudSyncCore

/// The live progress area of `pull` on a terminal, as lines no wider than the terminal: a status line (cut at
/// its end) and one line per active file (its name shortened in the middle, so the start of the folder and
/// the end of the file name stay visible). Pure: snapshot-tested at several widths.
struct ProgressFrame: Equatable {
    struct File: Equatable {
        var name: String
        var size: Int64
        var done: Int64
    }

    var finished: Int
    var total: Int
    var doneBytes: Int64
    var totalBytes: Int64
    /// Bytes per second so far.
    var speed: Double
    /// Files being fetched, shown in this order (at most `maxFiles`).
    var files: [File]

    static let maxFiles = 8

    /// The frame's lines for a terminal `width` columns wide (a line never fills the last column, where some
    /// terminals wrap).
    func lines(width: Int) -> [String] {
        let room = max(1, width - 1)
        let remaining = max(0, totalBytes - doneBytes)
        let eta = speed > 0 ? formatDuration(Double(remaining) / speed) : "--:--"
        let status = "[\(finished)/\(total)] \(ByteSize.format(doneBytes)) / \(ByteSize.format(totalBytes))  "
            + "\(ByteSize.format(Int64(min(speed, 1e18))))/s  ETA \(eta)"
        var out = [DisplayWidth.cut(status, to: room)]
        for file in files.prefix(Self.maxFiles) {
            let pct = file.size > 0 ? Int(Double(min(file.done, file.size)) * 100 / Double(file.size)) : 100
            let lead = "  \(String(pct).leftPad(3))%  "
            let nameRoom = room - DisplayWidth.of(lead)
            out.append(nameRoom >= 3 ? lead + DisplayWidth.shorten(TerminalText.escape(file.name), to: nameRoom)
                                     : DisplayWidth.cut(lead, to: room))
        }
        if files.count > Self.maxFiles { out.append(DisplayWidth.cut("  … and \(files.count - Self.maxFiles) more", to: room)) }
        return out
    }
}

/// Columns a string takes on a terminal: wide East Asian characters and emoji take 2, combining marks 0.
enum DisplayWidth {
    static func of(_ text: String) -> Int { text.unicodeScalars.reduce(0) { $0 + of($1) } }

    static func of(_ scalar: Unicode.Scalar) -> Int {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        let v = scalar.value
        if (0x1100 ... 0x115F).contains(v) || (0x2E80 ... 0xA4CF).contains(v) || (0xAC00 ... 0xD7A3).contains(v)
            || (0xF900 ... 0xFAFF).contains(v) || (0xFE30 ... 0xFE4F).contains(v) || (0xFF00 ... 0xFF60).contains(v)
            || (0xFFE0 ... 0xFFE6).contains(v) || (0x1F300 ... 0x1FAFF).contains(v) || (0x20000 ... 0x3FFFD).contains(v) {
            return 2
        }
        return 1
    }

    /// `text` cut at its end to at most `width` columns, with `…` where it was cut.
    static func cut(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        return prefix(text, width - 1) + "…"
    }

    /// `text` shortened in the middle to at most `width` columns: its start and its end, joined by `…`.
    static func shorten(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        guard width > 2 else { return cut(text, to: width) }
        let tailWidth = (width - 1) / 2
        let head = prefix(text, width - 1 - tailWidth)
        return head + "…" + suffix(text, width - 1 - of(head))
    }

    /// The longest start of `text` (whole characters) at most `width` columns wide.
    private static func prefix(_ text: String, _ width: Int) -> String {
        var out = "", used = 0
        for character in text {
            let w = of(String(character))
            if used + w > width { break }
            out.append(character)
            used += w
        }
        return out
    }

    /// The longest end of `text` (whole characters) at most `width` columns wide.
    private static func suffix(_ text: String, _ width: Int) -> String {
        var out: [Character] = [], used = 0
        for character in text.reversed() {
            let w = of(String(character))
            if used + w > width { break }
            out.append(character)
            used += w
        }
        return String(out.reversed())
    }
}
