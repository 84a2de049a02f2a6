import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The drive as the delta feed described it, kept by id because delta items carry no paths: every folder
/// (id → name, parent id) and every audio file (id → name, parent id, metadata). Paths are rebuilt from the
/// parent chain, so a renamed or moved folder moves every file under it without the feed naming them.
///
/// Stored inside the listing cursor so the next delta can resolve deletions (which lack names on Business)
/// and folder moves. Short keys keep the cursor small (tens of bytes per file).
struct OneDriveTree: Codable, Sendable, Equatable {
    struct Folder: Codable, Sendable, Equatable {
        /// Name.
        var n: String
        /// Parent id.
        var p: String?
    }

    struct File: Codable, Sendable, Equatable {
        var n: String
        var p: String?
        /// Size in bytes.
        var s: Int64
        /// Modification time, seconds since 1970.
        var m: Double
        /// Revision (quickXorHash, else cTag, else eTag).
        var r: String
        var h: [ContentHash]
        /// MIME type.
        var t: String?
        /// Graph item path for shared items ("drives/{driveId}/items/{id}"), nil for items of this drive.
        var d: String?
    }

    /// The drive's top item (`root` facet), once seen.
    var rootID: String?
    var folders: [String: Folder] = [:]
    var files: [String: File] = [:]

    /// Folders deeper than this are treated as unreachable (a parent cycle in a hostile answer).
    static let maxDepth = 256

    /// Applies one delta item; the last mention of an id wins. Deleted items, packages (OneNote), shared
    /// folders (their contents live in another drive), malware-flagged files, non-audio files and files
    /// without a size are removed from the tree. `note` receives messages worth logging.
    mutating func apply(_ item: GraphAPI.Item, audio: AudioFilter, note: (LogLevel, String) -> Void) {
        let id = item.id
        if item.deleted != nil {
            remove(id)
            return
        }
        if item.root != nil || (item.folder != nil && item.parentReference?.id == nil && (rootID == nil || rootID == id)) {
            remove(id)
            rootID = id
            return
        }
        guard let name = item.name ?? folders[id]?.n ?? files[id]?.n, !name.isEmpty else {
            note(.debug, "item \(id) has no name; ignored")
            remove(id)
            return
        }
        let parent = item.parentReference?.id
        if item.package != nil {
            remove(id)
            return
        }
        if item.folder != nil {
            files[id] = nil
            folders[id] = Folder(n: name, p: parent)
            return
        }
        if item.remoteItem?.folder != nil {
            note(.info, "shared folder '\(name)' skipped: its contents live in another drive and are not in this drive's delta feed")
            remove(id)
            return
        }
        guard let facet = item.file ?? item.remoteItem?.file else {
            remove(id)
            return
        }
        folders[id] = nil
        if item.malware != nil {
            note(.warning, "'\(name)' skipped: OneDrive flagged it as malware and blocks its download")
            files[id] = nil
            return
        }
        guard item.audio != nil || audio.isAudio(name: name, mimeType: facet.mimeType) else {
            files[id] = nil
            return
        }
        guard let size = item.size ?? item.remoteItem?.size, size >= 0 else {
            note(.warning, "'\(name)' skipped: Graph gave no size for it")
            files[id] = nil
            return
        }
        let stamp = item.fileSystemInfo?.lastModifiedDateTime ?? item.lastModifiedDateTime
        let modified = stamp.flatMap(RFC3339.parse) ?? Date(timeIntervalSince1970: 0)
        var hashes: [ContentHash] = []
        if let q = facet.hashes?.quickXorHash, !q.isEmpty { hashes.append(ContentHash(kind: .quickXor, value: q)) }
        if let s = facet.hashes?.sha256Hash, !s.isEmpty { hashes.append(ContentHash(kind: .sha256, value: s.lowercased())) }
        if let s = facet.hashes?.sha1Hash, !s.isEmpty { hashes.append(ContentHash(kind: .sha1, value: s.lowercased())) }
        // cTag changes only with content but Business omits it in delta; quickXorHash is content identity on both.
        let revision = hashes.first { $0.kind == .quickXor }?.value ?? item.cTag ?? item.eTag ?? ""
        var shared: String?
        if let remote = item.remoteItem, let rid = remote.id, let drive = remote.parentReference?.driveId {
            shared = "drives/\(PercentEncoding.encode(drive, .pathSegment))/items/\(PercentEncoding.encode(rid, .pathSegment))"
        }
        files[id] = File(n: name, p: parent, s: size, m: modified.timeIntervalSince1970, r: revision, h: hashes,
                         t: facet.mimeType, d: shared)
    }

