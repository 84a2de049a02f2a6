#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

/// One entry as the budget planner needs it: one lean row per track, read in one indexed scan.
public struct PlanningRow: Sendable, Hashable {
    public var id: Int64
    public var remote: String
    public var path: String
    public var size: Int64
    public var mimeType: String?
    public var pinned: Bool
    public var state: CacheEntryState
    /// Bytes of the current version in its partial file (0 when complete).
    public var partialBytes: Int64
    /// Bytes of an older version still in `tracks/` (0 when none or complete).
    public var outdatedBytes: Int64
    /// The start set's bytes, when known.
    public var startBytes: Int64?
    /// The key of the policy the start set was computed under (nil: before policies were recorded).
    public var startPolicy: String?
    /// The track's duration in seconds, when its start set told it.
    public var duration: Double?
    /// The start set is known and present (always true when complete).
    public var headPresent: Bool
    public var lastPlayed: Double
    public var lastAccess: Double
    public var added: Double
    public var modified: Double
}

/// How ``Cache/shrinkToHead(id:)`` or ``Cache/evictEntry(id:)`` ended.
public enum ReductionOutcome: Sendable, Hashable {
    /// Done; `freed` bytes left the disk.
    case done(freed: Int64)
    /// Another process is writing the entry: left as it is.
    case busy
    /// Nothing to do (already at or below the asked level, or gone).
    case unchanged
    /// The start set is unknown or not all present: the entry cannot keep a head (evict it, or analyse it first).
    case noHead
}

extension Cache {
    /// Every entry, for planning (all remotes: the budget is shared by every remote of the cache).
    public func planningRows() throws(CacheError) -> [PlanningRow] {
        try withDatabase { db throws(CacheError) in
            try db.query("""
                SELECT id, remote, path, size, mime, pinned, state, present_bytes, track_bytes, start_set IS NOT NULL,
                       start_bytes, head, last_played, last_access, added, modified, start_policy, duration
                FROM files
                """) { row in
                let state: CacheEntryState = switch row.int(6) {
                case 2: .complete
                case 1: .partial
                default: .missing
                }
                return PlanningRow(id: row.int(0), remote: row.text(1), path: row.text(2), size: row.int(3),
                                   mimeType: row.optionalText(4), pinned: row.int(5) != 0, state: state,
                                   partialBytes: state == .complete ? 0 : row.int(7),
                                   outdatedBytes: state == .complete ? 0 : row.int(8),
                                   startBytes: row.int(9) != 0 ? row.int(10) : nil,
                                   startPolicy: row.optionalText(16), duration: row.isNull(17) ? nil : row.double(17),
                                   headPresent: state == .complete || row.int(11) != 0,
                                   lastPlayed: row.double(12), lastAccess: row.double(13), added: row.double(14),
                                   modified: row.double(15))
            }
        }
    }

    /// `remote`'s entries whose start set was computed under another policy than `policy` (the engine's key;
    /// `legacy`: the policy taken for start sets recorded before policies were), in path order, each with whether
    /// it holds bytes (from which the start set can be derived again).
    public func startSetsOfOtherPolicies(remote: String, policy: String, legacy: String)
        throws(CacheError) -> [(path: String, holdsBytes: Bool)] {
        try withDatabase { db throws(CacheError) in
            try db.query("""
                SELECT path, state = 2 OR present_bytes > 0 FROM files
                WHERE remote = ? AND start_set IS NOT NULL AND coalesce(start_policy, ?) != ?
                ORDER BY path
                """, [.text(remote), .text(legacy), .text(policy)]) { (path: $0.text(0), holdsBytes: $0.int(1) != 0) }
        }
    }

