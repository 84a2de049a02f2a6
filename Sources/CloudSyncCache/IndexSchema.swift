import CloudSyncCore
import Foundation

/// The index schema, its migrations (`PRAGMA user_version`) and row mapping. See docs/cache.md.
enum IndexSchema {
    /// Migration `i` takes the schema from version `i` to `i + 1`. Append only; never edit a shipped one.
    static let migrations: [String] = [
        """
        CREATE TABLE remotes(
            name   TEXT PRIMARY KEY,
            cursor TEXT
        );
        CREATE TABLE files(
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            remote        TEXT NOT NULL,
            path          TEXT NOT NULL,
            local_path    TEXT NOT NULL,
            path_key      TEXT NOT NULL,
            provider_id   TEXT,
            size          INTEGER NOT NULL,
            modified      REAL NOT NULL,
            modified_s    INTEGER NOT NULL,
            revision      TEXT NOT NULL,
            hashes        TEXT NOT NULL,
            mime          TEXT,
            download_hint TEXT,
            state         INTEGER NOT NULL DEFAULT 0,
            generation    INTEGER NOT NULL DEFAULT 1,
            ranges        BLOB,
            present_bytes INTEGER NOT NULL DEFAULT 0,
            track_bytes   INTEGER NOT NULL DEFAULT 0,
            pinned        INTEGER NOT NULL DEFAULT 0,
            last_access   REAL NOT NULL,
            UNIQUE(remote, path)
        );
        CREATE UNIQUE INDEX files_path_key ON files(path_key);
        CREATE INDEX files_provider_id ON files(remote, provider_id) WHERE provider_id IS NOT NULL;
        CREATE INDEX files_last_access ON files(last_access);
        """,
        // 2: start sets (instant replay), planning priorities, tags.
        """
        ALTER TABLE files ADD COLUMN start_set BLOB;
        ALTER TABLE files ADD COLUMN start_bytes INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN head INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN added REAL NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN last_played REAL NOT NULL DEFAULT 0;
        ALTER TABLE files ADD COLUMN tags TEXT;
        ALTER TABLE files ADD COLUMN duration REAL;
        ALTER TABLE files ADD COLUMN validator TEXT;
        UPDATE files SET added = last_access;
        """,
        // 3: the last pull of each remote, for `cloudsync status`.
        """
        CREATE TABLE pull_runs(
            remote TEXT PRIMARY KEY,
            started REAL NOT NULL,
            ended REAL,
            outcome TEXT NOT NULL,
            exit_code INTEGER NOT NULL DEFAULT 0,
            fetched_files INTEGER NOT NULL DEFAULT 0,
            fetched_bytes INTEGER NOT NULL DEFAULT 0,
            failed INTEGER NOT NULL DEFAULT 0,
            message TEXT
        );
        """,
        // 4: tracks a pull kept although their remote file is gone (`pull --no-delete`): when it was seen gone.
        """
        ALTER TABLE files ADD COLUMN gone REAL NOT NULL DEFAULT 0;
        """,
        // 5: encryption at rest (`cache.encrypt`): whether each entry's files are sealed, and the cache's mode
        // with the check value of its key.
        """
        ALTER TABLE files ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE settings(
            name  TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
        // 6: the start-set policy each start set was computed under (the engine's key of `pull.head_first` and
        // `pull.head_seconds`), so a pull under another policy derives it again. NULL: computed before this column.
        """
        ALTER TABLE files ADD COLUMN start_policy TEXT;
        """,
        // 7: where tracks moved on the remote went (`Cache.move`), so `serve` redirects a player's old URL.
        """
        CREATE TABLE moves(
            remote    TEXT NOT NULL,
            from_path TEXT NOT NULL,
            to_path   TEXT NOT NULL,
            moved     REAL NOT NULL,
            PRIMARY KEY(remote, from_path)
        );
        CREATE INDEX moves_to ON moves(remote, to_path);
        """,
    ]

    static func migrate(_ db: Database) throws(CacheError) {
        // Up to date (the usual case): read only, no write lock, so a full disk does not stop an open.
        if try db.first("PRAGMA user_version", [], { Int($0.int(0)) }) == migrations.count { return }
        try db.withTransaction { () throws(CacheError) in
            let version = try db.first("PRAGMA user_version") { Int($0.int(0)) } ?? 0
            guard version <= migrations.count else {
                throw CacheError(.corrupt, "The cache index \(db.path) has schema version \(version), newer than this "
                    + "cloudsync understands (\(migrations.count)). Upgrade cloudsync or use another cache.dir.",
                    path: db.path)
            }
            for migration in migrations[version...] { try db.execute(migration) }
            if version < migrations.count { try db.execute("PRAGMA user_version = \(migrations.count)") }
        }
    }

    static let rowColumns = """
        id, remote, path, local_path, provider_id, size, modified, revision, hashes, mime, download_hint, state, \
        generation, ranges, present_bytes, track_bytes, pinned, last_access, start_set, head, added, last_played, \
        tags, duration, validator, gone, sealed
        """

    /// Hashes as `kind:value` separated by spaces (hex and base64 contain neither); unknown kinds are skipped.
    static func encodeHashes(_ hashes: [ContentHash]) -> String {
        hashes.map { "\($0.kind.rawValue):\($0.value)" }.joined(separator: " ")
    }

    static func decodeHashes(_ text: String) -> [ContentHash] {
        if text.isEmpty { return [] }
        var result: [ContentHash] = []
        for item in text.utf8.split(separator: UInt8(ascii: " ")) {
            guard let colon = item.firstIndex(of: UInt8(ascii: ":")),
                  let kind = HashKind(rawValue: String(decoding: item[..<colon], as: UTF8.self)) else { continue }
            result.append(ContentHash(kind: kind, value: String(decoding: item[item.index(after: colon)...], as: UTF8.self)))
        }
        return result
    }

    static func stateCode(_ state: CacheEntryState) -> Int64 {
        switch state {
        case .missing: 0
        case .partial: 1
        case .complete: 2
        }
    }

    /// How `file` relates to its row (`.new` without one); reads only.
    static func status(_ db: Database, remote: String, file: RemoteFile) throws(CacheError) -> ListedFileStatus {
        try row(db, remote: remote, file: file)?.status ?? .new
    }

    /// `file`'s row id and generation, how `file` relates to it, and whether the row already holds `file`'s
    /// other listed columns (id, mtime, hashes, MIME type, download hint; not marked gone); nil without a row.
    private static func row(_ db: Database, remote: String, file: RemoteFile) throws(CacheError)
        -> (id: Int64, generation: Int64, status: ListedFileStatus, current: Bool)? {
        try db.first("""
            SELECT id, generation, size, modified_s, revision, state, present_bytes,
                   provider_id, modified, hashes, mime, download_hint, gone
            FROM files WHERE remote = ? AND path = ?
            """, [.text(remote), .text(file.path)]) {
            let fingerprint = Fingerprint(size: $0.int(2), modified: $0.int(3), revision: $0.text(4))
            let complete = $0.int(5) == 2
            let status: ListedFileStatus = fingerprint != file.fingerprint ? .changed(wasComplete: complete)
                : .same(complete: complete, presentBytes: complete ? file.size : $0.int(6))
            let current = $0.optionalText(7) == file.providerID && $0.double(8) == file.modified.timeIntervalSince1970
                && $0.text(9) == encodeHashes(file.hashes) && $0.optionalText(10) == file.mimeType
                && $0.optionalText(11) == file.downloadHint && $0.double(12) == 0
            return (id: $0.int(0), generation: $0.int(1), status: status, current: current)
        }
    }

    /// Inserts or updates one file; returns how it related to the index before and, on a fingerprint change,
    /// the stale partial's name.
    static func upsert(_ db: Database, remote: String, file: RemoteFile,
                       rules: LocalPath.NameRules = .posix) throws(CacheError) -> (ListedFileStatus, String?) {
        let existing = try row(db, remote: remote, file: file)
        // A listing that changed nothing runs no statement: SQLite would leave the unchanged row's page alone
        // anyway, but preparing, binding and running an UPDATE per listed file is CPU spent for nothing.
        if let existing, case .same = existing.status, existing.current { return (existing.status, nil) }
        let fp = file.fingerprint
        let metadata: [SQLValue] = [
            file.providerID.map(SQLValue.text) ?? .null, .real(file.modified.timeIntervalSince1970),
            .text(encodeHashes(file.hashes)), file.mimeType.map(SQLValue.text) ?? .null,
            file.downloadHint.map(SQLValue.text) ?? .null,
        ]
        if let existing {
            if case .same = existing.status {
                try db.run("UPDATE files SET provider_id = ?, modified = ?, hashes = ?, mime = ?, download_hint = ?, gone = 0 WHERE id = ?",
                           metadata + [.int(existing.id)])
                return (existing.status, nil)
            }
            try db.run("""
                UPDATE files SET provider_id = ?, modified = ?, hashes = ?, mime = ?, download_hint = ?,
                    size = ?, modified_s = ?, revision = ?, generation = generation + 1, state = 0, ranges = NULL,
                    present_bytes = 0, start_set = NULL, start_policy = NULL, start_bytes = 0, head = 0, tags = NULL, duration = NULL,
                    validator = NULL, gone = 0, added = ?
                WHERE id = ?
                """, metadata + [.int(fp.size), .int(fp.modified), .text(fp.revision), .real(Date().timeIntervalSince1970),
                                 .int(existing.id)])
            return (existing.status, Cache.partialName(id: existing.id, generation: existing.generation))
        }
        let (local, key) = try localPath(db, remote: remote, path: file.path, rules: rules)
        try db.run("""
            INSERT INTO files(provider_id, modified, hashes, mime, download_hint, remote, path, local_path, path_key,
                              size, modified_s, revision, last_access, added)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, metadata + [.text(remote), .text(file.path), .text(local), .text(key),
                             .int(fp.size), .int(fp.modified), .text(fp.revision), .real(Date().timeIntervalSince1970),
                             .real(Date().timeIntervalSince1970)])
        return (.new, nil)
    }
}

