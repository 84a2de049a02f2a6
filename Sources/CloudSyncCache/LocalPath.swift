import Foundation

/// How remote names become names on disk under `tracks/`. Remote names are hostile: they may contain `..`,
/// NUL, control characters, backslashes, components longer than the file system allows, or differ from
/// another name only by case or Unicode normalization. Names stay as close to the remote's as safety allows
/// so a player pointed at `tracks/` shows what the user expects.
public enum LocalPath {
    /// The longest component most Linux file systems accept, in bytes.
    public static let maxComponentBytes = 255

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
    /// A path with no component left becomes `_`. Two different inputs may map to the same output
    /// (`a/./b` and `a/b`); the index detects such collisions with ``collisionKey(_:)`` and gives the later
    /// one a ``disambiguated(_:salt:)`` name.
    public static func safeRelativePath(for remotePath: String) -> String {
        let parts = remotePath.split(separator: "/", omittingEmptySubsequences: true).compactMap { part -> String? in
            part == "." ? nil : safeComponent(String(part))
        }
        return parts.isEmpty ? "_" : parts.joined(separator: "/")
    }

    /// One safe path component (see ``safeRelativePath(for:)``); a `/` inside becomes `_`.
    /// Used for remote names, the first component under `tracks/`.
    public static func safeComponent(_ name: String) -> String {
        if name.isEmpty || name == "." { return "_" }
        if name == ".." { return "__" }
        let needsWork = name.utf8.count > maxComponentBytes || name.unicodeScalars.contains { scalar in
            scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F) || scalar == "/" || scalar == "\\"
        }
        if !needsWork { return name }
        var out = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            let v = scalar.value
            let unsafe = v < 0x20 || (v >= 0x7F && v <= 0x9F) || scalar == "/" || scalar == "\\"
            out.append(unsafe ? "_" : scalar)
        }
        let cleaned = String(out)
        guard cleaned.utf8.count > maxComponentBytes else { return cleaned }
        return withSuffix(cleaned, suffix: "~" + shortHash(name))
    }

    /// The key two local paths collide on: Unicode NFC, then case-folded. `Café` (NFC), `Café` (NFD) and
    /// `CAFÉ` share a key, because some file systems (and copies to them) would treat them as one name.
    public static func collisionKey(_ path: String) -> String {
        // ASCII is already NFC and folds by lowercasing; Foundation's folding is much slower.
        if path.utf8.allSatisfy({ $0 < 0x80 }) { return path.lowercased() }
        return path.precomposedStringWithCanonicalMapping.folding(options: [.caseInsensitive], locale: nil)
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
