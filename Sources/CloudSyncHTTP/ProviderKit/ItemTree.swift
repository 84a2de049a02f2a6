import CloudSyncCore
import Foundation

/// A file of an ``ItemTree``: the provider's metadata, with the name and parent id the tree needs.
public protocol TreeFile: Codable, Sendable, Equatable {
    var itemName: String { get }
    /// The folder holding the file; nil when the cloud named none.
    var parentID: String? { get }
}

/// What a cloud that names items by id told about them (Drive files, Graph driveItems): every folder
/// (id → name, parent id) and every file (id → `File`, which knows its name and parent). Paths are rebuilt from the
/// parent chains, so a renamed or moved folder moves every file below it without the change feed naming them, and
/// items may arrive in any order (a child before its parent). Pure; the providers keep one inside their cursor.
///
/// Coded as `{"rootID", "folders": {id: {"n", "p"}}, "files": {id: File}}`.
public struct ItemTree<File: TreeFile>: Codable, Sendable, Equatable {
    public struct Folder: Codable, Sendable, Equatable {
        public var name: String
        public var parent: String?

        public init(name: String, parent: String?) {
            self.name = name
            self.parent = parent
        }

        enum CodingKeys: String, CodingKey { case name = "n", parent = "p" }
    }

    /// How the names of one folder's children become path segments.
    public enum Naming: Sendable {
        /// As the cloud spelled them (Graph: names are unique in a folder and never hold `/`).
        case verbatim
        /// Made distinct and safe (Drive allows several items with one name): `/` becomes `／` (U+FF0F, as rclone
        /// does); `.`/`..`/"" become `．`-forms; of several children with one name the smallest id keeps it, every
        /// other gets `stem (first 8 chars of id).ext` (folders: `name (id8)`), or the whole id if that still
        /// collides. Only siblings decide, so names stay stable across runs while the siblings do.
        case distinct
    }

    /// Folders deeper than this below the root are unreachable (bounds a hostile parent chain).
    public static var maxDepth: Int { 256 }

    /// The id paths start from; nil until known, and then nothing is reachable.
    public var rootID: String?
    public var folders: [String: Folder]
    public var files: [String: File]

    public init(rootID: String? = nil, folders: [String: Folder] = [:], files: [String: File] = [:]) {
        self.rootID = rootID
        self.folders = folders
        self.files = files
    }

    /// Records folder `id` (replacing a file of that id).
    public mutating func setFolder(_ id: String, name: String, parent: String?) {
        files[id] = nil
        folders[id] = Folder(name: name, parent: parent)
    }

    /// Records file `id` (replacing a folder of that id).
    public mutating func setFile(_ id: String, _ file: File) {
        folders[id] = nil
        files[id] = file
    }

    /// Forgets item `id`, folder or file. Its children stay and become unreachable unless they move.
    public mutating func remove(_ id: String) {
        folders[id] = nil
        files[id] = nil
    }

    /// Path segments below the root of every reachable folder (the root itself: `[]`) and file. Reachable: the
    /// parent chain leads to `rootID` within ``maxDepth`` folders; a cycle or an unknown parent never does.
    public func paths(naming: Naming = .verbatim) -> (folders: [String: [String]], files: [String: [String]]) {
        guard let rootID else { return ([:], [:]) }
        var children: [String: [(id: String, name: String, isFolder: Bool)]] = [:]
        for (id, folder) in folders where id != rootID {
            if let parent = folder.parent { children[parent, default: []].append((id, folder.name, true)) }
        }
        for (id, file) in files {
            if let parent = file.parentID { children[parent, default: []].append((id, file.itemName, false)) }
        }
        var folderPaths: [String: [String]] = [rootID: []]
        var filePaths: [String: [String]] = [:]
        var queue = [rootID]
        var next = 0
        while next < queue.count {
            let parent = queue[next]
            next += 1
            guard let kids = children[parent], let base = folderPaths[parent] else { continue }
            let named = naming == .distinct ? Self.distinctNames(kids) : kids
            for kid in named {
                let path = base + [kid.name]
                if !kid.isFolder {
                    filePaths[kid.id] = path
                } else if folderPaths[kid.id] == nil, path.count <= Self.maxDepth {
                    folderPaths[kid.id] = path
                    queue.append(kid.id)
                }
            }
        }
        return (folderPaths, filePaths)
    }

    /// The tree without the folders and files that no longer hang under the root (moved out, or below a deleted
    /// folder whose children the cloud did not report deleted).
    public func pruned() -> ItemTree {
        let reachable = paths().folders
        var copy = self
        copy.folders = folders.filter { reachable[$0.key] != nil }
        copy.files = files.filter { $0.value.parentID.map { reachable[$0] != nil } ?? false }
        return copy
    }

    /// Distinct local names for the children of one folder (``Naming/distinct``).
    public static func distinctNames(_ kids: [(id: String, name: String, isFolder: Bool)]) -> [(id: String, name: String, isFolder: Bool)] {
        let sorted = kids.map { (id: $0.id, name: sanitize($0.name), isFolder: $0.isFolder) }.sorted { $0.id < $1.id }
        var taken = Set(sorted.map(\.name))
        var firstSeen: Set<String> = []
        var result: [(id: String, name: String, isFolder: Bool)] = []
        for kid in sorted {
            if firstSeen.insert(kid.name).inserted {
                result.append(kid)
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
        case "", ".": "．"
        case "..": "．．"
        default: name.replacingOccurrences(of: "/", with: "／")
        }
    }
}

/// The change feed between two listings of files keyed by id.
public struct TreeChanges: Sendable, Equatable {
    /// Files new, changed, renamed or moved (their new path, the same id), sorted by path.
    public var upserts: [RemoteFile]
    /// Ids listed before and not now (deleted, moved out of the root, no longer audio), sorted.
    public var removedIDs: [String]
    /// Paths listed before that no file holds now (a moved file's old path; never a path upserted now), sorted.
    public var vacatedPaths: [String]

    public init(from old: [String: RemoteFile], to new: [String: RemoteFile]) {
        upserts = new.filter { old[$0.key] != $0.value }.map(\.value).sorted { $0.path < $1.path }
        removedIDs = old.keys.filter { new[$0] == nil }.sorted()
        let occupied = Set(new.values.map(\.path))
        vacatedPaths = Set(old.filter { new[$0.key]?.path != $0.value.path && !occupied.contains($0.value.path) }.map(\.value.path)).sorted()
    }
}