extension IndexSchema {
    /// The local path (under `tracks/`) and its collision key for a new entry: ``LocalPath``'s safe name under
    /// `rules`, disambiguated while another entry holds its key.
    static func localPath(_ db: Database, remote: String, path: String,
                          rules: LocalPath.NameRules) throws(CacheError) -> (local: String, key: String) {
        let plain = LocalPath.safeComponent(remote, rules: rules) + "/" + LocalPath.safeRelativePath(for: path, rules: rules)
        var local = plain
        var key = LocalPath.collisionKey(local)
        var attempt = 0
        while try db.first("SELECT 1 FROM files WHERE path_key = ?", [.text(key)], { _ in true }) != nil {
            attempt += 1
            let salt = remote + "\u{0}" + path + (attempt > 1 ? "\u{0}\(attempt)" : "")
            local = LocalPath.disambiguated(plain, salt: salt)
            key = LocalPath.collisionKey(local)
        }
        return (local, key)
    }

    /// Gives every entry whose local path the portable file systems refuse a portable one (the cache was found on
    /// FAT, exFAT or NTFS). Their tracks cannot be on such a disk under the old names: a complete one is found
    /// missing by the next pull's check and fetched again. Returns how many entries moved.
    static func relocateUnportable(_ db: Database) throws(CacheError) -> Int {
        let rows = try db.query("SELECT id, remote, path, local_path FROM files") { row in
            (id: row.int(0), remote: row.text(1), path: row.text(2), local: row.text(3))
        }.filter { !LocalPath.isPortable($0.local) }
        for row in rows {
            let (local, key) = try localPath(db, remote: row.remote, path: row.path, rules: .portable)
            try db.run("UPDATE files SET local_path = ?, path_key = ? WHERE id = ?", [.text(local), .text(key), .int(row.id)])
        }
        return rows.count
    }
}