    /// The remotes with entries whose start set was computed under another policy than `policy` (see
    /// ``startSetsOfOtherPolicies(remote:policy:legacy:)``), in name order.
    public func remotesWithStartSetsOfOtherPolicies(policy: String, legacy: String) throws(CacheError) -> [String] {
        try withDatabase { db throws(CacheError) in
            try db.query("""
                SELECT DISTINCT remote FROM files
                WHERE start_set IS NOT NULL AND coalesce(start_policy, ?) != ?
                ORDER BY remote
                """, [.text(legacy), .text(policy)]) { $0.text(0) }
        }
    }

    /// Forgets the start sets of `remote`'s `paths` (the tags read from them stay): each is analysed again
    /// when next fetched as a head, or planned at an estimate until then. One transaction; an entry another
    /// writer holds is left as it is. Returns the paths forgotten.
    public func forgetStartSets(remote: String, paths: [String]) throws(CacheError) -> [String] {
        var forgotten: [String] = []
        var locks: [EntryLock] = []
        defer { withExtendedLifetime(locks) {} }
        try withDatabase { db throws(CacheError) in
            try db.withTransaction { () throws(CacheError) in
                for path in paths {
                    guard let id = try db.first("SELECT id FROM files WHERE remote = ? AND path = ?", [.text(remote), .text(path)],
                                                { $0.int(0) }),
                          let lock = try EntryLock.tryAcquire(cache: self, id: id, wait: false) else { continue }
                    locks.append(lock)
                    try db.run("UPDATE files SET start_set = NULL, start_bytes = 0, head = 0, start_policy = NULL WHERE id = ?",
                               [.int(id)])
                    forgotten.append(path)
                }
            }
        }
        return forgotten
    }

    /// Bytes the cache holds on disk: complete tracks, partials' present bytes, older versions awaiting
    /// replacement. Summed in checked arithmetic (a hostile index size never traps).
    public func heldBytes() throws(CacheError) -> Int64 {
        try withDatabase { db throws(CacheError) in
            // total() is a float sum: it cannot overflow where sum() would raise an error.
            try db.first("SELECT total(present_bytes) + total(track_bytes) FROM files") { row -> Int64 in
                let value = row.double(0)
                return value >= Double(Int64.max) ? .max : Int64(max(0, value))
            } ?? 0
        }
    }

    /// Bytes free for an unprivileged user on the cache's filesystem (`statvfs` f_bavail × f_frsize).
    public func freeDiskBytes() throws(CacheError) -> Int64 {
        var st = statvfs()
        guard fstatvfs(rootFD, &st) == 0 else {
            throw CacheError.system("statvfs", errno: errno, path: rootPath, cacheRoot: rootPath)
        }
        let (bytes, overflow) = Int64(clamping: st.f_bavail).multipliedReportingOverflow(by: Int64(clamping: st.f_frsize))
        return overflow ? .max : bytes
    }

    /// Records that a player read `path` of `remote` through `serve` beyond its start: the planner ranks played
    /// tracks first. Best effort (a full disk must not stop playback).
    public func recordPlay(remote: String, path: String, at date: Date = Date()) {
        do {
            try withDatabase { db throws(CacheError) in
                _ = try db.run("UPDATE files SET last_played = ?, last_access = ? WHERE remote = ? AND path = ?",
                               [.real(date.timeIntervalSince1970), .real(date.timeIntervalSince1970), .text(remote), .text(path)])
            }
        } catch {
            logger.debug("could not record the play of \(remote):\(path): \(error)")
        }
    }

    /// Drops every byte of entry `id` (its head too) under its writer lock, taken non-blocking; the index row
    /// stays (missing), with what is known of the version (start set, tags). Index first (a new generation), then the files.
    public func evictEntry(id: Int64) throws(CacheError) -> ReductionOutcome {
        guard let row = try row(id: id) else { return .unchanged }
        let bytes = row.presentBytes.addingSaturating(row.trackBytes)
        if bytes == 0 { return .unchanged }
        return try drop(row, dryRun: false) ? .done(freed: bytes) : .busy
    }

