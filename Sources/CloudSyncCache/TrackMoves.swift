#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation
import Synchronization

extension Cache {
    /// What a moved entry holds after ``move(remote:_:)``.
    public struct MovedEntry: Sendable, Hashable {
        public var complete: Bool
        /// Bytes of the file present (its size when complete).
        public var presentBytes: Int64

        public init(complete: Bool, presentBytes: Int64) {
            self.complete = complete
            self.presentBytes = presentBytes
        }
    }

    /// Gives each move's entry, cached at `from`, the listed file `to`: the same contents under another path (see
    /// `MovedFiles` in the engine). The entry keeps everything it has (bytes, start set, tags, pin, play history,
    /// encryption) and takes `to`'s path, a local path made for it as for a new entry, and `to`'s id, times,
    /// revision and hashes. Its file in `tracks/` (a complete track, or an older version waiting there) is renamed
    /// into its new folder; a partial under `partial/` is named by id and stays. One index transaction for the
    /// batch; if it fails, every renamed file is renamed back and the error thrown. Then the folders touched are
    /// synced together and the old folders left empty are pruned.
    ///
    /// Returns, per move in order, what the entry holds now, or nil when the move was skipped and the caller should
    /// treat `to` as new and `from` as gone: the entry at `from` holds no byte or is gone, it or the row at
    /// `to` is being written (another process's writer holds its lock), the row at `to` holds bytes of its
    /// own, or the file system refuses the new name.
    public func move(remote: String, _ moves: [(from: String, to: RemoteFile)]) throws(CacheError) -> [MovedEntry?] {
        var results = [MovedEntry?](repeating: nil, count: moves.count)
        guard !moves.isEmpty else { return results }
        // Each source and target row locked, non-blocking: a writer holding either keeps its entry as it is.
        var locks: [EntryLock] = []
        var eligible: [(index: Int, source: Int64)] = []
        for (index, move) in moves.enumerated() {
            guard let source = try row(remote: remote, path: move.from), source.holdsBytes,
                  let sourceLock = try EntryLock.tryAcquire(cache: self, id: source.id, wait: false) else { continue }
            if let target = try rowID(remote: remote, path: move.to.path) {
                guard target != source.id, let targetLock = try EntryLock.tryAcquire(cache: self, id: target, wait: false) else { continue }
                locks.append(targetLock)
            }
            locks.append(sourceLock)
            eligible.append((index, source.id))
        }
        defer { withExtendedLifetime(locks) {} }
        guard !eligible.isEmpty else { return results }

        var folders: [String: Int32] = [:]
        defer { for fd in folders.values { Glibc.close(fd) } }
        /// Renamed tracks, to undo after a failed commit.
        var renamed: [RenamedTrack] = []
        var stalePartials: [String] = []
        do throws(CacheError) {
            try withDatabase { db throws(CacheError) in
                try db.withTransaction { () throws(CacheError) in
                    // Moves older than movesKept go, once per batch.
                    try db.run("DELETE FROM moves WHERE moved < ?", [.real(Date().timeIntervalSince1970 - Self.movesKept)])
                    for (index, sourceID) in eligible {
                        let move = moves[index]
                        try db.execute("SAVEPOINT move")
                        do throws(CacheError) {
                            guard let outcome = try moveRow(db, id: sourceID, remote: remote, from: move.from, to: move.to,
                                                            folders: &folders) else {
                                try db.execute("ROLLBACK TO move")
                                try db.execute("RELEASE move")
                                continue
                            }
                            try Self.recordMove(db, remote: remote, from: move.from, to: move.to.path)
                            try db.execute("RELEASE move")
                            results[index] = outcome.entry
                            if let stale = outcome.stalePartial { stalePartials.append(stale) }
                            if let track = outcome.renamed { renamed.append(track) }
                        } catch {
                            try db.execute("ROLLBACK TO move")
                            try db.execute("RELEASE move")
                            logger.info("\(remote):\(move.from) was not moved to \(move.to.path) in the cache (\(error)); "
                                + "it is fetched again")
                        }
                    }
                }
            }
        } catch {
            for track in renamed.reversed() { track.undo(logger) }
            throw error
        }
        for name in stalePartials { removePartial(name) }
        let touched = Set(renamed.flatMap { [$0.newFolderPath, $0.oldFolderPath] })
        let syncing = touched.sorted().compactMap { folder in folders[folder].map { (folder, $0) } }
        let failed = Mutex<[String]>([])
        SyncThreads.shared.run(syncing.count) { i in
            if fsync(syncing[i].1) != 0 { failed.withLock { $0.append(syncing[i].0) } }
        }
        for folder in failed.withLock({ $0 }).sorted() { logger.warning("fsync of the folder tracks/\(folder) failed") }
        for folder in Set(renamed.map(\.oldFolderPath)) { fs.pruneEmptyFolders(folder, in: tracksFD, keepingParents: 1) }
        return results
    }

