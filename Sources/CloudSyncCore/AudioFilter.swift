/// Decides which remote files are audio: by extension (case-insensitive) or an `audio/*` MIME type.
public struct AudioFilter: Sendable, Hashable {
    public static let defaultExtensions: [String] = [
        "mp3", "flac", "m4a", "aac", "ogg", "oga", "opus", "wav", "aiff", "aif", "alac", "ape", "wv", "wma",
        "mka", "dsf", "dff", "mpc",
    ]

    public let extensions: Set<String>

    public init(extensions: [String] = AudioFilter.defaultExtensions) {
        self.extensions = Set(extensions.map { $0.lowercased().trimmingPrefixDot() })
    }

    /// Whether a file named `name` (the last path component or a whole path) with `mimeType` is audio.
    public func isAudio(name: String, mimeType: String? = nil) -> Bool {
        if let mime = mimeType?.lowercased(), mime.hasPrefix("audio/") { return true }
        guard let ext = Self.fileExtension(of: name) else { return false }
        return extensions.contains(ext.lowercased())
    }

    /// What follows the last dot of `name`'s last path component, as written; nil when that component has no dot.
    public static func fileExtension(of name: String) -> Substring? {
        // (`utf8.contains`: a String argument would pick Foundation's `contains`, a CFString search per file.)
        guard let dot = name.lastIndex(of: "."), !name[dot...].utf8.contains(UInt8(ascii: "/")) else { return nil }
        return name[name.index(after: dot)...]
    }
}

extension String {
    fileprivate func trimmingPrefixDot() -> String { hasPrefix(".") ? String(dropFirst()) : self }
}
