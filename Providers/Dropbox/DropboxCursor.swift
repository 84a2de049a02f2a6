import Foundation

/// What `listAudio` hands back as its opaque cursor: Dropbox's own cursor plus the root it was made for,
/// so that a changed `root` in the config forces a full listing instead of a change feed of another folder.
struct DropboxCursor: Codable, Equatable {
    /// Format version; other versions are treated as unreadable (full listing).
    var v: Int = 1
    /// The normalized root in lower case ("" for the whole account).
    var root: String
    /// The last `cursor` of a `list_folder` listing or `continue` feed.
    var cursor: String

    init(root: String, cursor: String) {
        self.root = root
        self.cursor = cursor
    }

    /// A compact JSON text.
    func encoded() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding two strings and an Int cannot fail.
        guard let data = try? encoder.encode(self) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    /// Nil when `text` is not a cursor of this format (an older version, another provider, damage).
    static func decode(_ text: String) -> DropboxCursor? {
        guard let value = try? JSONDecoder().decode(DropboxCursor.self, from: Data(text.utf8)),
              value.v == 1, !value.cursor.isEmpty else { return nil }
        return value
    }
}
