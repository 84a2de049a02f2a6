import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// What a Drive listing knows about the root's subtree: the kit's ``ItemTree`` of every folder and every audio
/// file below the root's real id, the `changes` page token and the root it was listed for. It is the change cursor
/// (in the kit's ``CursorEnvelope``), because Drive's change feed names items by id with their current parent only:
/// paths of files under a renamed or moved folder can only be rebuilt from the folder map, and duplicate-name
/// suffixes (``ItemTree/Naming/distinct``) can only be kept stable from the file map.
struct DriveTree: VersionedCursor, Sendable, Equatable {
    typealias Items = ItemTree<File>

    struct File: TreeFile {
        var name: String
        var parent: String
        var size: Int64
        var mimeType: String?
        var md5: String?
        var sha256: String?
        var modified: String?
        var revision: String?

        var itemName: String { name }
        var parentID: String? { parent }

        // Short keys: the cursor holds one of these per audio file.
        enum CodingKeys: String, CodingKey {
            case name = "n", parent = "p", size = "s", mimeType = "t", md5 = "m", sha256 = "h", modified = "d", revision = "r"
        }
    }

    /// Format of the cursor; another value means "list everything again". 2 was `{"version": 2, …}` with the maps
    /// beside the token, before the envelope: it reads as unreadable, so it too gives one full listing.
    static let version = 3

    /// The configured root path this tree was listed for (a config change means a full listing).
    var root: String
    /// The `changes` page token to continue from.
    var pageToken: String
    /// Rooted at the root folder's real id (not the `root` alias: parents name real ids).
    var items: Items

    init(root: String, rootID: String, pageToken: String) {
        self.root = root
        self.pageToken = pageToken
        items = Items(rootID: rootID)
    }

    var rootID: String { items.rootID ?? "" }
    var folders: [String: Items.Folder] {
        get { items.folders }
        set { items.folders = newValue }
    }
    var files: [String: File] {
        get { items.files }
        set { items.files = newValue }
    }

    /// Drops folders and files not reachable from the root (moved out of the root, or parents unknown).
    mutating func prune() { items = items.pruned() }

    /// Local paths (relative to the root) of every folder and file reachable from the root, names made distinct.
    func paths() -> (folders: [String: String], files: [String: String]) {
        let paths = items.paths(naming: .distinct)
        return (paths.folders.mapValues { $0.joined(separator: "/") }, paths.files.mapValues { $0.joined(separator: "/") })
    }

    /// The `RemoteFile` for file `id` at `path`.
    func remoteFile(id: String, path: String) -> RemoteFile? {
        guard let f = files[id] else { return nil }
        var hashes: [ContentHash] = []
        if let sha = f.sha256, !sha.isEmpty { hashes.append(ContentHash(kind: .sha256, value: sha.lowercased())) }
        if let md5 = f.md5, !md5.isEmpty { hashes.append(ContentHash(kind: .md5, value: md5.lowercased())) }
        return RemoteFile(path: path, providerID: id, size: f.size,
                          modified: f.modified.flatMap(RFC3339.parse) ?? Date(timeIntervalSince1970: 0),
                          revision: f.revision ?? f.md5 ?? "", hashes: hashes, mimeType: f.mimeType)
    }

    /// Every audio file under the root, by id.
    func filesByID() -> [String: RemoteFile] {
        var out: [String: RemoteFile] = [:]
        for (id, path) in paths().files { out[id] = remoteFile(id: id, path: path) }
        return out
    }

    /// Every audio file under the root, sorted by path.
    func remoteFiles() -> [RemoteFile] { filesByID().values.sorted { $0.path < $1.path } }

    /// What changed from `old` to `self`: files that are new, moved, renamed or modified (upserts, with their
    /// new path and the same id), and files that left the root subtree (deletions by id).
    func changes(since old: DriveTree) -> (upserts: [RemoteFile], deletions: [RemoteDeletion]) {
        let diff = TreeChanges(from: old.filesByID(), to: filesByID())
        return (diff.upserts, diff.removedIDs.map { .providerID($0) })
    }
}
