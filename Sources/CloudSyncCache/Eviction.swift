#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

extension Cache {
    /// Frees space: first entries not accessed for ``CacheLimits/maxAge``, then least recently accessed entries
    /// until the bytes on disk (complete tracks plus partials' present bytes) are within ``CacheLimits/maxSize``.
    /// Pinned entries are never evicted; entries another process is writing are skipped (their writer lock is
    /// held). Evicting deletes an entry's bytes (track and partial) and keeps its index row, as `missing`.
    /// With `dryRun`, reports what would go and changes nothing.
    public func evict(dryRun: Bool = false, now: Date = Date()) throws(CacheError) -> EvictionReport {
        var report = EvictionReport(dryRun: dryRun)
        var total = try withDatabase { db throws(CacheError) in
            try db.first("SELECT COALESCE(SUM(present_bytes + track_bytes), 0) FROM files", []) { $0.int(0) } ?? 0
        }
        report.bytesBefore = total
        let ageLimit = limits.maxAge.map { now.timeIntervalSince1970 - $0 }
        // Oldest access first, a page at a time (a big library never sits in memory). Past the first entry
        // that is neither too old nor needed for size, no later one is either: access times only grow, the
        // total only shrinks.
        var after: (lastAccess: Double, id: Int64) = (-Double.greatestFiniteMagnitude, 0)
        scan: while true {
            let page = try withDatabase { db throws(CacheError) in
                try db.query("""
                    SELECT \(IndexSchema.rowColumns) FROM files
                    WHERE present_bytes + track_bytes > 0 AND (last_access > ? OR (last_access = ? AND id > ?))
                    ORDER BY last_access, id LIMIT 500
                    """, [.real(after.lastAccess), .real(after.lastAccess), .int(after.id)], IndexRow.init)
            }
            guard let last = page.last else { break }
            after = (last.lastAccess, last.id)
            for row in page {
                let bytes = row.presentBytes + row.trackBytes
                let reason: String
                if let ageLimit, row.lastAccess < ageLimit {
                    reason = "age"
                } else if total > limits.maxSize {
                    reason = "size"
                } else {
                    break scan
                }
                if row.pinned {
                    report.keptPinned += 1
                    continue
                }
                guard try drop(row, dryRun: dryRun) else {
                    report.skippedBusy.append("\(row.remote):\(row.path)")
                    continue
                }
                total -= bytes
                report.evicted.append(EvictedEntry(remote: row.remote, path: row.path, bytes: bytes,
                                                   lastAccess: Date(timeIntervalSince1970: row.lastAccess), reason: reason))
            }
        }
        report.bytesAfter = total
        if !dryRun, !report.evicted.isEmpty {
            logger.info("evicted \(report.evicted.count) entries, freed \(ByteSize.format(report.freedBytes))")
        }
        return report
    }

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
        report.bytesBefore = rows.reduce(0) { $0 + $1.presentBytes + $1.trackBytes }
        report.bytesAfter = report.bytesBefore
        for row in rows {
            if row.pinned {
                report.keptPinned += 1
                continue
            }
            let bytes = row.presentBytes + row.trackBytes
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
    private func drop(_ row: IndexRow, dryRun: Bool) throws(CacheError) -> Bool {
        guard let lock = try EntryLock.tryAcquire(cache: self, id: row.id, wait: false) else { return false }
        defer { withExtendedLifetime(lock) {} }
        if dryRun { return true }
        let markMissing = { () throws(CacheError) -> Int in
            try self.withDatabase { db throws(CacheError) in
                try db.run("""
                    UPDATE files SET state = 0, ranges = NULL, present_bytes = 0, track_bytes = 0
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
