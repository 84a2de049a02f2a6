#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation

/// How a cache treats encryption at rest (`cache.encrypt`, see docs/cache.md "Encryption at rest"): the key that
/// opens sealed entries, and whether files written from now on are sealed.
public struct CacheEncryption: Sendable {
    /// Opens sealed entries (and seals new files when ``sealsNewFiles``). Nil for a plaintext cache.
    public var key: CacheKey?
    public var sealsNewFiles: Bool

    public init(key: CacheKey?, sealsNewFiles: Bool) {
        precondition(!sealsNewFiles || key != nil, "sealing needs a key")
        self.key = key
        self.sealsNewFiles = sealsNewFiles
    }

    public static let off = CacheEncryption(key: nil, sealsNewFiles: false)
    public static func on(_ key: CacheKey) -> CacheEncryption { CacheEncryption(key: key, sealsNewFiles: true) }

    /// What the index says about the cache as a whole (`settings.encryption`).
    public enum Mode: String, Sendable {
        case off, on
        /// `cache encrypt` / `cache decrypt` began and has not finished: some entries are in the old form.
        case encrypting, decrypting
    }

    static func mode(_ db: Database) throws(CacheError) -> Mode {
        let text = try db.first("SELECT value FROM settings WHERE name = 'encryption'") { $0.text(0) }
        return text.flatMap(Mode.init(rawValue:)) ?? .off
    }

    static func setMode(_ mode: Mode, key: CacheKey?, _ db: Database) throws(CacheError) {
        _ = try db.run("INSERT OR REPLACE INTO settings(name, value) VALUES ('encryption', ?)", [.text(mode.rawValue)])
        if let key {
            _ = try db.run("INSERT OR REPLACE INTO settings(name, value) VALUES ('key_check', ?)", [.text(key.checkValue)])
        }
    }

    /// Refuses a key that is not the cache's (`.wrongKey`), and, when `checkingMode`, a configuration that
    /// disagrees with what the cache holds (`.encryptionMismatch`, naming the command that converts it) or an
    /// encrypted cache opened without a key (`.keyMissing`). A cache without bytes in the other form simply
    /// switches.
    static func check(_ db: Database, encryption: CacheEncryption, root: String, checkingMode: Bool) throws(CacheError) {
        let mode = try mode(db)
        if let key = encryption.key,
           let stored = try db.first("SELECT value FROM settings WHERE name = 'key_check'", [], { $0.text(0) }),
           stored != key.checkValue {
            throw CacheError(.wrongKey, "The cache key is not the key the cache at \(root) was encrypted with. Give the "
                + "key it was made with (the file $XDG_STATE_HOME/cloudsync/cache.key it was created in, or "
                + "cache.key_command). A lost key cannot be recovered: remove \(root) to start an empty cache.",
                path: root)
        }
        guard checkingMode else { return }
        let wanted: Mode = encryption.sealsNewFiles ? .on : .off
        if mode == wanted {
            if encryption.sealsNewFiles,
               try db.first("SELECT value FROM settings WHERE name = 'key_check'", [], { $0.text(0) }) == nil {
                try setMode(.on, key: encryption.key, db)
            }
            return
        }
        switch mode {
        case .encrypting:
            throw CacheError(.encryptionMismatch, "Encrypting the cache at \(root) was interrupted. Run `cloudsync cache "
                + "encrypt` to finish it (it resumes where it stopped).", path: root)
        case .decrypting:
            throw CacheError(.encryptionMismatch, "Decrypting the cache at \(root) was interrupted. Run `cloudsync cache "
                + "decrypt` to finish it (it resumes where it stopped).", path: root)
        case .on, .off:
            break
        }
        // The other form: fine when it holds no bytes in that form.
        let otherForm = try db.first("""
            SELECT EXISTS(SELECT 1 FROM files WHERE present_bytes + track_bytes > 0 AND sealed = ?)
            """, [.int(wanted == .on ? 0 : 1)]) { $0.int(0) != 0 } ?? false
        if otherForm {
            if wanted == .on {
                throw CacheError(.encryptionMismatch, "cache.encrypt is true but the cache at \(root) holds plaintext "
                    + "tracks. Run `cloudsync cache encrypt` to encrypt them in place, or set cache.encrypt = false.",
                    path: root)
            }
            if encryption.key == nil {
                throw CacheError(.encryptionMismatch, "The cache at \(root) is encrypted but cache.encrypt is false. Set "
                    + "cache.encrypt = true to use it, or run `cloudsync cache decrypt` to turn it back into plaintext.",
                    path: root)
            }
            throw CacheError(.encryptionMismatch, "cache.encrypt is false but the cache at \(root) holds encrypted "
                + "tracks. Run `cloudsync cache decrypt` to decrypt them in place, or set cache.encrypt = true.", path: root)
        }
        try db.withTransaction { () throws(CacheError) in try setMode(wanted, key: encryption.key, db) }
    }
}