    /// Shrinks entry `id` to its start set: a complete track leaves `tracks/`, a partial loses the bytes beyond
    /// the start set, and an older version awaiting replacement goes. Under the entry's writer lock (taken
    /// non-blocking: `.busy` when another process writes it).
    ///
    /// The start set is copied into a new partial file of a new generation (fsynced before the index says so),
    /// then the old file is unlinked — never changed in place, so a reader that holds it keeps reading correct
    /// bytes (``EntryReader``), and a kill -9 at any point leaves the index claiming only bytes on disk.
    public func shrinkToHead(id: Int64) throws(CacheError) -> ReductionOutcome {
        guard let first = try row(id: id) else { return .unchanged }
        guard let lock = try EntryLock.tryAcquire(cache: self, id: first.id, wait: false) else { return .busy }
        defer { withExtendedLifetime(lock) {} }
        guard let row = try self.row(id: id) else { return .unchanged }
        guard let startSet = row.startSet, !startSet.isEmpty, row.head || row.state == .complete else { return .noHead }
        let complete = row.state == .complete
        let kept = startSet.byteCount
        let held = complete ? row.file.size : row.presentBytes.addingSaturating(row.trackBytes)
        if !complete && row.trackBytes == 0 && row.presentBytes <= kept { return .unchanged }

        let oldPartial = Cache.partialName(id: row.id, generation: row.generation)
        if !complete && row.presentBytes <= kept {
            // Only an older version to drop; the partial is the head already.
            try dropOutdatedTrack(row)
            return .done(freed: row.trackBytes)
        }
        // 1. The start set into a new file of the next generation, durable before the index says so (an
        // encrypted entry keeps the whole blocks holding it, re-sealed under the new generation's key).
        let newGeneration = row.generation + 1
        let newName = Cache.partialName(id: row.id, generation: newGeneration)
        let keptRanges = row.sealed ? (SealedLayout(plainSize: row.file.size)?.aligned(startSet) ?? startSet) : startSet
        let source = try openEntryFile(row)
        let target = try createEntryFile(newName, row: row, generation: newGeneration, sealed: row.sealed)
        do throws(CacheError) {
            try copyPlaintext(keptRanges, from: source, to: target)
            do throws(Errno) {
                try io.fdatasync(target.fd)
            } catch {
                throw CacheError.system("fdatasync", errno: error.rawValue, path: target.display, cacheRoot: rootPath)
            }
        } catch {
            _ = unlinkat(partialFD, newName, 0)
            throw error
        }
        // 2. The index: the new generation holds the start set; a complete track is still on disk until step 3.
        let changed = try withDatabase { db throws(CacheError) in
            try db.run("""
                UPDATE files SET generation = ?, state = 1, ranges = ?, present_bytes = ?, head = 1,
                    track_bytes = ?
                WHERE id = ? AND generation = ?
                """, [.int(newGeneration), .blob(keptRanges.encoded), .int(keptRanges.byteCount),
                      .int(complete ? row.file.size : row.trackBytes), .int(row.id), .int(row.generation)])
        }
        guard changed == 1 else {
            _ = unlinkat(partialFD, newName, 0)
            return .unchanged
        }
        // 3. The old files go (a reader holding one keeps its inode).
        if !complete { removePartial(oldPartial) }
        if complete || row.trackBytes > 0 {
            var updated = row
            updated.generation = newGeneration
            try dropOutdatedTrack(updated)
        }
        return .done(freed: max(0, held - keptRanges.byteCount))
    }

    /// Removes the file in `tracks/` of an entry that is not complete (an older version, or the copy a shrink
    /// replaced) and records that it is gone.
    private func dropOutdatedTrack(_ row: IndexRow) throws(CacheError) {
        removeTrack(row.localPath)
        try withDatabase { db throws(CacheError) in
            _ = try db.run("UPDATE files SET track_bytes = 0 WHERE id = ? AND generation = ? AND state != 2",
                           [.int(row.id), .int(row.generation)])
        }
    }
}
