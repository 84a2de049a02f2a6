import CSQLite
import Foundation

/// A value bound to or read from SQL.
enum SQLValue {
    case int(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null
}

/// One result row, valid only inside the closure it is passed to.
struct Row {
    fileprivate let statement: OpaquePointer

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func text(_ column: Int32) -> String {
        guard let c = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: c)
    }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let p = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }
}

/// A minimal owned SQLite connection: owns its handle (closed in `deinit`), caches prepared statements,
/// checks every return code. Deliberately not `Sendable`: one owner (the cache, behind a mutex).
/// Errors are ``CacheError`` carrying the SQL and SQLite's code and message.
final class Database {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    private var transactionDepth = 0
    let path: String

    /// Opens (creating) the database at `path` in WAL mode with a busy timeout, so several processes
    /// may use it at once. See https://sqlite.org/c3ref/open.html and https://sqlite.org/wal.html.
    ///
    /// `exclusive` opens it in `locking_mode=EXCLUSIVE`: the WAL index then lives in this process's memory
    /// instead of the `-shm` file, which SQLite must grow on a first open — impossible on a full disk. The
    /// connection holds the database lock until it closes (other processes wait), so this is only the fallback
    /// that lets `ls`, `cache status` and `cache clear` work when the disk is full (``Cache/open``).
    ///
    /// `reader` opens a second connection to an existing index for reads only (`query_only`): in WAL mode its
    /// reads see the last commit without waiting for a transaction of the first connection (``Cache/row(id:)``).
    init(path: String, busyTimeoutMilliseconds: Int32 = 10_000, exclusive: Bool = false, reader: Bool = false) throws(CacheError) {
        self.path = path
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | (reader ? 0 : SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
            | SQLITE_OPEN_NOFOLLOW, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let systemErrno = Database.systemErrno(rc, db, path: path)
            sqlite3_close_v2(db)
            throw Database.error(code: rc, message: message, systemErrno: systemErrno, sql: "open", path: path)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        try check(sqlite3_busy_timeout(db, busyTimeoutMilliseconds), sql: "busy_timeout")
        if exclusive { try execute("PRAGMA locking_mode=EXCLUSIVE") }
        if reader {
            try execute("PRAGMA query_only=1")
            return
        }
        // Switching the journal mode writes; an index that is WAL already (every index but a new one) is only
        // read, so a full disk or a concurrent writer does not stop read-only commands from opening it.
        if try first("PRAGMA journal_mode", [], { $0.text(0).lowercased() }) != "wal" {
            try execute("PRAGMA journal_mode=WAL")
        }
        try execute("PRAGMA synchronous=NORMAL")
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Throws when `rc` is not OK/ROW/DONE. https://sqlite.org/rescode.html
    func check(_ rc: Int32, sql: String) throws(CacheError) {
        guard rc != SQLITE_OK, rc != SQLITE_ROW, rc != SQLITE_DONE else { return }
        throw Database.error(code: rc, message: String(cString: sqlite3_errmsg(handle)),
                             systemErrno: Database.systemErrno(rc, handle, path: path), sql: sql, path: path)
    }

    /// The errno behind `rc`: SQLite's record of the last failed system call, except for SQLITE_CANTOPEN, where
    /// that is often a fallback's ENOENT (a `-wal` that could not be created on a read-only filesystem, then not
    /// found read-only): whether the index's folder is writable says more.
    private static func systemErrno(_ rc: Int32, _ db: OpaquePointer?, path: String) -> Int32 {
        if rc & 0xFF == SQLITE_CANTOPEN, access((path as NSString).deletingLastPathComponent, W_OK) != 0 { return errno }
        return db.map { sqlite3_system_errno($0) } ?? 0
    }

    /// `systemErrno` is the errno of the system call that failed last (`sqlite3_system_errno`): an I/O error
    /// (SQLITE_IOERR_*) caused by ENOSPC or EDQUOT is a full disk too, like SQLITE_FULL.
    static func error(code rc: Int32, message: String, systemErrno: Int32, sql: String, path: String) -> CacheError {
        let primary = rc & 0xFF
        let what = "SQLite error \(rc) (\(message)) running `\(sql.prefix(200))` on \(path)"
        if primary == SQLITE_FULL || (primary == SQLITE_IOERR && (systemErrno == ENOSPC || systemErrno == EDQUOT)) {
            // The statement is no help to whoever has to free the space.
            let cacheRoot = (path as NSString).deletingLastPathComponent
            return CacheError(.diskFull, "No space left for the cache in \(cacheRoot): its index \(path) could not be "
                + "written (SQLite error \(rc), \(message)). Free space, lower cache.max_size and run `cloudsync cache "
                + "evict`, or move cache.dir.", path: path, errno: rc)
        }
        if systemErrno == EROFS || systemErrno == EACCES || systemErrno == EPERM {
            return CacheError(.io, "The cache index \(path) cannot be written: \(String(cString: strerror(systemErrno))) (SQLite "
                + "error \(rc), \(message)). cache.dir must be on a writable filesystem, and it and its files yours.",
                path: path, errno: rc)
        }
        switch primary {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return CacheError(.busy, "\(what). Another cloudsync process kept the index busy for more than 10 s; "
                + "try again.", path: path, errno: rc)
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return CacheError(.corrupt, "\(what). The cache index is damaged: run `cloudsync cache clear` or delete "
                + "\(path) (tracks stay; the next pull re-indexes).", path: path, errno: rc)
        default:
            return CacheError(.io, "\(what). Check permissions and space of the cache directory.", path: path, errno: rc)
        }
    }

    /// Runs one or more statements without parameters or results.
    func execute(_ sql: String) throws(CacheError) {
        try check(sqlite3_exec(handle, sql, nil, nil, nil), sql: sql)
    }

    /// Runs `sql` with `parameters`; returns the number of rows changed.
    @discardableResult
    func run(_ sql: String, _ parameters: [SQLValue] = []) throws(CacheError) -> Int {
        let statement = try prepared(sql, parameters)
        defer { sqlite3_reset(statement) }
        while try step(statement, sql) {}
        return Int(sqlite3_changes(handle))
    }

    /// Runs a query, mapping every row.
    func query<T>(_ sql: String, _ parameters: [SQLValue] = [], _ map: (Row) throws(CacheError) -> T) throws(CacheError) -> [T] {
        let statement = try prepared(sql, parameters)
        defer { sqlite3_reset(statement) }
        var result: [T] = []
        while try step(statement, sql) { result.append(try map(Row(statement: statement))) }
        return result
    }

    /// The first row of a query, or nil.
    func first<T>(_ sql: String, _ parameters: [SQLValue] = [], _ map: (Row) throws(CacheError) -> T) throws(CacheError) -> T? {
        let statement = try prepared(sql, parameters)
        defer { sqlite3_reset(statement) }
        guard try step(statement, sql) else { return nil }
        return try map(Row(statement: statement))
    }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction (taking the write lock up front, so a busy database
    /// waits for the busy timeout instead of failing on upgrade); commits on return, rolls back on throw.
    /// Nested calls join the outer transaction.
    func withTransaction<T>(_ body: () throws(CacheError) -> T) throws(CacheError) -> T {
        if transactionDepth > 0 {
            transactionDepth += 1
            defer { transactionDepth -= 1 }
            return try body()
        }
        try execute("BEGIN IMMEDIATE")
        transactionDepth = 1
        do {
            let result = try body()
            transactionDepth = 0
            try execute("COMMIT")
            return result
        } catch {
            transactionDepth = 0
            _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    private func step(_ statement: OpaquePointer, _ sql: String) throws(CacheError) -> Bool {
        let rc = sqlite3_step(statement)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        try check(rc, sql: sql)
        return false
    }

    private func prepared(_ sql: String, _ parameters: [SQLValue]) throws(CacheError) -> OpaquePointer {
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var s: OpaquePointer?
            try check(sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &s, nil), sql: sql)
            guard let s else { throw CacheError(.io, "SQLite prepared no statement for `\(sql)`", path: path) }
            statements[sql] = s
            statement = s
        }
        sqlite3_clear_bindings(statement)
        for (i, value) in parameters.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch value {
            case .int(let v): rc = sqlite3_bind_int64(statement, index, v)
            case .real(let v): rc = sqlite3_bind_double(statement, index, v)
            case .text(let v): rc = sqlite3_bind_text(statement, index, v, -1, cloudsync_sqlite_transient())
            case .blob(let v):
                rc = v.withUnsafeBytes { sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), cloudsync_sqlite_transient()) }
            case .null: rc = sqlite3_bind_null(statement, index)
            }
            try check(rc, sql: sql)
        }
        return statement
    }
}

extension Cache {
    /// The version of the SQLite library loaded at run time, e.g. `3.40.1` (`sqlite3_libversion(3)`).
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }
}
