import CloudSyncCore
import Foundation

/// What a Drive listing knows about the root's subtree: every folder (id → name, parent) and every audio
/// file (id → parent, name, metadata). It is the change cursor (JSON-encoded), because Drive's change feed
/// names items by id with their current parent only: paths of files under a renamed or moved folder can only
/// be rebuilt from the folder map, and duplicate-name suffixes can only be kept stable from the file map.
struct DriveTree: Codable, Sendable, Equatable {
    struct Folder: Codable, Sendable, Equatable {
        var name: String
        var parent: String

        enum CodingKeys: String, CodingKey { case name = "n", parent = "p" }
    }

    struct File: Codable, Sendable, Equatable {
        var name: String
        var parent: String
        var size: Int64
        var mimeType: String?
        var md5: String?
        var sha256: String?
        var modified: String?
        var revision: String?

        // Short keys: the cursor holds one of these per audio file.
        enum CodingKeys: String, CodingKey {
            case name = "n", parent = "p", size = "s", mimeType = "t", md5 = "m", sha256 = "h", modified = "d", revision = "r"
        }
    }

    /// Format of the cursor; another value means "list everything again".
    static let currentVersion = 2

    var version: Int = DriveTree.currentVersion
    /// The configured root path this tree was listed for (a config change means a full listing).
    var root: String
    /// The root folder's real id (not the `root` alias: parents name real ids).
    var rootID: String
    /// The `changes` page token to continue from.
    var pageToken: String
    var folders: [String: Folder] = [:]
    var files: [String: File] = [:]

    /// Drops folders and files not reachable from `rootID` (moved out of the root, or parents unknown).
    mutating func prune() {
        let (folderPaths, _) = paths()
        folders = folders.filter { folderPaths[$0.key] != nil }
        files = files.filter { $0.value.parent == rootID || folderPaths[$0.value.parent] != nil }
    }

    /// Local paths (relative to the root) of every folder and file reachable from the root.
    ///
    /// Names: `/` becomes `／` (U+FF0F, as rclone does); `.`/`..`/"" become `．`-forms. Drive allows several
    /// items with one name in a folder: the one with the smallest id keeps the name, every other gets
    /// `stem (first 8 chars of id).ext` (folders: `name (id8)`), or the whole id if that still collides.
    /// The rule only looks at the siblings, so names stay stable across runs while the siblings do.
    func paths() -> (folders: [String: String], files: [String: String]) {
        struct Child { var id: String; var name: String; var isFolder: Bool }
        var children: [String: [Child]] = [:]
        for (id, f) in folders where id != rootID { children[f.parent, default: []].append(Child(id: id, name: f.name, isFolder: true)) }
        for (id, f) in files { children[f.parent, default: []].append(Child(id: id, name: f.name, isFolder: false)) }
        var folderPaths: [String: String] = [rootID: ""]
        var filePaths: [String: String] = [:]
        var queue = [rootID]
        var next = 0
        while next < queue.count {
            let parent = queue[next]
            next += 1
            let base = folderPaths[parent] ?? ""
            guard let kids = children[parent] else { continue }
            for (id, name, isFolder) in Self.localNames(kids.map { ($0.id, $0.name, $0.isFolder) }) {
                let path = base.isEmpty ? name : base + "/" + name
                if isFolder {
                    guard folderPaths[id] == nil else { continue }
                    folderPaths[id] = path
                    queue.append(id)
                } else {
                    filePaths[id] = path
                }
            }
        }
        return (folderPaths, filePaths)
    }

    /// Distinct local names for the children of one folder (see ``paths()``).
    static func localNames(_ kids: [(id: String, name: String, isFolder: Bool)]) -> [(String, String, Bool)] {
        let sorted = kids.map { (id: $0.id, name: sanitize($0.name), isFolder: $0.isFolder) }.sorted { $0.id < $1.id }
        var taken = Set(sorted.map(\.name))
        var firstSeen: Set<String> = []
        var result: [(String, String, Bool)] = []
        for kid in sorted {
            if firstSeen.insert(kid.name).inserted {
                result.append((kid.id, kid.name, kid.isFolder))
                continue
            }
            var name = suffixed(kid.name, with: String(kid.id.prefix(8)), isFolder: kid.isFolder)
            if taken.contains(name) { name = suffixed(kid.name, with: kid.id, isFolder: kid.isFolder) }
            taken.insert(name)
            result.append((kid.id, name, kid.isFolder))
        }
        return result
    }

    static func suffixed(_ name: String, with tag: String, isFolder: Bool) -> String {
        if !isFolder, let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return "\(name[..<dot]) (\(tag))\(name[dot...])"
        }
        return "\(name) (\(tag))"
    }

    static func sanitize(_ name: String) -> String {
        switch name {
        case "": return "．"
        case ".": return "．"
        case "..": return "．．"
        default: return name.replacingOccurrences(of: "/", with: "／")
        }
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

    /// Every audio file under the root, sorted by path.
    func remoteFiles() -> [RemoteFile] {
        paths().files.compactMap { remoteFile(id: $0.key, path: $0.value) }.sorted { $0.path < $1.path }
    }

    /// What changed from `old` to `self`: files that are new, moved, renamed or modified (upserts, with their
    /// new path and the same id), and files that left the root subtree (deletions by id).
    func changes(since old: DriveTree) -> (upserts: [RemoteFile], deletions: [RemoteDeletion]) {
        let before = old.paths().files
        let after = paths().files
        var upserts: [RemoteFile] = []
        for (id, path) in after where before[id] != path || old.files[id] != files[id] {
            if let file = remoteFile(id: id, path: path) { upserts.append(file) }
        }
        let deletions = before.keys.filter { after[$0] == nil }.sorted().map { RemoteDeletion.providerID($0) }
        return (upserts.sorted { $0.path < $1.path }, deletions)
    }
}
