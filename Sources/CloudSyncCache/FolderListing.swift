import CloudSyncCore
import Foundation

/// One folder of a remote as the index implies it (folders are not stored: they are the path prefixes of
/// files), for `serve`'s WebDAV face.
public struct FolderListing: Sendable {
    /// Files directly in the folder, by path.
    public var files: [CacheEntryInfo]
    /// Subfolders, by name, each with the newest `modified` of the files beneath it.
    public var folders: [(name: String, modified: Date)]

    public init(files: [CacheEntryInfo] = [], folders: [(name: String, modified: Date)] = []) {
        self.files = files
        self.folders = folders
    }
}

extension Cache {
    /// The folder `folder` of `remote` ("" for the remote's root, else a path without a trailing `/`), or nil
    /// when no indexed file lies beneath it.
    ///
    /// Read by ranges of the `(remote, path)` index, never by scanning the remote: files come in pages of 512
    /// in path order, and each subfolder costs one query that skips its whole subtree plus one `MAX(modified)`
    /// over it — so 20,000 files in one folder are about 40 queries, and a folder of 100 albums about 200.
    public func folder(remote: String, path folder: String) throws(CacheError) -> FolderListing? {
        let prefix = folder.isEmpty ? "" : folder + "/"
        // Every path beneath `prefix` sorts before `prefix` with its last "/" (0x2F) replaced by "0" (0x30).
        let end = folder.isEmpty ? nil : folder + "0"
        return try withDatabase { db throws(CacheError) -> FolderListing? in
            var files: [CacheEntryInfo] = []
            var folders: [(name: String, modified: Date)] = []
            var cursor = prefix
            var inclusive = true
            var any = false
            paging: while true {
                var sql = "SELECT \(IndexSchema.rowColumns) FROM files WHERE remote = ? AND path \(inclusive ? ">=" : ">") ?"
                var parameters: [SQLValue] = [.text(remote), .text(cursor)]
                if let end {
                    sql += " AND path < ?"
                    parameters.append(.text(end))
                }
                sql += " ORDER BY path LIMIT 512"
                let rows = try db.query(sql, parameters, IndexRow.init)
                if rows.isEmpty { break }
                for row in rows {
                    guard row.file.path.utf8.starts(with: prefix.utf8) else { continue }
                    any = true
                    let rest = row.file.path.utf8.dropFirst(prefix.utf8.count)
                    if let slash = rest.firstIndex(of: UInt8(ascii: "/")) {
                        let name = String(decoding: rest[rest.startIndex ..< slash], as: UTF8.self)
                        let subtree = prefix + name
                        let newest = try db.first("SELECT MAX(modified) FROM files WHERE remote = ? AND path > ? AND path < ?",
                                                  [.text(remote), .text(subtree + "/"), .text(subtree + "0")]) { $0.double(0) } ?? 0
                        folders.append((name, Date(timeIntervalSince1970: newest)))
                        cursor = subtree + "0"
                        inclusive = true
                        continue paging
                    }
                    files.append(info(row))
                    cursor = row.file.path
                    inclusive = false
                }
                if rows.count < 512 { break }
            }
            return any ? FolderListing(files: files, folders: folders) : nil
        }
    }

    /// The remotes that have indexed files, sorted.
    public func indexedRemotes() throws(CacheError) -> [String] {
        try withDatabase { db throws(CacheError) in
            try db.query("SELECT DISTINCT remote FROM files ORDER BY remote") { $0.text(0) }
        }
    }
}
