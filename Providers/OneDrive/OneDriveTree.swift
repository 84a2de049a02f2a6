import CloudSyncCore
import CloudSyncHTTP
import Foundation

/// The drive as the delta feed described it: the kit's ``ItemTree`` of every folder and every audio file,
/// rooted at the drive's top item, because delta items carry no paths: a renamed or moved folder moves every file
/// under it without the feed naming them.
///
/// Stored inside the listing cursor so the next delta can resolve deletions (which lack names on Business)
/// and folder moves. Short keys keep the cursor small (tens of bytes per file).
typealias OneDriveTree = ItemTree<OneDriveFile>

/// An audio file of the drive, as the cursor keeps it.
struct OneDriveFile: TreeFile {
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

    var itemName: String { n }
    var parentID: String? { p }
}

extension OneDriveTree {
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
        guard let name = item.name ?? folders[id]?.name ?? files[id]?.n, !name.isEmpty else {
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
            setFolder(id, name: name, parent: parent)
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
        setFile(id, OneDriveFile(n: name, p: parent, s: size, m: modified.timeIntervalSince1970, r: revision, h: hashes,
                                 t: facet.mimeType, d: shared))
    }

    /// Audio files under `root` (segments, matched case-insensitively) keyed by id, with paths relative to
    /// it; and whether `root` exists as a folder (always true for the drive root once seen).
    func resolvedFiles(under root: [String]) -> (files: [String: RemoteFile], rootFound: Bool) {
        let (folderPaths, filePaths) = paths()
        let wanted = root.map { $0.lowercased() }
        func matches(_ segments: ArraySlice<String>) -> Bool { zip(segments, wanted).allSatisfy { $0.0.lowercased() == $0.1 } }
        var out: [String: RemoteFile] = [:]
        for (id, full) in filePaths where full.count > wanted.count && matches(full[...]) {
            guard let file = files[id] else { continue }
            out[id] = RemoteFile(path: full.dropFirst(wanted.count).joined(separator: "/"), providerID: id, size: file.s,
                                 modified: Date(timeIntervalSince1970: file.m), revision: file.r, hashes: file.h,
                                 mimeType: file.t, downloadHint: file.d)
        }
        let found = folderPaths.values.contains { $0.count == wanted.count && matches($0[...]) }
        return (out, found)
    }
}

/// What the listing cursor holds, in the kit's ``CursorEnvelope`` (version 1, the spelling this cursor always
/// had): the deltaLink to resume from and the tree it describes, plus the settings that shaped the tree (a cursor
/// made for another root or audio filter is not reused).
struct OneDriveCursor: VersionedCursor, Sendable {
    static let version = 1

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
    let changes = TreeChanges(from: old, to: new)
    return (changes.upserts, changes.vacatedPaths.map { .path($0) })
}
