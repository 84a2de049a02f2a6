import CloudSyncHTTP
import Foundation

/// What `listAudio` hands back as its opaque cursor, in the kit's ``CursorEnvelope`` (version 1, the spelling
/// this type always had: `{"cursor","root","v":1}`): Dropbox's own cursor plus the root it was made for, so that a
/// changed `root` in the config forces a full listing instead of a change feed of another folder.
struct DropboxCursor: VersionedCursor, Equatable {
    static let version = 1

    /// The normalized root in lower case ("" for the whole account).
    var root: String
    /// The last `cursor` of a `list_folder` listing or `continue` feed.
    var cursor: String

    init(root: String, cursor: String) {
        self.root = root
        self.cursor = cursor
    }

    /// The cursor in `text`, or why it cannot be used (an older version, another provider's, damage, no token).
    static func open(_ text: String) -> Result<DropboxCursor, CursorEnvelope.Refusal> {
        CursorEnvelope.open(DropboxCursor.self, from: text, version: version).flatMap {
            $0.cursor.isEmpty ? .failure(.unreadable) : .success($0)
        }
    }

    static func decode(_ text: String) -> DropboxCursor? { try? open(text).get() }
}