    /// How long a move is remembered for ``movedPath(remote:from:)``: a playlist saved since plays on.
    static let movesKept: TimeInterval = 365 * 86_400

    /// Records that `from` went to `to` (inside the move's savepoint, each statement on an index): moves that led
    /// to `from` now lead to `to`, and none leads from `to`, which holds the entry again (a move back, or a chain
    /// that would now loop).
    private static func recordMove(_ db: Database, remote: String, from: String, to: String) throws(CacheError) {
        try db.run("UPDATE moves SET to_path = ? WHERE remote = ? AND to_path = ?", [.text(to), .text(remote), .text(from)])
        try db.run("INSERT OR REPLACE INTO moves(remote, from_path, to_path, moved) VALUES(?, ?, ?, ?)",
                   [.text(remote), .text(from), .text(to), .real(Date().timeIntervalSince1970)])
        try db.run("DELETE FROM moves WHERE remote = ? AND from_path = ?", [.text(remote), .text(to)])
    }

    /// Where the track that was at `path` on `remote` went when it moved on the remote (``move(remote:_:)``), if it
    /// did and an entry is there now; followed through later moves. For `serve`, which redirects an old URL.
    public func movedPath(remote: String, from path: String) throws(CacheError) -> String? {
        try withDatabase { db throws(CacheError) in
            try db.first("""
                SELECT m.to_path FROM moves m JOIN files f ON f.remote = m.remote AND f.path = m.to_path
                WHERE m.remote = ? AND m.from_path = ?
                """, [.text(remote), .text(path)]) { $0.text(0) }
        }
    }