/// One open entry file (a partial or a track) read and written as plaintext: through its ``Sealer`` when the
/// entry is sealed. Owns its descriptor.
final class EntryFile: Sendable {
    let fd: Int32
    let sealer: Sealer?
    let display: String
    private let cacheRoot: String

    init(fd: Int32, sealer: Sealer?, display: String, cacheRoot: String) {
        self.fd = fd
        self.sealer = sealer
        self.display = display
        self.cacheRoot = cacheRoot
    }

    deinit { Glibc.close(fd) }

    func read(_ range: Range<Int64>) throws(CacheError) -> Data {
        if let sealer { return try sealer.read(fd: fd, range: range, display: display, cacheRoot: cacheRoot) }
        return try preadAll(fd: fd, range: range, display: display, cacheRoot: cacheRoot)
    }

    /// Writes plaintext `bytes` at `offset`: as is, or sealed, when `offset` starts a block and `bytes` is whole
    /// blocks (the last one may end the file).
    func write(_ bytes: Data, at offset: Int64, io: FileIO) throws(CacheError) {
        guard let sealer else {
            try pwriteAll(fd: fd, bytes, at: offset, io: io, display: display, cacheRoot: cacheRoot)
            return
        }
        let layout = sealer.layout
        let blocks = layout.blocks(covering: offset ..< offset + Int64(bytes.count))
        precondition(offset % layout.blockSize == 0 && layout.aligned(offset ..< offset + Int64(bytes.count)).count == bytes.count,
                     "sealed writes are whole blocks")
        guard !blocks.isEmpty else { return }
        let diskStart = layout.diskOffset(ofBlock: blocks.lowerBound)
        var sealed = [UInt8](repeating: 0, count: bytes.count + blocks.count * Int(SealedLayout.tagSize))
        bytes.withUnsafeBytes { (plain: UnsafeRawBufferPointer) in
            sealed.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) in
                for index in blocks {
                    let r = layout.plainRange(ofBlock: index)
                    let from = Int(r.lowerBound - offset), to = Int(layout.diskOffset(ofBlock: index) - diskStart)
                    sealer.seal(block: index, UnsafeRawBufferPointer(rebasing: plain[from ..< from + r.count]),
                                into: UnsafeMutableRawBufferPointer(rebasing: out[to ..< to + r.count + Int(SealedLayout.tagSize)]))
                }
            }
        }
        try pwriteAll(fd: fd, sealed, at: diskStart, io: io, display: display, cacheRoot: cacheRoot)
    }
}

/// Writes all of `bytes` at `offset` with pwrite (ENOSPC → `.diskFull`).
func pwriteAll(fd: Int32, _ bytes: some ContiguousBytes, at offset: Int64, io: FileIO, display: String,
               cacheRoot: String) throws(CacheError) {
    let result = bytes.withUnsafeBytes { raw in
        Result { () throws(CacheError) in try pwriteAll(fd: fd, raw, at: offset, io: io, display: display, cacheRoot: cacheRoot) }
    }
    try result.get()
}

