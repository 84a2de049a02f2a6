#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation
import Synchronization

/// The shared on-disk cache of one user: an SQLite index (`index.sqlite`, WAL), complete tracks under
/// `tracks/<remote>/<path>`, sparse partial files under `partial/`, lock files under `locks/`.
/// Several processes (a cron pull, an interactive pull, `serve`) may open the same root at once; every
/// operation is safe against the others (see docs/cache.md). Within a process one `Cache` is shared by all
/// tasks; its index calls are serialized.
public final class Cache: Sendable {
    public let root: URL
    /// `root.path`, computed once: error paths and display names are built from it on hot paths (every read of
    /// a partial file), and `URL.path` is not free.
    public let rootPath: String
    public let limits: CacheLimits
    let logger: Logger
    let io: FileIO
    let fs: SafeFS
    let rootFD: Int32
    let tracksFD: Int32
    let partialFD: Int32
    let locksFD: Int32
    let store: Mutex<Database>
    /// A second connection for ``row(id:)``, the read every file a pull opens makes: it does not wait while the
    /// writer's group commit holds `store` (renames and a transaction: up to milliseconds, with only two
    /// cooperative threads on a two-core machine). Nil when the index is open exclusively (a full disk).
    private let reader: ReadConnection?
    /// Runs checkpoints and group commits of this cache's writers, off every caller's thread.
    let writer: CacheWriter
    /// Every entry writer lock this cache holds, on one descriptor of `locks/entries.lock`.
    let entryLocks = EntryLockTable()
    /// The key for sealed entries, and whether new files are sealed (`cache.encrypt`).
    public let encryption: CacheEncryption
    /// Whether a bookkeeping failure on a full disk was logged (``warnBookkeepingFailure(_:_:)``).
    private let loggedDiskFull = Atomic<Bool>(false)

