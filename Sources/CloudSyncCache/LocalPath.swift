import Foundation

/// How remote names become names on disk under `tracks/`. Remote names are hostile: they may contain `..`,
/// NUL, control characters, backslashes, components longer than the file system allows, or differ from
/// another name only by case or Unicode normalization. Names stay as close to the remote's as safety allows
/// so a player pointed at `tracks/` shows what the user expects.
public enum LocalPath {
    /// The longest component most Linux file systems accept, in bytes.
    public static let maxComponentBytes = 255

    /// Which names the cache's file system takes. `posix`: any byte but `/` and NUL (ext4, XFS, Btrfs, tmpfs).
    /// `portable`: also none of `"*:<>?|` and no component ending in `.` or a space — FAT, exFAT, NTFS with
    /// Windows names, SMB shares, which refuse the characters (EINVAL, ENOENT or EPERM, as the driver likes) and
    /// drop the trailing ones; a cache on a USB stick or SD card. Such characters become their full-width
    /// look-alikes (`：`, `？`, `＂`, …; a trailing `.` `．`, a trailing space `␠`), as rclone encodes them.
    public enum NameRules: String, Sendable {
        case posix, portable
    }

    /// One of `"*:<>?|` (ASCII, so never part of a multi-byte character).
    static func portableRefuses(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "*"), UInt8(ascii: ":"), UInt8(ascii: "<"), UInt8(ascii: ">"),
             UInt8(ascii: "?"), UInt8(ascii: "|"):
            true
        default:
            false
        }
    }

    /// True when the file systems of ``NameRules/portable`` take `path` (a local path as the index holds it): none
    /// of `"*:<>?|`, no component ending in `.` or a space.
    public static func isPortable(_ path: String) -> Bool {
        var previous: UInt8 = 0
        for byte in path.utf8 {
            if portableRefuses(byte) { return false }
            if byte == UInt8(ascii: "/") && (previous == UInt8(ascii: ".") || previous == UInt8(ascii: " ")) { return false }
            previous = byte
        }
        return previous != UInt8(ascii: ".") && previous != UInt8(ascii: " ")
    }

    /// The full-width look-alike of a character FAT, exFAT and NTFS refuse in names, or nil.
    static func portableReplacement(_ scalar: Unicode.Scalar) -> Unicode.Scalar? {
        switch scalar {
        case "\"": "\u{FF02}"
        case "*": "\u{FF0A}"
        case ":": "\u{FF1A}"
        case "<": "\u{FF1C}"
        case ">": "\u{FF1E}"
        case "?": "\u{FF1F}"
        case "|": "\u{FF5C}"
        default: nil
        }
    }

    /// A relative, `/`-separated path that is safe to create under a directory: no component is empty,
    /// `.` or `..`; none contains `/`, NUL, a backslash or a control character; none is longer than
    /// ``maxComponentBytes`` bytes of UTF-8. Pure and stable: the same input always gives the same output.
    ///
    /// Rules, per `/`-separated component of `remotePath`:
    /// - empty components and `.` are dropped (`a//b`, `a/./b` → `a/b`);
    /// - `..` becomes `__` (never "up");
    /// - NUL, C0/C1 control characters, DEL and `\` become `_`;
    /// - a component over 255 bytes is cut on a character boundary and gets `~` + an 8-hex-digit hash of
    ///   the original component before its extension (`<prefix>~1a2b3c4d.flac`).
    /// - with `.portable` rules, also `"*:<>?|` and a component's trailing `.` or space (see ``NameRules``).
    /// A path with no component left becomes `_`. Two different inputs may map to the same output
    /// (`a/./b` and `a/b`); the index detects such collisions with ``collisionKey(_:)`` and gives the later
    /// one a ``disambiguated(_:salt:)`` name.
    public static func safeRelativePath(for remotePath: String, rules: NameRules = .posix) -> String {
        if isSafeAsItIs(remotePath, rules: rules) { return remotePath }
        return rewrittenRelativePath(for: remotePath, rules: rules)
    }

    /// What ``safeRelativePath(for:rules:)`` makes of a path that ``isSafeAsItIs(_:rules:)`` cannot pass: components
    /// split and rewritten one by one.
    static func rewrittenRelativePath(for remotePath: String, rules: NameRules = .posix) -> String {
        let parts = remotePath.split(separator: "/", omittingEmptySubsequences: true).compactMap { part -> String? in
            part == "." ? nil : safeComponent(String(part), rules: rules)
        }
        return parts.isEmpty ? "_" : parts.joined(separator: "/")
    }

    /// True when ``rewrittenRelativePath(for:)`` would give `path` back unchanged, decided in one pass over its
    /// UTF-8 bytes: not empty; no empty, `.` or `..` component (no leading, trailing or doubled `/`); no control
    /// character (C0, DEL, C1: U+0080–U+009F is `C2 80`–`C2 9F` in UTF-8), no `\`; no component over
    /// ``maxComponentBytes``. A `/` next to a non-ASCII byte is left to the rewrite: the rewrite splits on
    /// `Character`s, and a `/` followed by a combining mark (or after a prepended mark) is no separator there.
    /// The listing calls this for every file: splitting each path into `String`s was most of the index's
    /// Swift-side CPU for a listing of 2,000 files.
    static func isSafeAsItIs(_ path: String, rules: NameRules = .posix) -> Bool {
        let portable = rules == .portable
        var length = 0  // bytes of the current component
        var dots = 0  // leading dots of the current component (a component of only dots, 1 or 2, is not safe)
        var previous: UInt8 = 0
        for byte in path.utf8 {
            if portable && portableRefuses(byte) { return false }
            switch byte {
            case UInt8(ascii: "/"):
                if length == 0 || dots == length && dots <= 2 || previous >= 0x80 { return false }
                if portable && (previous == UInt8(ascii: ".") || previous == UInt8(ascii: " ")) { return false }
                length = 0
                dots = 0
            case 0 ..< 0x20, 0x7F, UInt8(ascii: "\\"):
                return false
            case 0x80 ... 0x9F where previous == 0xC2:
                return false
            default:
                if previous == UInt8(ascii: "/") && byte >= 0x80 { return false }
                if byte == UInt8(ascii: ".") && dots == length { dots += 1 }
                length += 1
                if length > maxComponentBytes { return false }
            }
            previous = byte
        }
        if portable && (previous == UInt8(ascii: ".") || previous == UInt8(ascii: " ")) { return false }
        return length > 0 && !(dots == length && dots <= 2)
    }

    /// One safe path component (see ``safeRelativePath(for:)``); a `/` inside becomes `_`.
    /// Used for remote names, the first component under `tracks/`.
    public static func safeComponent(_ name: String, rules: NameRules = .posix) -> String {
        if name.isEmpty || name == "." { return "_" }
        if name == ".." { return "__" }
        let portable = rules == .portable
        let needsWork = name.utf8.count > maxComponentBytes || name.unicodeScalars.contains { scalar in
            scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F) || scalar == "/" || scalar == "\\"
                || portable && portableReplacement(scalar) != nil
        } || portable && (name.hasSuffix(".") || name.hasSuffix(" "))
        if !needsWork { return name }
        var out = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            let v = scalar.value
            let unsafe = v < 0x20 || (v >= 0x7F && v <= 0x9F) || scalar == "/" || scalar == "\\"
            out.append(unsafe ? "_" : portable ? portableReplacement(scalar) ?? scalar : scalar)
        }
        if portable, let last = out.last, last == "." || last == " " {
            out.removeLast()
            out.append(last == "." ? "\u{FF0E}" : "\u{2420}")
        }
        let cleaned = String(out)
        guard cleaned.utf8.count > maxComponentBytes else { return cleaned }
        return withSuffix(cleaned, suffix: "~" + shortHash(name))
    }

    /// The key two local paths collide on: Unicode NFC, then case-folded. `Café` (NFC), `Café` (NFD) and
    /// `CAFÉ` share a key, because some file systems (and copies to them) would treat them as one name.
    public static func collisionKey(_ path: String) -> String {
        // ASCII is already NFC and folds by lowercasing; Foundation's folding is much slower. A path without
        // capitals is its own key (no copy).
        var upper = false
        for byte in path.utf8 {
            if byte >= 0x80 {
                return path.precomposedStringWithCanonicalMapping.folding(options: [.caseInsensitive], locale: nil)
            }
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { upper = true }
        }
        if !upper { return path }
        return String(decoding: path.utf8.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// `path` with `~` + a short hash of `salt` inserted before the extension of its last component,
    /// keeping that component within 255 bytes: `A/abc.mp3` → `A/abc~9f3e21c0.mp3`. Stable across runs
    /// for the same salt (callers pass the remote name and remote path).
    public static func disambiguated(_ path: String, salt: String) -> String {
        var components = path.split(separator: "/").map(String.init)
        guard let last = components.popLast() else { return "~" + shortHash(salt) }
        components.append(withSuffix(last, suffix: "~" + shortHash(salt)))
        return components.joined(separator: "/")
    }

    /// 8 lowercase hex digits of FNV-1a over the UTF-8 bytes, folded to 32 bits. Not cryptographic;
    /// only stable and well spread.
    public static func shortHash(_ text: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01B3
        }
        let folded = UInt32(truncatingIfNeeded: h ^ (h >> 32))
        let hex = String(folded, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// `name` with `suffix` before its extension, the stem cut on a character boundary so the whole fits
    /// in ``maxComponentBytes``. An extension longer than 16 bytes is treated as part of the stem.
    private static func withSuffix(_ name: String, suffix: String) -> String {
        var stem = Substring(name)
        var ext = Substring("")
        if let dot = name.lastIndex(of: "."), dot != name.startIndex,
           name.utf8.distance(from: dot, to: name.endIndex) <= 16 {
            stem = name[..<dot]
            ext = name[dot...]
        }
        let budget = maxComponentBytes - suffix.utf8.count - ext.utf8.count
        var kept = 0
        var end = stem.startIndex
        for index in stem.indices {
            let next = stem.index(after: index)
            let size = stem.utf8.distance(from: index, to: next)
            if kept + size > budget { break }
            kept += size
            end = next
        }
        return String(stem[..<end]) + suffix + String(ext)
    }
}