/// Writes all of `bytes` at `offset` with pwrite (ENOSPC → `.diskFull`).
func pwriteAll(fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, io: FileIO, display: String,
               cacheRoot: String) throws(CacheError) {
    var done = 0
    while done < bytes.count {
        do throws(Errno) {
            let n = try io.pwrite(fd, UnsafeRawBufferPointer(rebasing: bytes[done...]), offset + Int64(done))
            guard n > 0 else { throw Errno(EIO) }
            done += n
        } catch {
            throw CacheError.system("write", errno: error.rawValue, path: display, cacheRoot: cacheRoot)
        }
    }
}

extension IndexRow {
    /// The size of the entry's file on disk: the plaintext size, or the sealed layout's.
    var diskSize: Int64 {
        guard sealed, let layout = SealedLayout(plainSize: file.size) else { return file.size }
        return layout.diskSize
    }
}

extension Cache {
    /// What the index says of encryption: the cache's mode and whether a key was ever recorded for it.
    public func encryptionState() throws(CacheError) -> (mode: CacheEncryption.Mode, keyed: Bool) {
        try withDatabase { db throws(CacheError) in
            let keyed = try db.first("SELECT value FROM settings WHERE name = 'key_check'", [], { $0.text(0) }) != nil
            let sealedBytes = try db.first("SELECT EXISTS(SELECT 1 FROM files WHERE sealed = 1 AND present_bytes + track_bytes > 0)",
                                           [], { $0.int(0) != 0 }) ?? false
            let mode = try CacheEncryption.mode(db)
            return (mode, keyed && (mode != .off || sealedBytes))
        }
    }

    /// The key of sealed entries, or `.keyMissing`.
    func sealingKey(for remote: String, _ path: String) throws(CacheError) -> CacheKey {
        guard let key = encryption.key else {
            throw CacheError(.keyMissing, "\(remote):\(path) is encrypted in the cache and no cache key was given. Set "
                + "cache.encrypt = true (its key is $XDG_STATE_HOME/cloudsync/cache.key or cache.key_command).", path: path)
        }
        return key
    }

    /// The sealer of an entry file open at `fd`, from its header. Nil for a plaintext entry; `.damaged` when the
    /// header is unreadable (the file was changed behind the cache's back).
    func sealer(reading fd: Int32, row: IndexRow, generation: Int64, display: String) throws(CacheError) -> Sealer? {
        guard row.sealed else { return nil }
        let key = try sealingKey(for: row.remote, row.path)
        let bytes = try preadAll(fd: fd, range: 0 ..< SealedLayout.headerSize, display: display, cacheRoot: rootPath)
        guard let header = SealedHeader(bytes: bytes),
              let sealer = Sealer(cacheKey: key, header: header, id: row.id, generation: generation, plainSize: row.file.size)
        else {
            var error = CacheError(.damaged, "\(display) has no valid encryption header: it was changed or damaged on disk. "
                + "Its bytes are not served; run `cloudsync cache verify` to drop it.", path: display)
            error.damagedBytes = 0 ..< row.file.size
            throw error
        }
        return sealer
    }

    /// Creates (or truncates) a new entry file in `partial/` at its disk size, with a fresh header when `sealed`.
    func createEntryFile(_ name: String, row: IndexRow, generation: Int64, sealed: Bool) throws(CacheError) -> EntryFile {
        let display = display("partial/\(name)")
        let fd = try fs.openFile(name, in: partialFD, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o600, display: display)
        var sealer: Sealer?
        do throws(CacheError) {
            var diskSize = row.file.size
            if sealed {
                let header = SealedHeader.fresh()
                guard let made = Sealer(cacheKey: try sealingKey(for: row.remote, row.path), header: header, id: row.id,
                                        generation: generation, plainSize: row.file.size) else {
                    throw CacheError(.tooLarge, "\(row.remote):\(row.path) is too large to encrypt", path: row.path)
                }
                sealer = made
                diskSize = made.layout.diskSize
                try pwriteAll(fd: fd, header.bytes, at: 0, io: io, display: display, cacheRoot: rootPath)
            }
            do throws(Errno) {
                try io.ftruncate(fd, diskSize)
            } catch {
                throw CacheError.system("ftruncate", errno: error.rawValue, path: display, needing: diskSize, cacheRoot: rootPath)
            }
        } catch {
            Glibc.close(fd)
            _ = unlinkat(partialFD, name, 0)
            throw error
        }
        return EntryFile(fd: fd, sealer: sealer, display: display, cacheRoot: rootPath)
    }

