#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

extension Cache {
    /// Deletes the cached bytes of every unpinned entry of `remote` (all remotes when nil), keeping the index
    /// rows (as `missing`) and cursors. Pinned entries are kept (counted in `keptPinned`); entries being
    /// written by another process are skipped.
    public func clear(remote: String?) throws(CacheError) -> EvictionReport {
        let rows = try withDatabase { db throws(CacheError) in
            if let remote {
                return try db.query("SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND present_bytes + track_bytes > 0",
                                    [.text(remote)], IndexRow.init)
            }
            return try db.query("SELECT \(IndexSchema.rowColumns) FROM files WHERE present_bytes + track_bytes > 0", [], IndexRow.init)
        }
        var report = EvictionReport(dryRun: false)
        report.bytesBefore = rows.reduce(0) { $0.addingSaturating($1.presentBytes).addingSaturating($1.trackBytes) }
        report.bytesAfter = report.bytesBefore
        for row in rows {
            if row.pinned {
                report.keptPinned += 1
                continue
            }
            let bytes = row.presentBytes.addingSaturating(row.trackBytes)
            guard try drop(row, dryRun: false) else {
                report.skippedBusy.append("\(row.remote):\(row.path)")
                continue
            }
            report.bytesAfter -= bytes
            report.evicted.append(EvictedEntry(remote: row.remote, path: row.path, bytes: bytes,
                                               lastAccess: Date(timeIntervalSince1970: row.lastAccess), reason: "clear"))
        }
        return report
    }

    /// Re-hashes every complete file that has a provider hash with `hasher` (given the track's URL and the
    /// expected hash; returns the computed value). A mismatch or a vanished file is repaired: the file is
    /// deleted and the entry marked missing, so the next pull fetches it again.
    public func verify(hasher: (URL, ContentHash) throws -> String) throws -> VerifyReport {
        let rows = try withDatabase { db throws(CacheError) in
            try db.query("SELECT \(IndexSchema.rowColumns) FROM files WHERE state = 2 ORDER BY remote, path", [], IndexRow.init)
        }
        var report = VerifyReport()
        for row in rows {
            let url = tracksURL.appendingPathComponent(row.localPath, isDirectory: false)
            var st = stat()
            if lstat(url.path, &st) != 0 || (st.st_mode & S_IFMT) != S_IFREG {
                report.vanished.append("\(row.remote):\(row.path)")
                _ = try drop(row, dryRun: false)
                continue
            }
            guard let expected = row.file.preferredHash else {
                report.skippedNoHash += 1
                continue
            }
            report.checked += 1
            let computed = try hasher(url, expected)
            if !expected.matches(computed) {
                report.mismatched.append("\(row.remote):\(row.path)")
                logger.warning("\(row.remote):\(row.path) does not match its \(expected.kind.rawValue) hash; removed")
                _ = try drop(row, dryRun: false)
            }
        }
        return report
    }

    /// Deletes one entry's bytes under its writer lock (non-blocking); false if another writer holds it.
    /// The index is updated first (entry missing), then the files are removed.
    func drop(_ row: IndexRow, dryRun: Bool) throws(CacheError) -> Bool {
        guard let lock = try EntryLock.tryAcquire(cache: self, id: row.id, wait: false) else { return false }
        defer { withExtendedLifetime(lock) {} }
        if dryRun { return true }
        // A new generation: a reader holding the removed file sees its generation end (`.changed`) and never takes
        // the claims of a file written later under the same name for its own.
        let markMissing = { () throws(CacheError) -> Int in
            try self.withDatabase { db throws(CacheError) in
                try db.run("""
                    UPDATE files SET state = 0, ranges = NULL, present_bytes = 0, track_bytes = 0, head = 0,
                        validator = NULL, generation = generation + 1
                    WHERE id = ? AND generation = ?
                    """, [.int(row.id), .int(row.generation)])
            }
        }
        let changed: Int
        do {
            changed = try markMissing()
        } catch where error.code == .diskFull {
            // The disk is so full that the index cannot even record the eviction. Delete the files first (a
            // reader then gets "not found", never wrong bytes; a writer sees the partial is gone and restarts
            // it), then record it in the space just freed.
            logger.warning("disk full: removing \(row.remote):\(row.path) before recording it in the index")
            removeTrack(row.localPath)
            removePartial(Cache.partialName(id: row.id, generation: row.generation))
            return try markMissing() == 1
        }
        guard changed == 1 else { return false }
        removeTrack(row.localPath)
        removePartial(Cache.partialName(id: row.id, generation: row.generation))
        return true
    }
}