    private mutating func remove(_ id: String) {
        folders[id] = nil
        files[id] = nil
    }

    /// Resolves folder paths (segments from the drive root) with memoization; nil when unreachable.
    struct PathResolver {
        let tree: OneDriveTree
        var memo: [String: [String]?] = [:]

        init(_ tree: OneDriveTree) { self.tree = tree }

        mutating func segments(ofFolder id: String?) -> [String]? {
            guard let id else { return nil }
            if id == tree.rootID { return [] }
            if let known = memo[id] { return known }
            var chain: [String] = []
            var cursor: String? = id
            var result: [String]?
            while let current = cursor {
                if current == tree.rootID { result = []; break }
                if let known = memo[current] { result = known; break }
                guard let folder = tree.folders[current], chain.count < OneDriveTree.maxDepth else { result = nil; break }
                chain.append(current)
                cursor = folder.p
            }
            // Fill the memo from the top of the chain down.
            for current in chain.reversed() {
                if let base = result, let folder = tree.folders[current] {
                    result = base + [folder.n]
                } else {
                    result = nil
                }
                memo[current] = .some(result)
            }
            return memo[id] ?? nil
        }
    }

    /// Audio files under `root` (segments, matched case-insensitively) keyed by id, with paths relative to
    /// it; and whether `root` exists as a folder (always true for the drive root once seen).
    func resolvedFiles(under root: [String]) -> (files: [String: RemoteFile], rootFound: Bool) {
        var resolver = PathResolver(self)
        let wanted = root.map { $0.lowercased() }
        var out: [String: RemoteFile] = [:]
        for (id, file) in files {
            guard let folder = resolver.segments(ofFolder: file.p) else { continue }
            let full = folder + [file.n]
            guard full.count > wanted.count, zip(full, wanted).allSatisfy({ $0.0.lowercased() == $0.1 }) else { continue }
            let path = full.dropFirst(wanted.count).joined(separator: "/")
            out[id] = RemoteFile(path: path, providerID: id, size: file.s, modified: Date(timeIntervalSince1970: file.m),
                                 revision: file.r, hashes: file.h, mimeType: file.t, downloadHint: file.d)
        }
        var found = rootID != nil && wanted.isEmpty
        if !found {
            found = folders.keys.contains { id in
                resolver.segments(ofFolder: id).map { $0.map { $0.lowercased() } == wanted } ?? false
            }
        }
        return (out, found)
    }

    /// The tree without folders and files that no longer hang under the drive root (children of deleted
    /// folders are not always reported deleted themselves).
    func pruned() -> OneDriveTree {
        var resolver = PathResolver(self)
        var copy = self
        copy.folders = folders.filter { resolver.segments(ofFolder: $0.key) != nil }
        copy.files = files.filter { resolver.segments(ofFolder: $0.value.p) != nil }
        return copy
    }

}

/// What the listing cursor holds: the deltaLink to resume from and the tree it describes, plus the settings
/// that shaped the tree (a cursor made for another root or audio filter is not reused).
struct OneDriveCursor: Codable, Sendable {
    static let currentVersion = 1

    var v: Int
    /// Lowercased root segments joined by "/".
    var root: String
    /// Sorted audio extensions joined by ",".
    var audio: String
    var deltaLink: String
    var tree: OneDriveTree

    static func key(root: [String]) -> String { root.map { $0.lowercased() }.joined(separator: "/") }
    static func key(audio: AudioFilter) -> String { audio.extensions.sorted().joined(separator: ",") }
}

/// The changes between two trees as a change feed: upserts for files that are new, changed or moved, and
/// `.path` deletions for paths no file occupies any more (a moved file's old path; never a path that is
/// upserted in the same listing). Both lists sorted by path.
func oneDriveChanges(from old: [String: RemoteFile], to new: [String: RemoteFile]) -> (upserts: [RemoteFile], deletions: [RemoteDeletion]) {
    let upserts = new.filter { old[$0.key] != $0.value }.map(\.value).sorted { $0.path < $1.path }
    let occupied = Set(new.values.map(\.path))
    let gone = Set(old.filter { new[$0.key]?.path != $0.value.path && !occupied.contains($0.value.path) }.map(\.value.path))
    return (upserts, gone.sorted().map { RemoteDeletion.path($0) })
}