    /// One move inside ``move(remote:_:)``'s transaction (and a savepoint the caller rolls back on nil or a throw).
    private func moveRow(_ db: Database, id: Int64, remote: String, from: String, to file: RemoteFile,
                         folders: inout [String: Int32]) throws(CacheError)
        -> (entry: MovedEntry, stalePartial: String?, renamed: RenamedTrack?)? {
        // Read under the locks and the transaction: `cache clear` may have removed it meanwhile.
        guard let source = try db.first("SELECT \(IndexSchema.rowColumns) FROM files WHERE id = ?", [.int(id)], IndexRow.init),
              source.remote == remote, source.path == from, source.holdsBytes, source.file.size == file.size else { return nil }
        var stalePartial: String?
        if let target = try db.first("SELECT id, generation, state, present_bytes, track_bytes FROM files WHERE remote = ? AND path = ?",
                                     [.text(remote), .text(file.path)], { (id: $0.int(0), generation: $0.int(1), empty: $0.int(2) == 0 && $0.int(3) == 0 && $0.int(4) == 0) }) {
            guard target.empty else { return nil }
            try db.run("DELETE FROM files WHERE id = ?", [.int(target.id)])
            stalePartial = Cache.partialName(id: target.id, generation: target.generation)
        }
        // The entry's own collision key must not make its new name look taken (a rename that changes only case).
        try db.run("UPDATE files SET path_key = ? WHERE id = ?", [.text("\u{1}moving \(id)"), .int(id)])
        let (local, key) = try IndexSchema.localPath(db, remote: remote, path: file.path, rules: nameRules)
        var renamed: RenamedTrack?
        if (source.state == .complete || source.trackBytes > 0) && local != source.localPath {
            var components = source.localPath.split(separator: "/").map(String.init)
            let oldLeaf = components.popLast() ?? ""
            let oldFolder = components.joined(separator: "/")
            let oldParent: Int32
            if let open = folders[oldFolder] {
                oldParent = open
            } else {
                do {
                    oldParent = try fs.openDirectory(components, in: tracksFD, create: false, display: display("tracks/\(source.localPath)"))
                } catch where error.errno == ENOENT {
                    return nil
                }
                folders[oldFolder] = oldParent
            }
            // A track deleted from tracks/ by hand is left to the next pull's check (it is fetched again).
            guard faccessat(oldParent, oldLeaf, F_OK, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
            let (parent, leaf, folder) = try renameIntoTracks(from: oldParent, name: oldLeaf, localPath: local, folders: &folders)
            renamed = RenamedTrack(oldFolder: oldParent, oldName: oldLeaf, newFolder: parent, newName: leaf,
                                   oldFolderPath: oldFolder, newFolderPath: folder)
            if source.file.fingerprint.modified != file.fingerprint.modified {
                var times = file.modified.fileTimes
                _ = utimensat(parent, leaf, &times, AT_SYMLINK_NOFOLLOW)
            }
        }
        let fp = file.fingerprint
        do throws(CacheError) {
            try db.run("""
                UPDATE files SET path = ?, local_path = ?, path_key = ?, provider_id = ?, modified = ?, modified_s = ?,
                    revision = ?, hashes = ?, mime = ?, download_hint = ?, gone = 0
                WHERE id = ?
                """, [.text(file.path), .text(local), .text(key), file.providerID.map(SQLValue.text) ?? .null,
                      .real(file.modified.timeIntervalSince1970), .int(fp.modified), .text(fp.revision),
                      .text(IndexSchema.encodeHashes(file.hashes)), file.mimeType.map(SQLValue.text) ?? .null,
                      file.downloadHint.map(SQLValue.text) ?? .null, .int(id)])
        } catch {
            renamed?.undo(logger)
            throw error
        }
        let complete = source.state == .complete
        return (MovedEntry(complete: complete, presentBytes: complete ? file.size : source.presentBytes), stalePartial, renamed)
    }

    /// Renames `name` in the folder `directory` to `localPath` under `tracks/`, making its folders as needed
    /// (`folders` keeps each folder open, by its path under `tracks/`, for the caller to close). A concurrent removal
    /// (`cache clear`, eviction) prunes folders that became empty, maybe the one just made: the folder is made
    /// again and the rename retried (a few times, then an error). Returns the new folder, name and folder path.
    func renameIntoTracks(from directory: Int32, name: String, localPath: String,
                          folders: inout [String: Int32]) throws(CacheError) -> (parent: Int32, leaf: String, folder: String) {
        var components = localPath.split(separator: "/").map(String.init)
        guard let leaf = components.popLast() else {
            throw CacheError(.corrupt, "empty local path for \(name)", path: localPath)
        }
        let folder = components.joined(separator: "/")
        var attempt = 0
        while true {
            attempt += 1
            let parent: Int32
            if let open = folders[folder] {
                parent = open
            } else {
                do {
                    parent = try fs.openDirectory(components, in: tracksFD, create: true, display: display("tracks/\(localPath)"))
                } catch where error.errno == ENOENT && attempt < 8 {
                    // A folder on the way was made, then pruned before it could be entered: make it again.
                    continue
                }
                folders[folder] = parent
            }
            if renameat(directory, name, parent, leaf) == 0 { return (parent, leaf, folder) }
            let error = fs.error("rename", display("tracks/\(localPath)"))
            if error.errno == ENOENT && attempt < 8 && parent != directory {
                // The folder was pruned under us: open (make) it again.
                folders[folder] = nil
                Glibc.close(parent)
                continue
            }
            if error.errno == ENOENT && faccessat(directory, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 {
                // The file and its folder are there, and still no name: exFAT (through FUSE) refuses a name so.
                throw CacheError.unusableName(display("tracks/\(localPath)"), reason: "rename: the disk refuses the name",
                                              errno: ENOENT)
            }
            throw error
        }
    }
}

/// A track ``Cache/move(remote:_:)`` renamed: its old and new folder (open, and as paths under `tracks/`) and names.
private struct RenamedTrack {
    var oldFolder: Int32
    var oldName: String
    var newFolder: Int32
    var newName: String
    var oldFolderPath: String
    var newFolderPath: String

    /// Renames it back (its index update failed): `tracks/` never holds a file under a name the index does not know.
    func undo(_ logger: Logger) {
        if renameat(newFolder, newName, oldFolder, oldName) != 0 {
            logger.warning("tracks/\(newFolderPath)/\(newName) could not be moved back after a failed index update; the "
                + "next pull fetches it again")
        }
    }
}

extension IndexRow {
    /// The entry holds bytes worth keeping: a complete track, present bytes of a partial, or an older version
    /// waiting in `tracks/`.
    var holdsBytes: Bool { state == .complete || presentBytes > 0 || trackBytes > 0 }
}