    /// Opens the cache at `root`, creating the layout (root mode 0700) and migrating the index schema.
    /// `encryption` gives the key of an encrypted cache and whether new files are sealed; unless
    /// `checkingMode` is false (the conversions, `cache encrypt`/`decrypt`), it must agree with what the cache
    /// holds (``CacheEncryption/check(_:encryption:root:)``).
    /// Throws ``CacheError`` (`.io`, `.corrupt` for an index from a newer cloudsync or a damaged one,
    /// `.wrongKey`, `.keyMissing`, `.encryptionMismatch`).
    public static func open(root: URL, limits: CacheLimits = CacheLimits(), logger: Logger = .silent,
                            io: FileIO = .system, encryption: CacheEncryption = .off,
                            checkingMode: Bool = true) throws(CacheError) -> Cache {
        let configured = root.standardizedFileURL.path
        if mkdir(configured, 0o700) != 0, errno != EEXIST {
            do {
                try FileManager.default.createDirectory(atPath: configured, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw CacheError(.io, "Cannot create the cache directory \(configured): \(error). Check cache.dir and "
                    + "its permissions.", path: configured)
            }
        }
        // cache.dir may itself be (or lie under) a symlink — a cache moved to a bigger disk: the user's choice, so
        // the root is resolved once. Nothing inside it is followed (SafeFS), and SQLite opens no path through a
        // link (SQLITE_OPEN_NOFOLLOW: "unable to open database file" before).
        let rootPath = realpath(configured, nil).map { resolved in
            defer { free(resolved) }
            return String(cString: resolved)
        } ?? configured
        let fs = SafeFS(rootPath: rootPath)
        let rootFD = Glibc.open(rootPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard rootFD >= 0 else { throw fs.error("open", rootPath) }
        var opened: [Int32] = [rootFD]
        do {
            for name in ["tracks", "partial", "locks"] {
                opened.append(try fs.openDirectory([name], in: rootFD, create: true, display: "\(rootPath)/\(name)"))
            }
            // Creating and migrating the index happen under an exclusive flock, so a cron pull and a serve started
            // together on a fresh machine do not race to switch a new index to WAL (SQLITE_BUSY at once).
            let initLock = Self.lockIndexInitialisation(locksFD: opened[3])
            defer { if initLock >= 0 { Glibc.close(initLock) } }
            let db: Database
            var exclusive = false
            do {
                db = try Database(path: rootPath + "/index.sqlite")
            } catch where Self.isSharedMemoryFailure(error) {
                exclusive = true
                // A full disk: SQLite cannot grow the -shm file of the first connection. Open exclusively (the WAL
                // index in memory) so reading and freeing space still work.
                logger.warning("the disk holding the cache is full: the index is opened exclusively (other cloudsync "
                    + "processes wait for this one)")
                db = try Database(path: rootPath + "/index.sqlite", exclusive: true)
            }
            try IndexSchema.migrate(db)
            try CacheEncryption.check(db, encryption: encryption, root: rootPath, checkingMode: checkingMode)
            if encryption.sealsNewFiles,
               try db.first("SELECT 1 FROM settings WHERE name = ?", [.text(alignedStartSetsSetting)], { $0.int(0) }) == nil {
                do {
                    let aligned = try alignStartSetsToSealedBlocks(db)
                    if aligned > 0 { logger.info("counted the start sets of \(aligned) tracks as the whole encrypted blocks they take on disk") }
                } catch {
                    // A full disk, a busy index: the plans undercount encrypted heads a little until a later open.
                    logger.warning("could not count the start sets as encrypted blocks yet: \(error)")
                }
            }
            let nameRules = try Self.nameRules(db, partialFD: opened[2], logger: logger)
            // Only an optimisation: without it every read goes through `db`.
            let reader = exclusive ? nil : try? Database(path: rootPath + "/index.sqlite", reader: true)
            return Cache(root: URL(fileURLWithPath: rootPath, isDirectory: true), limits: limits, logger: logger,
                         io: io, fs: fs, fds: opened, db: db, reader: reader, encryption: encryption, nameRules: nameRules)
        } catch {
            for fd in opened { Glibc.close(fd) }
            throw error
        }
    }

    /// An open that failed because SQLite could not make or grow the `-shm` file (or the disk is full).
    static func isSharedMemoryFailure(_ error: CacheError) -> Bool {
        guard let code = error.errno else { return false }
        // SQLITE_FULL (13); SQLITE_IOERR_SHMOPEN (4618), _SHMSIZE (4874), _SHMMAP (5386), _SHMLOCK (5130).
        return code == 13 || [4618, 4874, 5130, 5386].contains(code) || error.code == .diskFull
    }

    /// Takes `locks/index.lock` exclusively (blocking; held for the few milliseconds of opening an index).
    /// Returns the descriptor to close, or -1 when the lock file cannot be made (a full disk): the open then goes
    /// on unlocked, which is what an existing index needs anyway.
    private static func lockIndexInitialisation(locksFD: Int32) -> Int32 {
        let fd = openat(locksFD, "index.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return -1 }
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR {
                Glibc.close(fd)
                return -1
            }
        }
        return fd
    }

    /// Which names the cache's file system takes, found when the cache opens (``nameRules(_:partialFD:logger:)``).
    public let nameRules: LocalPath.NameRules

    /// The rules for names under `tracks/`: `portable` once the index says so (kept: the names given stay valid),
    /// else `portable` when the file system refuses a name with `"*:<>?|` that it takes without them — FAT,
    /// exFAT, NTFS on a USB stick or SD card, whose drivers answer EINVAL, ENOENT or EPERM for such a name, so
    /// before this the first track named `What Is Hip?` failed its rename and stopped the pull. Found by creating two
    /// files in `partial/` (no player watches it); recorded in the index, whose entries are then given portable
    /// names (``IndexSchema/relocateUnportable(_:)``).
    static func nameRules(_ db: Database, partialFD: Int32, logger: Logger) throws(CacheError) -> LocalPath.NameRules {
        let stored = try db.first("SELECT value FROM settings WHERE name = 'file_names'") { $0.text(0) }
        if stored == LocalPath.NameRules.portable.rawValue { return .portable }
        // A file system found to take every name is not asked again (no write to the disk at each open, no event for
        // whoever watches the folder) until the cache is on another one.
        let disk = fileSystemIdentity(partialFD)
        if let disk, stored == "posix " + disk { return .posix }
        guard refusesPortableNames(in: partialFD) else {
            if let disk { _ = try? db.run("INSERT OR REPLACE INTO settings(name, value) VALUES ('file_names', ?)", [.text("posix " + disk)]) }
            return .posix
        }
        do {
            let moved = try db.withTransaction { () throws(CacheError) -> Int in
                try db.run("INSERT OR REPLACE INTO settings(name, value) VALUES ('file_names', 'portable')")
                return try IndexSchema.relocateUnportable(db)
            }
            logger.info("the cache's file system takes no \" * : < > ? | in names, nor a trailing dot or space (FAT, exFAT, "
                + "NTFS): tracks get look-alike characters instead (：？＂); \(moved) renamed in the index")
        } catch {
            // A full disk: this run still names new entries portably; the index learns it on a later open.
            logger.warning("the cache's file system refuses some characters in names, and the index could not record it: \(error)")
        }
        return .portable
    }

    /// The file system `fd` is on: its device and id (`fstat`, `fstatvfs`), or nil when it gives no id to tell it by.
    static func fileSystemIdentity(_ fd: Int32) -> String? {
        var info = statvfs()
        var st = stat()
        guard fstatvfs(fd, &info) == 0, fstat(fd, &st) == 0, info.f_fsid != 0 else { return nil }
        return String(UInt64(st.st_dev), radix: 16) + ":" + String(UInt64(info.f_fsid), radix: 16)
    }

    /// Whether the folder's file system refuses a name with `"*:<>?|` while it takes a plain one.
    static func refusesPortableNames(in folderFD: Int32) -> Bool {
        func creates(_ name: String) -> Bool {
            for _ in 0 ..< 2 {
                let fd = openat(folderFD, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                if fd >= 0 {
                    Glibc.close(fd)
                    unlinkat(folderFD, name, 0)
                    return true
                }
                guard errno == EEXIST else { return false }
                unlinkat(folderFD, name, 0)  // left by a process killed between the two calls
            }
            return false
        }
        return !creates(".name-probe \"*:<>?|") && creates(".name-probe")
    }

    private init(root: URL, limits: CacheLimits, logger: Logger, io: FileIO, fs: SafeFS, fds: [Int32], db: sending Database,
                 reader: sending Database?, encryption: CacheEncryption, nameRules: LocalPath.NameRules) {
        self.nameRules = nameRules
        self.root = root
        rootPath = root.path
        self.encryption = encryption
        tracksURL = root.appendingPathComponent("tracks", isDirectory: true)
        self.limits = limits
        writer = CacheWriter(batchDelay: limits.batchDelay)
        self.logger = logger
        self.io = io
        self.fs = fs
        rootFD = fds[0]
        tracksFD = fds[1]
        partialFD = fds[2]
        locksFD = fds[3]
        store = Mutex(db)
        if let reader { self.reader = ReadConnection(reader) } else { self.reader = nil }
    }

    deinit {
        for fd in [rootFD, tracksFD, partialFD, locksFD] { Glibc.close(fd) }
    }

    /// `root/tracks`: point a player's music directory here.
    public let tracksURL: URL

    func withDatabase<T: Sendable>(_ body: (Database) throws(CacheError) -> T) throws(CacheError) -> T {
        try store.withLock { (db: inout Database) throws(CacheError) -> T in try body(db) }
    }

    static func partialName(id: Int64, generation: Int64) -> String { "\(id)-\(generation).part" }

    // MARK: Index of remote files

    /// Upserts a batch of files of `remote` in one transaction (a listing page of 20,000 files is fine).
    /// A new file gets a local name (``LocalPath``), disambiguated when it collides with another entry's.
    /// When a file's fingerprint (size, modified, revision) changed, its partial bytes are dropped; a complete
    /// older copy in `tracks/` stays until the new version completes. Returns, per file in order, how it related to
    /// the index before (as ``compare(remote:files:)`` would have said).
    @discardableResult
    public func upsert(remote: String, files: some Sequence<RemoteFile>) throws(CacheError) -> [ListedFileStatus] {
        var stalePartials: [String] = []
        let outcomes = try withDatabase { db throws(CacheError) in
            try db.withTransaction { () throws(CacheError) -> [ListedFileStatus] in
                var outcomes: [ListedFileStatus] = []
                outcomes.reserveCapacity(files.underestimatedCount)
                for file in files {
                    let (outcome, stale) = try IndexSchema.upsert(db, remote: remote, file: file, rules: nameRules)
                    outcomes.append(outcome)
                    if let stale { stalePartials.append(stale) }
                }
                return outcomes
            }
        }
        for name in stalePartials { removePartial(name) }
        return outcomes
    }

    /// How each of `files` of `remote` relates to the index, in order, in one read transaction. Writes nothing
    /// (a dry run plans with it too).
    public func compare(remote: String, files: some Sequence<RemoteFile>) throws(CacheError) -> [ListedFileStatus] {
        try withDatabase { db throws(CacheError) in
            try db.withTransaction { () throws(CacheError) -> [ListedFileStatus] in
                var statuses: [ListedFileStatus] = []
                statuses.reserveCapacity(files.underestimatedCount)
                for file in files { statuses.append(try IndexSchema.status(db, remote: remote, file: file)) }
                return statuses
            }
        }
    }

    /// Upserts one file; see ``upsert(remote:files:)``.
    @discardableResult
    public func upsert(remote: String, file: RemoteFile) throws(CacheError) -> ListedFileStatus {
        try upsert(remote: remote, files: [file])[0]
    }

    /// Marks the entries at `paths` of `remote` as deleted remotely (kept by a pull with `--no-delete`); the time of
    /// the first such listing stays. A later listing of the file clears the mark. Unknown paths are ignored.
    public func markDeletedRemotely(remote: String, paths: [String], at date: Date = Date()) throws(CacheError) {
        guard !paths.isEmpty else { return }
        try withDatabase { db throws(CacheError) in
            try db.withTransaction { () throws(CacheError) in
                for path in paths {
                    try db.run("UPDATE files SET gone = ? WHERE remote = ? AND path = ? AND gone = 0",
                               [.real(max(date.timeIntervalSince1970, 1)), .text(remote), .text(path)])
                }
            }
        }
    }

    /// Removes the entries at `paths` of `remote`: index rows, complete files in `tracks/`, partials.
    /// Pinned entries are kept and reported. Unknown paths are ignored.
    @discardableResult
    public func remove(remote: String, paths: [String]) throws(CacheError) -> RemovalReport {
        try removeRows(remote: remote, sql: "SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND path = ?",
                       parameterSets: paths.map { [.text(remote), .text($0)] })
    }

    /// Removes one entry; see ``remove(remote:paths:)``.
    @discardableResult
    public func remove(remote: String, path: String) throws(CacheError) -> RemovalReport {
        try remove(remote: remote, paths: [path])
    }

    /// Removes the file at `prefix` and every file under the folder `prefix` (exact, case-sensitive path
    /// match); an empty prefix removes the whole remote. Pinned entries are kept and reported.
    @discardableResult
    public func removeTree(remote: String, prefix: String) throws(CacheError) -> RemovalReport {
        let trimmed = prefix.split(separator: "/").joined(separator: "/")
        if trimmed.isEmpty {
            return try removeRows(remote: remote, sql: "SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ?",
                                  parameterSets: [[.text(remote)]])
        }
        // '/' is 0x2F and '0' is 0x30: [prefix/, prefix0) is exactly the paths under the folder.
        return try removeRows(remote: remote,
                              sql: "SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND (path = ? OR (path >= ? AND path < ?))",
                              parameterSets: [[.text(remote), .text(trimmed), .text(trimmed + "/"), .text(trimmed + "0")]])
    }

    /// Removes the entry whose provider id is `providerID` (a file id; the cache does not know folder ids).
    @discardableResult
    public func remove(remote: String, providerID: String) throws(CacheError) -> RemovalReport {
        try removeRows(remote: remote, sql: "SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND provider_id = ?",
                       parameterSets: [[.text(remote), .text(providerID)]])
    }

    private func removeRows(remote: String, sql: String, parameterSets: [[SQLValue]]) throws(CacheError) -> RemovalReport {
        var report = RemovalReport()
        var doomed: [IndexRow] = []
        try withDatabase { db throws(CacheError) in
            try db.withTransaction { () throws(CacheError) in
                for parameters in parameterSets {
                    for row in try db.query(sql, parameters, IndexRow.init) {
                        if row.pinned {
                            report.keptPinned.append(row.path)
                        } else {
                            try db.run("DELETE FROM files WHERE id = ?", [.int(row.id)])
                            report.removed.append(row.path)
                            doomed.append(row)
                        }
                    }
                }
            }
        }
        // Index first, then files: a crash in between leaves orphan files, never an index claiming missing ones.
        for row in doomed {
            removeTrack(row.localPath)
            removePartial(Cache.partialName(id: row.id, generation: row.generation))
        }
        return report
    }

    func removeTrack(_ localPath: String) {
        do {
            try fs.removeFile(localPath, in: tracksFD, keepingParents: 1)
        } catch {
            logger.warning("could not remove \(localPath) from the cache: \(error)")
        }
    }

    func removePartial(_ name: String) {
        if unlinkat(partialFD, name, 0) != 0, errno != ENOENT {
            logger.warning("could not remove partial/\(name): \(String(cString: strerror(errno)))")
        }
    }

    /// Every indexed entry of `remote` (all remotes when nil), ordered by remote then path. Fast enough for
    /// `ls --offline` over 100,000 tracks (one indexed scan).
    public func entries(remote: String? = nil) throws(CacheError) -> [CacheEntryInfo] {
        let rows = try withDatabase { db throws(CacheError) in
            if let remote {
                return try db.query("SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? ORDER BY remote, path",
                                    [.text(remote)], IndexRow.init)
            }
            return try db.query("SELECT \(IndexSchema.rowColumns) FROM files ORDER BY remote, path", [], IndexRow.init)
        }
        return rows.map(info)
    }

    /// The entry at `path` of `remote`, or nil.
    public func entry(remote: String, path: String) throws(CacheError) -> CacheEntryInfo? {
        try row(remote: remote, path: path).map(info)
    }

    /// The partial file holding the present bytes of an incomplete entry (`partial/<id>-<generation>.part`, a
    /// sparse file), or nil when the entry is unknown or has no partial file. For people (`cache path`): a
    /// reader must go through ``EntryReader``, which knows which of its bytes the index vouches for.
    public func partialURL(remote: String, path: String) throws(CacheError) -> URL? {
        guard let row = try row(remote: remote, path: path), row.state != .complete else { return nil }
        let url = root.appendingPathComponent("partial/\(Cache.partialName(id: row.id, generation: row.generation))", isDirectory: false)
        return access(url.path, F_OK) == 0 ? url : nil
    }

    /// Paths of the entries of `remote` whose current version is not complete while `tracks/` still holds an
    /// older one (`ls` shows them as outdated): a pull counts them as changed, whether or not `ls` recorded the
    /// new version first.
    public func outdatedPaths(remote: String) throws(CacheError) -> Set<String> {
        try withDatabase { db throws(CacheError) in
            Set(try db.query("SELECT path FROM files WHERE remote = ? AND state != 2 AND track_bytes > 0", [.text(remote)]) { $0.text(0) })
        }
    }

    /// Paths of every entry of `remote`, for mark-and-sweep after a full listing.
    public func knownPaths(remote: String) throws(CacheError) -> Set<String> {
        try withDatabase { db throws(CacheError) in
            Set(try db.query("SELECT path FROM files WHERE remote = ?", [.text(remote)]) { $0.text(0) })
        }
    }

    /// The provider id (or nil) of every entry of `remote`, by path: what a change feed's deletions and moves
    /// are matched against.
    public func providerIDs(remote: String) throws(CacheError) -> [String: String?] {
        try withDatabase { db throws(CacheError) in
            var ids: [String: String?] = [:]
            for (path, id) in try db.query("SELECT path, provider_id FROM files WHERE remote = ?", [.text(remote)], {
                ($0.text(0), $0.isNull(1) ? nil : $0.text(1))
            }) { ids[path] = id }
            return ids
        }
    }

    /// Entries of `remote` whose current version is not complete, by path.
    public func incompleteEntries(remote: String) throws(CacheError) -> [CacheEntryInfo] {
        let rows = try withDatabase { db throws(CacheError) in
            try db.query("SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND state != 2 ORDER BY path",
                         [.text(remote)], IndexRow.init)
        }
        return rows.map(info)
    }

    /// The change cursor stored for `remote`, or nil.
    public func cursor(remote: String) throws(CacheError) -> String? {
        try withDatabase { db throws(CacheError) in
            try db.first("SELECT cursor FROM remotes WHERE name = ?", [.text(remote)]) { $0.optionalText(0) } ?? nil
        }
    }

    /// Stores (or clears, with nil) the change cursor of `remote`. Call only after a listing was fully applied.
    public func setCursor(_ cursor: String?, remote: String) throws(CacheError) {
        _ = try withDatabase { db throws(CacheError) in
            try db.run("INSERT INTO remotes(name, cursor) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET cursor = excluded.cursor",
                       [.text(remote), cursor.map(SQLValue.text) ?? .null])
        }
    }

    /// Pins an entry: eviction and removal keep it. Throws `.notFound` for an unknown path.
    public func pin(remote: String, path: String) throws(CacheError) { try setPinned(true, remote: remote, path: path) }

    /// Unpins an entry. Throws `.notFound` for an unknown path.
    public func unpin(remote: String, path: String) throws(CacheError) { try setPinned(false, remote: remote, path: path) }

    private func setPinned(_ pinned: Bool, remote: String, path: String) throws(CacheError) {
        let changed = try withDatabase { db throws(CacheError) in
            try db.run("UPDATE files SET pinned = ? WHERE remote = ? AND path = ?", [.int(pinned ? 1 : 0), .text(remote), .text(path)])
        }
        if changed == 0 { throw notFound(remote: remote, path: path) }
    }

    /// Counts for `cloudsync cache status`.
    public func status() throws(CacheError) -> CacheStatus {
        let counts = try withDatabase { db throws(CacheError) in
            try db.first("""
                SELECT count(*), coalesce(sum(state = 2), 0), coalesce(sum(state = 1), 0), coalesce(sum(pinned), 0),
                       total(present_bytes) + total(track_bytes), count(start_set), total(start_bytes) FROM files
                """) { ($0.int(0), $0.int(1), $0.int(2), $0.int(3), Self.clampedBytes($0.double(4)), $0.int(5), $0.double(6)) }
        }
        let (entries, complete, partial, pinned, bytes, analysed, startBytes) = counts ?? (0, 0, 0, 0, 0, 0, 0)
        var status = CacheStatus(root: root, limits: limits, entries: Int(entries), complete: Int(complete),
                                 partial: Int(partial), pinned: Int(pinned), bytesPresent: bytes)
        status.analysedStartSets = Int(analysed)
        status.meanStartBytes = analysed > 0 ? Self.clampedBytes(startBytes / Double(analysed)) : nil
        // Float sums (total()) never overflow on hostile sizes; they are exact below 2^53 bytes.
        status.remotes = try withDatabase { db throws(CacheError) in
            try db.query("""
                SELECT remote, count(*), coalesce(sum(state = 2), 0), coalesce(sum(state != 2 AND head = 1), 0),
                       coalesce(sum(state = 1 AND head = 0), 0), coalesce(sum(state = 0 AND head = 0), 0),
                       total(present_bytes) + total(track_bytes), total(size)
                FROM files GROUP BY remote ORDER BY remote
                """) { row in
                RemoteStatus(remote: row.text(0), tracks: Int(row.int(1)), complete: Int(row.int(2)), headOnly: Int(row.int(3)),
                             partial: Int(row.int(4)), missing: Int(row.int(5)), bytesPresent: Self.clampedBytes(row.double(6)),
                             libraryBytes: Self.clampedBytes(row.double(7)))
            }
        }
        status.libraryBytes = status.remotes.reduce(0) { $0.addingSaturating($1.libraryBytes) }
        return status
    }

    /// A float byte total from SQL as Int64, clamped.
    static func clampedBytes(_ value: Double) -> Int64 {
        value >= Double(Int64.max) ? .max : Int64(max(0, value))
    }

    /// Gives entry `id` a new generation with no bytes claimed (state missing, not `head`), keeping what is known
    /// of its version (start set, tags) and an older track awaiting replacement. Call before the partial file of
    /// `generation` is removed or replaced: a reader that still holds that file sees its generation end instead
    /// of taking another file's claims for its own. Returns the new generation; `.changed` when the entry is gone
    /// or already moved past `generation`.
    func retireGeneration(id: Int64, generation: Int64) throws(CacheError) -> Int64 {
        let changed = try withDatabase { db throws(CacheError) in
            try db.run("""
                UPDATE files SET generation = generation + 1, state = 0, ranges = NULL, present_bytes = 0, head = 0,
                    validator = NULL
                WHERE id = ? AND generation = ?
                """, [.int(id), .int(generation)])
        }
        guard changed == 1 else {
            throw CacheError(.changed, "entry \(id) changed or was removed meanwhile; pull again.", path: "")
        }
        return generation + 1
    }

    // MARK: Helpers

    /// Logs a failure of bookkeeping nobody waits for (a closing writer's last checkpoint) as a warning, `what`
    /// then the error. On a full disk only the first such failure of this cache is a warning, the others go to
    /// debug: every file in flight then fails alike (dozens of lines of one cause), and whoever was writing gets
    /// the disk-full error itself — a pull stops with it. Nothing is lost either way: bytes the index does not
    /// claim are fetched again.
    func warnBookkeepingFailure(_ what: String, _ error: CacheError) {
        guard error.code == .diskFull else { return logger.warning("\(what): \(error)") }
        if loggedDiskFull.exchange(true, ordering: .relaxed) {
            logger.debug("\(what): \(error)")
        } else {
            logger.warning("\(what): \(error) (further failures of the full disk are logged at debug level)")
        }
    }

    func row(remote: String, path: String) throws(CacheError) -> IndexRow? {
        try withDatabase { db throws(CacheError) in
            try db.first(Self.rowByPath, [.text(remote), .text(path)], IndexRow.init)
        }
    }

    /// While `on`, group commits do not wait ``CacheLimits/batchDelay`` for more files: the waiting one runs now,
    /// and each later one as soon as its first file is queued. A pull turns it on once every file of a round is
    /// fetched (no more can join; waiting would only delay the last tracks and the pull's end) and off again.
    public func hurryPromotions(_ on: Bool) { writer.hurry(on, self) }

    /// The id of the entry at `path` of `remote`, without reading its row (a writer reads it under its lock).
    func rowID(remote: String, path: String) throws(CacheError) -> Int64? {
        try withDatabase { db throws(CacheError) in
            try db.first("SELECT id FROM files WHERE remote = ? AND path = ?", [.text(remote), .text(path)]) { row in
                row.int(0)
            }
        }
    }

    /// Entry `id`'s row as last committed. From the ``reader`` connection: a transaction of this process in
    /// progress is not waited for, which changes nothing a caller can see (it could as well have read just
    /// before that transaction began; what is committed is visible).
    func row(id: Int64) throws(CacheError) -> IndexRow? {
        let read = { (db: Database) throws(CacheError) -> IndexRow? in try db.first(Self.rowByID, [.int(id)], IndexRow.init) }
        guard let reader else { return try withDatabase(read) }
        return try reader.database.withLock { (db: inout Database) throws(CacheError) -> IndexRow? in try read(db) }
    }

    private final class ReadConnection: Sendable {
        let database: Mutex<Database>
        init(_ database: sending Database) { self.database = Mutex(database) }
    }

    /// Built once: every file a pull opens looks its row up (the statement cache is keyed by the text).
    private static let rowByPath = "SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND path = ?"
    private static let rowByID = "SELECT \(IndexSchema.rowColumns) FROM files WHERE id = ?"

    func info(_ row: IndexRow) -> CacheEntryInfo {
        CacheEntryInfo(remote: row.remote, file: row.file, state: row.state,
                       presentBytes: row.state == .complete ? row.file.size : row.presentBytes,
                       localPath: row.localPath,
                       tracksURL: tracksURL,
                       pinned: row.pinned, lastAccess: Date(timeIntervalSince1970: row.lastAccess),
                       startSet: row.startSet, headPresent: row.state == .complete || row.head,
                       added: Date(timeIntervalSince1970: row.added),
                       lastPlayed: row.lastPlayed > 0 ? Date(timeIntervalSince1970: row.lastPlayed) : nil,
                       outdatedTrackBytes: row.state == .complete ? 0 : row.trackBytes,
                       tags: row.tags, duration: row.duration,
                       deletedRemotely: row.gone > 0 ? Date(timeIntervalSince1970: row.gone) : nil,
                       sealed: row.sealed)
    }

    func notFound(remote: String, path: String) -> CacheError {
        CacheError(.notFound, "\(remote):\(path) is not in the cache index. Run `cloudsync ls --remote \(remote)` "
            + "(it lists the remote and updates the index).", path: path)
    }

    func display(_ relative: String) -> String { rootPath + "/" + relative }
}