    /// Copies the plaintext of `ranges` from `source` into `target` (each in its own form), 1 MiB at a time. A
    /// sealed target takes whole blocks only: give it ranges widened or narrowed to blocks.
    func copyPlaintext(_ ranges: ByteRanges, from source: EntryFile, to target: EntryFile) throws(CacheError) {
        let step: Int64 = 1 << 20
        for range in ranges.ranges {
            var at = range.lowerBound
            while at < range.upperBound {
                let upper = min(range.upperBound, at + step)
                try target.write(try source.read(at ..< upper), at: at, io: io)
                at = upper
            }
        }
    }

    /// Opens the current file of `row` (its track when complete, else its partial) for reading as plaintext.
    func openEntryFile(_ row: IndexRow) throws(CacheError) -> EntryFile {
        let fd: Int32, display: String
        if row.state == .complete {
            var components = row.localPath.split(separator: "/").map(String.init)
            let leaf = components.popLast() ?? ""
            display = self.display("tracks/\(row.localPath)")
            let dir = try fs.openDirectory(components, in: tracksFD, create: false, display: display)
            defer { Glibc.close(dir) }
            fd = try fs.openFile(leaf, in: dir, flags: O_RDONLY, display: display)
        } else {
            let name = Cache.partialName(id: row.id, generation: row.generation)
            display = self.display("partial/\(name)")
            fd = try fs.openFile(name, in: partialFD, flags: O_RDONLY, display: display)
        }
        do throws(CacheError) {
            var st = stat()
            guard fstat(fd, &st) == 0, Int64(st.st_size) == row.diskSize else {
                var error = CacheError(.damaged, "\(display) has \(st.st_size) bytes on disk where the index expects "
                    + "\(row.diskSize): it was changed behind the cache's back. Run `cloudsync cache verify`.", path: display)
                error.damagedBytes = 0 ..< row.file.size
                throw error
            }
            return EntryFile(fd: fd, sealer: try sealer(reading: fd, row: row, generation: row.generation, display: display),
                             display: display, cacheRoot: rootPath)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Stops claiming the bytes of a damaged block (a sealed block whose tag failed) so that they are fetched
    /// again, under the entry's lock (non-blocking: an entry being written is left to its writer, which drops the
    /// block itself when it reads it). A complete track becomes a partial file of the same generation holding
    /// every other block (index first, then the rename: a kill between them leaves a partial the next writer
    /// restarts). Returns whether it did.
    @discardableResult
    public func dropDamaged(remote: String, path: String, bytes: Range<Int64>, why: String = "failed their check on disk") -> Bool {
        guard let first = try? row(remote: remote, path: path),
              let lock = try? EntryLock.tryAcquire(cache: self, id: first.id, wait: false) else { return false }
        defer { withExtendedLifetime(lock) {} }
        guard let row = try? self.row(id: first.id), row.state != .missing else { return false }
        let layout = SealedLayout(plainSize: row.file.size)
        let damaged = layout.map { $0.aligned(bytes) } ?? bytes
        var kept = row.state == .complete ? ByteRanges(0 ..< row.file.size) : row.ranges
        kept.remove(contentsOf: damaged)
        let head = row.startSet.map { kept.isSuperset(of: $0) } ?? false
        do {
            let changed = try withDatabase { db throws(CacheError) in
                try db.run("""
                    UPDATE files SET state = ?, ranges = ?, present_bytes = ?, head = ?, track_bytes = 0
                    WHERE id = ? AND generation = ?
                    """, [.int(kept.isEmpty ? 0 : 1), .blob(kept.encoded), .int(kept.byteCount), .int(head ? 1 : 0),
                          .int(row.id), .int(row.generation)])
            }
            guard changed == 1 else { return false }
        } catch {
            logger.warning("could not drop the damaged bytes of \(remote):\(path): \(error)")
            return false
        }
        logger.warning("\(remote):\(path): bytes \(damaged.lowerBound)-\(damaged.upperBound - 1) \(why); "
            + "dropped, they are fetched again")
        if row.state == .complete {
            var components = row.localPath.split(separator: "/").map(String.init)
            let leaf = components.popLast() ?? ""
            if let dir = try? fs.openDirectory(components, in: tracksFD, create: false, display: display("tracks/\(row.localPath)")) {
                // A track cut short on disk is given its full size back (a hole where bytes were lost), so the
                // next writer resumes this generation's partial file instead of restarting it.
                let track = openat(dir, leaf, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
                if track >= 0 {
                    var st = stat()
                    if fstat(track, &st) == 0, Int64(st.st_size) < row.diskSize { _ = ftruncate(track, off_t(row.diskSize)) }
                    Glibc.close(track)
                }
                if renameat(dir, leaf, partialFD, Cache.partialName(id: row.id, generation: row.generation)) != 0 {
                    _ = unlinkat(dir, leaf, 0)
                }
                Glibc.close(dir)
            }
        }
        return true
    }
}

/// The plaintext of one entry file, for ``Cache/verify(hasher:)``: read in order, 1 MiB at a time, decrypted
/// (and every block's tag checked: `.damaged`) when the entry is encrypted.
public struct EntryBytes {
    let file: EntryFile
    public let size: Int64
    /// The file read (for messages).
    public var path: String { file.display }

    public func forEachChunk(_ body: (Data) throws -> Void) throws {
        var at: Int64 = 0
        while at < size {
            let upper = min(size, at + (1 << 20))
            try body(try file.read(at ..< upper))
            at = upper
        }
    }
}

// MARK: Conversion (`cache encrypt`, `cache decrypt`)

/// What ``Cache/convert(sealing:progress:)`` did.
public struct ConversionReport: Sendable, Equatable {
    public var converted = 0
    public var convertedBytes: Int64 = 0
    /// Entries another process was writing: run the conversion again once it finished.
    public var skippedBusy: [String] = []
    /// Partial bytes that could not be carried over (bytes of an incomplete block); fetched again.
    public var droppedBytes: Int64 = 0
    /// Every entry is in the new form; the cache's mode says so.
    public var finished = false
}

extension Cache {
    /// Converts every entry with bytes into the form `sealing` asks for, entry by entry, safe against kill -9 and
    /// resumable: the cache's mode becomes `encrypting`/`decrypting` first (strict opens then name the command
    /// to finish it), each entry is rewritten into a new file of its next generation (synced, then renamed over
    /// the track or committed for a partial, in one index transaction), and the mode becomes `on`/`off` when no
    /// entry is left in the old form. Needs the key in ``encryption`` both ways. Older versions waiting in
    /// `tracks/` for their replacement are removed.
    public func convert(sealing: Bool, progress: (String) -> Void = { _ in }) throws(CacheError) -> ConversionReport {
        guard let key = encryption.key else {
            throw CacheError(.keyMissing, "converting the cache needs its key", path: rootPath)
        }
        try withDatabase { db throws(CacheError) in
            try db.withTransaction { () throws(CacheError) in
                try CacheEncryption.setMode(sealing ? .encrypting : .decrypting, key: key, db)
                // Plaintext needs no alignment (an aligned start set still covers its bytes), but a later
                // `cache encrypt` must align what was recorded meanwhile.
                if !sealing { _ = try db.run("DELETE FROM settings WHERE name = ?", [.text(Self.alignedStartSetsSetting)]) }
            }
            // From now on new heads are sealed blocks: count them so (the writers record them aligned).
            if sealing { try Self.alignStartSetsToSealedBlocks(db) }
        }
        var report = ConversionReport()
        let rows = try withDatabase { db throws(CacheError) in
            try db.query("""
                SELECT \(IndexSchema.rowColumns) FROM files WHERE present_bytes + track_bytes > 0 AND sealed = ?
                ORDER BY id
                """, [.int(sealing ? 0 : 1)], IndexRow.init)
        }
        for first in rows {
            guard let lock = try EntryLock.tryAcquire(cache: self, id: first.id, wait: false) else {
                report.skippedBusy.append("\(first.remote):\(first.path)")
                continue
            }
            defer { withExtendedLifetime(lock) {} }
            guard let row = try self.row(id: first.id), row.sealed != sealing,
                  row.presentBytes.addingSaturating(row.trackBytes) > 0 else { continue }
            let (bytes, dropped) = try convertEntry(row, sealing: sealing)
            report.converted += 1
            report.convertedBytes = report.convertedBytes.addingSaturating(bytes)
            report.droppedBytes = report.droppedBytes.addingSaturating(dropped)
            progress("\(row.remote):\(row.path)")
        }
        if report.skippedBusy.isEmpty {
            try withDatabase { db throws(CacheError) in
                try db.withTransaction { () throws(CacheError) in
                    let left = try db.first("""
                        SELECT EXISTS(SELECT 1 FROM files WHERE present_bytes + track_bytes > 0 AND sealed = ?)
                        """, [.int(sealing ? 0 : 1)]) { $0.int(0) != 0 } ?? false
                    if !left {
                        try CacheEncryption.setMode(sealing ? .on : .off, key: key, db)
                        report.finished = true
                    }
                }
            }
        }
        return report
    }

    /// Rewrites one entry (caller holds its lock) in the other form. Returns the plaintext bytes carried over
    /// and those dropped.
    private func convertEntry(_ row: IndexRow, sealing: Bool) throws(CacheError) -> (Int64, Int64) {
        // An older version waiting in tracks/ is plaintext (or ciphertext) of the wrong form: it goes.
        if row.state != .complete && row.trackBytes > 0 {
            removeTrack(row.localPath)
            try withDatabase { db throws(CacheError) in
                _ = try db.run("UPDATE files SET track_bytes = 0 WHERE id = ? AND generation = ?", [.int(row.id), .int(row.generation)])
            }
            if row.presentBytes == 0 {
                try withDatabase { db throws(CacheError) in
                    _ = try db.run("UPDATE files SET sealed = ? WHERE id = ? AND generation = ?",
                                   [.int(sealing ? 1 : 0), .int(row.id), .int(row.generation)])
                }
                return (0, 0)
            }
        }
        let complete = row.state == .complete
        let present = complete ? ByteRanges(0 ..< row.file.size) : row.ranges
        var carried = present
        if sealing, let layout = SealedLayout(plainSize: row.file.size) { carried = layout.wholeBlocks(in: present) }
        let newGeneration = row.generation + 1
        let name = Cache.partialName(id: row.id, generation: newGeneration)
        let source: EntryFile
        do {
            source = try openEntryFile(row)
        } catch where error.code == .damaged && complete {
            // A conversion cut between its rename and its commit left the track in the new form: record it.
            var converted = row
            converted.sealed = sealing
            converted.generation = newGeneration
            guard (try? openEntryFile(converted)) != nil else { throw error }
            try withDatabase { db throws(CacheError) in
                _ = try db.run("UPDATE files SET generation = ?, sealed = ? WHERE id = ? AND generation = ?",
                               [.int(newGeneration), .int(sealing ? 1 : 0), .int(row.id), .int(row.generation)])
            }
            return (row.file.size, 0)
        }
        let target = try createEntryFile(name, row: row, generation: newGeneration, sealed: sealing)
        do throws(CacheError) {
            try copyPlaintext(carried, from: source, to: target)
            do throws(Errno) { try io.fdatasync(target.fd) } catch {
                throw CacheError.system("fdatasync", errno: error.rawValue, path: target.display, cacheRoot: rootPath)
            }
        } catch {
            _ = unlinkat(partialFD, name, 0)
            throw error
        }
        if complete {
            // Like a promotion: the remote's mtime, then the rename over the track inside the index transaction.
            var times = row.file.modified.fileTimes
            _ = futimens(target.fd, &times)
            var components = row.localPath.split(separator: "/").map(String.init)
            let leaf = components.popLast() ?? ""
            let dir = try fs.openDirectory(components, in: tracksFD, create: true, display: display("tracks/\(row.localPath)"))
            defer { Glibc.close(dir) }
            try withDatabase { db throws(CacheError) in
                try db.withTransaction { () throws(CacheError) in
                    let changed = try db.run("UPDATE files SET generation = ?, sealed = ? WHERE id = ? AND generation = ?",
                                             [.int(newGeneration), .int(sealing ? 1 : 0), .int(row.id), .int(row.generation)])
                    guard changed == 1 else {
                        throw CacheError(.changed, "\(row.remote):\(row.path) changed while it was converted", path: row.path)
                    }
                    if renameat(partialFD, name, dir, leaf) != 0 {
                        throw fs.error("rename", display("tracks/\(row.localPath)"))
                    }
                }
            }
            _ = fsync(dir)
        } else {
            let changed = try withDatabase { db throws(CacheError) in
                try db.run("""
                    UPDATE files SET generation = ?, sealed = ?, ranges = ?, present_bytes = ?, state = ?, head = ?, validator = validator
                    WHERE id = ? AND generation = ?
                    """, [.int(newGeneration), .int(sealing ? 1 : 0), .blob(carried.encoded), .int(carried.byteCount),
                          .int(carried.isEmpty ? 0 : 1), .int(row.startSet.map { carried.isSuperset(of: $0) } ?? false ? 1 : 0),
                          .int(row.id), .int(row.generation)])
            }
            if changed == 1 {
                removePartial(Cache.partialName(id: row.id, generation: row.generation))
            } else {
                _ = unlinkat(partialFD, name, 0)
            }
        }
        return (carried.byteCount, present.byteCount - carried.byteCount)
    }
}

extension Cache {
    /// The `settings` row saying the recorded start sets are whole sealed blocks.
    static let alignedStartSetsSetting = "start_sets_in_sealed_blocks"

    /// Rounds every recorded start set out to whole sealed blocks (``SealedLayout/aligned(_:)-(ByteRanges)``), as
    /// a sealing writer records them (``EntryWriter/setStartSet(_:tags:duration:policy:)``). An encrypted cache
    /// stores a head as whole 64 KiB blocks, so a start set counted at its exact bytes made every plan
    /// undercount — a head of 512 KiB + 45 bytes and a 128 KiB tail takes 768 KiB — and pulls went over the
    /// budget (by 12 % with 1.4 MiB MP3s) while `cache evict` offered to shrink blocks it could not. Run when a
    /// cache that seals opens for the first time since (start sets recorded in plaintext or by an older
    /// build) and after `cache encrypt`; idempotent. Returns how many entries changed.
    @discardableResult
    static func alignStartSetsToSealedBlocks(_ db: Database) throws(CacheError) -> Int {
        try db.withTransaction { () throws(CacheError) -> Int in
            let rows = try db.query("SELECT id, size, start_set, state, ranges FROM files WHERE start_set IS NOT NULL") { row in
                (id: row.int(0), size: row.int(1), startSet: ByteRanges(encoded: row.blob(2)), complete: row.int(3) == 2,
                 ranges: ByteRanges(encoded: row.blob(4)) ?? ByteRanges())
            }
            var changed = 0
            for row in rows {
                guard let startSet = row.startSet, !startSet.isEmpty, let layout = SealedLayout(plainSize: row.size) else { continue }
                let aligned = layout.aligned(startSet)
                guard aligned != startSet else { continue }
                let head = row.complete || row.ranges.isSuperset(of: aligned)
                changed += try db.run("UPDATE files SET start_set = ?, start_bytes = ?, head = ? WHERE id = ?",
                                      [.blob(aligned.encoded), .int(aligned.byteCount), .int(head ? 1 : 0), .int(row.id)])
            }
            _ = try db.run("INSERT OR REPLACE INTO settings(name, value) VALUES (?, '1')", [.text(alignedStartSetsSetting)])
            return changed
        }
    }
}
