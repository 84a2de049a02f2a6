import CloudSyncCore

/// Files a listing shows at a new path whose contents the cache already holds under a path the listing no longer
/// has: a track moved or renamed on the server (a folder renamed, an album re-sorted) keeps its cached bytes
/// instead of being fetched again while its old copy is deleted. Pure: the plan is made here, the cache applies it.
public enum MovedFiles {
    /// A cached file whose path the listing no longer has, as the index knows it, and how many of its bytes the
    /// cache holds (complete or partial).
    public struct Gone: Sendable, Hashable {
        public var file: RemoteFile
        public var heldBytes: Int64

        public init(file: RemoteFile, heldBytes: Int64) {
            self.file = file
            self.heldBytes = heldBytes
        }
    }

    /// The cached file at `from` is the listed `to`, under another path.
    public struct Move: Sendable, Hashable {
        public var from: String
        public var to: RemoteFile

        public init(from: String, to: RemoteFile) {
            self.from = from
            self.to = to
        }
    }

    /// Whether `old` (as indexed) and `new` (as listed) are the same contents, by the strongest evidence both have:
    /// - a hash kind both carry: every such hash is equal (Dropbox `content_hash`, Drive MD5, OneDrive QuickXor
    ///   or SHA-1, Yandex SHA-256, Nextcloud checksums); a differing one says no, whatever else agrees;
    /// - else both have a provider id: the same id and fingerprint (size, mtime, revision);
    /// - else the same fingerprint (size, modification second and revision: a WebDAV ETag, which Apache and
    ///   rclone derive from size and mtime, both kept by a server-side MOVE; nginx lists none) and the same file
    ///   name: only a file moved to another folder is recognised, as one file of one name, size and modification
    ///   second, the evidence by which a file at one path is found unchanged.
    /// Sizes always agree, and an empty file is never matched (nothing to keep).
    public static func sameContents(_ old: RemoteFile, _ new: RemoteFile) -> Bool {
        guard old.size == new.size, old.size > 0 else { return false }
        let shared = old.hashes.filter { hash in new.hashes.contains { $0.kind == hash.kind } }
        if !shared.isEmpty {
            return shared.allSatisfy { hash in new.hashes.allSatisfy { $0.kind != hash.kind || hash.matches($0.value) } }
        }
        let (a, b) = (old.fingerprint, new.fingerprint)
        if let oldID = old.providerID, let newID = new.providerID { return oldID == newID && a == b }
        return a == b && fileName(old.path) == fileName(new.path)
    }

    /// Pairs each of `appeared` (listed files the cache holds no byte of) with at most one of `gone` whose contents
    /// it is (``sameContents(_:_:)``), each gone file used once. Where several qualify, a gone file with the same
    /// name is preferred, then the one holding more bytes, then the first by path; `appeared` is served in path
    /// order. Deterministic: the same inputs give the same moves in any order.
    public static func match(gone: [Gone], appeared: [RemoteFile]) -> [Move] {
        guard !gone.isEmpty, !appeared.isEmpty else { return [] }
        var bySize: [Int64: [Int]] = [:]
        for index in gone.indices where gone[index].heldBytes > 0 { bySize[gone[index].file.size, default: []].append(index) }
        var used = Set<Int>()
        var moves: [Move] = []
        for file in appeared.sorted(by: { $0.path < $1.path }) {
            guard let candidates = bySize[file.size] else { continue }
            let name = fileName(file.path)
            var best: Int?
            for index in candidates where !used.contains(index) && sameContents(gone[index].file, file) {
                guard let current = best else {
                    best = index
                    continue
                }
                if preferred(gone[index], over: gone[current], name: name) { best = index }
            }
            if let best {
                used.insert(best)
                moves.append(Move(from: gone[best].file.path, to: file))
            }
        }
        return moves
    }

    private static func preferred(_ a: Gone, over b: Gone, name: Substring) -> Bool {
        let (aName, bName) = (fileName(a.file.path) == name, fileName(b.file.path) == name)
        if aName != bName { return aName }
        if a.heldBytes != b.heldBytes { return a.heldBytes > b.heldBytes }
        return a.file.path < b.file.path
    }

    private static func fileName(_ path: String) -> Substring {
        path.split(separator: "/", omittingEmptySubsequences: true).last ?? Substring(path)
    }
}