/// One `files` row, as selected with ``IndexSchema/rowColumns``.
struct IndexRow: Sendable {
    var id: Int64
    var remote: String
    var localPath: String
    var file: RemoteFile
    var state: CacheEntryState
    var generation: Int64
    var ranges: ByteRanges
    var presentBytes: Int64
    var trackBytes: Int64
    var pinned: Bool
    var lastAccess: Double
    /// The start set of the current version, once analysed.
    var startSet: ByteRanges?
    /// The start set is known and present (or the entry is complete).
    var head: Bool
    var added: Double
    var lastPlayed: Double
    /// Tags read from the start set, as the engine encoded them (JSON), and the duration in seconds.
    var tags: String?
    var duration: Double?
    /// The entity tag the partial's bytes were served under, once learnt.
    var validator: String?
    /// When a listing last found the remote file gone while the pull kept the track (0: listed).
    var gone: Double
    /// The entry's files (partial and track) are encrypted (``Sealer``).
    var sealed: Bool

    var path: String { file.path }

    init(_ row: Row) throws(CacheError) {
        id = row.int(0)
        remote = row.text(1)
        localPath = row.text(3)
        file = RemoteFile(path: row.text(2), providerID: row.optionalText(4), size: row.int(5),
                          modified: Date(timeIntervalSince1970: row.double(6)), revision: row.text(7),
                          hashes: IndexSchema.decodeHashes(row.text(8)), mimeType: row.optionalText(9),
                          downloadHint: row.optionalText(10))
        switch row.int(11) {
        case 1: state = .partial
        case 2: state = .complete
        default: state = .missing
        }
        generation = row.int(12)
        let blob = row.blob(13)
        guard let decoded = ByteRanges(encoded: blob) else {
            throw CacheError(.corrupt, "The cache index has damaged range data for \(remote):\(file.path). Run "
                + "`cloudsync cache clear --remote \(remote)`.", path: file.path)
        }
        ranges = decoded
        presentBytes = row.int(14)
        trackBytes = row.int(15)
        pinned = row.int(16) != 0
        lastAccess = row.double(17)
        if row.isNull(18) {
            startSet = nil
        } else {
            guard let decoded = ByteRanges(encoded: row.blob(18)) else {
                throw CacheError(.corrupt, "The cache index has a damaged start set for \(remote):\(file.path). Run "
                    + "`cloudsync cache clear --remote \(remote)`.", path: file.path)
            }
            startSet = decoded
        }
        head = row.int(19) != 0
        added = row.double(20)
        lastPlayed = row.double(21)
        tags = row.optionalText(22)
        duration = row.isNull(23) ? nil : row.double(23)
        validator = row.optionalText(24)
        gone = row.double(25)
        sealed = row.int(26) != 0
    }
}
