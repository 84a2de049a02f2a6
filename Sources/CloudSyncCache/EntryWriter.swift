#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation
import Synchronization

extension Cache {
    /// Opens the entry at `path` of `remote` for writing, taking its exclusive writer lock (``EntryLock``, so
    /// it excludes other processes and other writers in this one). With `wait: false` a held lock
    /// throws `.busy`; with `wait: true` the call blocks until the other writer closes.
    /// The partial file is created at full size (sparse). If the index claims bytes of a partial file that is
    /// gone or has the wrong size, those claims are dropped. Throws `.notFound` for an unknown entry.
    /// `id` is the entry's id when the caller has it (a pull's plan): its lookup by path is then skipped, and if
    /// that id now names another entry (a moved path, an id reused after a removal) the path is looked up.
    public func openWriter(remote: String, path: String, id known: Int64? = nil, wait: Bool = false) throws(CacheError) -> EntryWriter {
        if let known, let writer = try openWriter(knownID: known, remote: remote, path: path, wait: wait) {
            return writer
        }
        guard let id = try rowID(remote: remote, path: path) else { throw notFound(remote: remote, path: path) }
        guard let writer = try openWriter(id: id, remote: remote, path: path, wait: wait, checkingPath: false) else {
            throw CacheError(.changed, "\(remote):\(path) was removed from the index while waiting for its lock.", path: path)
        }
        return writer
    }

    /// The writer of entry `id` when it is still `remote`'s `path`, or nil (the caller looks the path up). When
    /// its lock is held, the entry is read without the lock: another entry's writer (the id was reused, the path
    /// moved) says nothing about this path, which is looked up instead of reported busy or waited for.
    private func openWriter(knownID id: Int64, remote: String, path: String, wait: Bool) throws(CacheError) -> EntryWriter? {
        do {
            return try openWriter(id: id, remote: remote, path: path, wait: false, checkingPath: true)
        } catch where error.code == .busy {
            guard let row = try self.row(id: id), row.remote == remote, row.file.path == path else { return nil }
            if !wait { throw error }
            return try openWriter(id: id, remote: remote, path: path, wait: true, checkingPath: true)
        }
    }

    /// The writer of entry `id` under its lock, or nil when the entry is gone (or, `checkingPath`, is no longer
    /// `remote`'s `path`); the lock is let go then.
    private func openWriter(id: Int64, remote: String, path: String, wait: Bool, checkingPath: Bool) throws(CacheError) -> EntryWriter? {
        let lock = try EntryLock.acquire(cache: self, id: id, wait: wait,
                                         busyMessage: "\(remote):\(path) is being downloaded by another cloudsync process. "
                                            + "Try again when it finishes.")
        // Read under the lock: the entry may have changed or gone while we waited.
        guard var row = try self.row(id: id), !checkingPath || (row.remote == remote && row.file.path == path) else { return nil }
        if try reconcilePromotion(row), let repaired = try self.row(id: id) { row = repaired }
        return try EntryWriter(cache: self, row: row, lock: lock)
    }

    /// Opens the entry for writing like ``openWriter(remote:path:id:wait:)``, waiting while another writer (of
    /// this process or another) holds its lock: non-blocking attempts with an async back-off (5 ms doubling to
    /// 100 ms, the `TokenStore.lock` idiom), so no thread is parked meanwhile. Cancellation ends the wait
    /// (`CancellationError`). `busy` is called once, when the first attempt finds the entry held (a pull lets the
    /// files behind this one go ahead meanwhile).
    public func openWriterWaiting(remote: String, path: String, id: Int64? = nil,
                                  busy: (@Sendable () -> Void)? = nil) async throws -> EntryWriter {
        var pause: UInt64 = 5_000_000
        while true {
            let held: CacheError
            do {
                return try openWriter(remote: remote, path: path, id: id, wait: false)
            } catch {
                held = error
            }
            guard held.code == .busy, held.errno == EWOULDBLOCK else { throw held }
            if pause == 5_000_000 { busy?() }
            try await Task.sleep(nanoseconds: pause)
            pause = min(pause * 2, 100_000_000)
        }
    }

    /// Repairs every entry whose promotion was cut between the rename into `tracks/` and the index commit (a
    /// kill -9, a full disk): the index claims every byte, the partial file is gone, and `tracks/` holds a file
    /// of the right size with the remote's mtime, which promotion sets just before the rename (after the hash
    /// was verified). Such an entry is marked complete. Cheap: only entries claiming every byte are looked at.
    /// Returns how many were repaired.
    @discardableResult
    public func reconcilePromotions() throws(CacheError) -> Int {
        let rows = try withDatabase { db throws(CacheError) in
            try db.query("SELECT \(IndexSchema.rowColumns) FROM files WHERE state = 1 AND present_bytes = size AND size > 0",
                         [], IndexRow.init)
        }
        var repaired = 0
        for row in rows {
            guard let lock = try EntryLock.tryAcquire(cache: self, id: row.id, wait: false) else { continue }
            defer { withExtendedLifetime(lock) {} }
            if let current = try self.row(id: row.id), try reconcilePromotion(current) { repaired += 1 }
        }
        return repaired
    }

    /// See ``reconcilePromotions()``; the caller holds the entry's lock.
    func reconcilePromotion(_ row: IndexRow) throws(CacheError) -> Bool {
        guard row.state == .partial, row.presentBytes == row.file.size, row.file.size > 0 else { return false }
        var st = stat()
        if fstatat(partialFD, Cache.partialName(id: row.id, generation: row.generation), &st, AT_SYMLINK_NOFOLLOW) == 0 {
            return false
        }
        var components = row.localPath.split(separator: "/").map(String.init)
        let leaf = components.popLast() ?? ""
        guard let dir = try? fs.openDirectory(components, in: tracksFD, create: false, display: display("tracks/\(row.localPath)"))
        else { return false }
        defer { Glibc.close(dir) }
        guard fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0, (st.st_mode & S_IFMT) == S_IFREG,
              Int64(st.st_size) == row.diskSize,
              Int64(st.st_mtim.tv_sec) == Int64(row.file.modified.timeIntervalSince1970.rounded(.down)) else { return false }
        let changed = try withDatabase { db throws(CacheError) in
            try db.run("""
                UPDATE files SET state = 2, ranges = NULL, present_bytes = 0, track_bytes = size, head = 1
                WHERE id = ? AND generation = ?
                """, [.int(row.id), .int(row.generation)])
        }
        if changed == 1 { logger.info("\(row.remote):\(row.path): its promotion into tracks/ was cut short; repaired") }
        return changed == 1
    }
}

extension Cache {
    /// Removes the `locks/entry-<id>.lock` files that builds before the shared entry lock file made (one flock
    /// file per entry being written, or per entry). Each is taken non-blocking first, so a file an older
    /// build still holds stays. Returns how many were removed; cheap once swept (a listing of `locks/`).
    @discardableResult
    public func removeLegacyLockFiles() -> Int {
        let prefix = "entry-", suffix = ".lock"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: display("locks"))) ?? []
        var removed = 0
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(suffix) {
            let fd = openat(locksFD, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) == 0, unlinkat(locksFD, name, 0) == 0 { removed += 1 }
            Glibc.close(fd)
        }
        return removed
    }
}

/// The writer lock of one entry: an exclusive open-file-description lock (`F_OFD_SETLK`, Linux 3.15) on byte
/// `id` of `locks/entries.lock`, released when deinitialized, by the kernel when the process dies. One file
/// serves every entry, so taking a lock creates and deletes no file. (A lock file per entry, created and unlinked
/// around every write, doubled what creating the partial files cost on ext4 without a journal, where each new
/// inode is checked against every inode deleted in the last 30 s; bench/README.) The locks of one `Cache` share
/// one descriptor (``EntryLockTable``).
final class EntryLock: Sendable {
    private let table: EntryLockTable
    private let id: Int64

    fileprivate init(table: EntryLockTable, id: Int64) {
        self.table = table
        self.id = id
    }

    /// Takes the lock; nil when `wait` is false and another holder has it (the caller maps that to an error).
    static func tryAcquire(cache: Cache, id: Int64, wait: Bool) throws(CacheError) -> EntryLock? {
        try cache.entryLocks.acquire(cache: cache, id: id, wait: wait)
    }

    static func acquire(cache: Cache, id: Int64, wait: Bool, busyMessage: String) throws(CacheError) -> EntryLock {
        guard let lock = try tryAcquire(cache: cache, id: id, wait: wait) else {
            throw CacheError(.busy, busyMessage, path: cache.display("locks/\(EntryLockTable.fileName)"), errno: EWOULDBLOCK)
        }
        return lock
    }

    deinit { table.release(id) }
}

/// The entry locks one `Cache` holds. One descriptor of `locks/entries.lock`, opened by the first lock and kept
/// until the cache closes, carries the kernel's byte-range lock of each (other processes' writers, and another
/// `Cache` of this process, conflict with it); the set of ids held excludes this cache's own writers from each
/// other, since the locks of one open file description never conflict. Before, each lock opened the file
/// itself: an `openat` and a `close` per file, and both the lock and the close walked the kernel's list of every
/// lock on the file, one per file in flight or waiting for its group commit (~3 % of a small-file pull's CPU);
/// one descriptor's locks on neighbouring ids merge into one range.
final class EntryLockTable: Sendable {
    static let fileName = "entries.lock"
    /// `F_OFD_SETLK` and `F_OFD_SETLKW` of Linux's `<fcntl.h>` (not exported to Swift without `_GNU_SOURCE`).
    private static let setLock: Int32 = 37, setLockWaiting: Int32 = 38

    private struct State {
        var fd: Int32 = -1
        var held: Set<Int64> = []
    }
    private let state = Mutex(State())

    init() {}

    deinit {
        state.withLock { if $0.fd >= 0 { Glibc.close($0.fd) } }
    }

    /// Takes byte `id`; nil when `wait` is false and a writer of this cache or another holder has it. The id is
    /// reserved in this cache first (no other writer of it then touches the byte), then locked in the kernel. With
    /// `wait` the calling thread blocks: polling every 2 ms while this cache holds the id, in `F_OFD_SETLKW` while
    /// another process does.
    func acquire(cache: Cache, id: Int64, wait: Bool) throws(CacheError) -> EntryLock? {
        let display = cache.display("locks/\(Self.fileName)")
        var fd: Int32 = -1
        while true {
            let reserved = try state.withLock { s throws(CacheError) -> Bool in
                guard !s.held.contains(id) else { return false }
                fd = try Self.descriptor(&s, cache: cache, display: display)
                s.held.insert(id)
                return true
            }
            if reserved { break }
            if !wait { return nil }
            usleep(2_000)
        }
        if let e = Self.lock(fd, id, type: F_WRLCK, command: wait ? Self.setLockWaiting : Self.setLock) {
            _ = state.withLock { $0.held.remove(id) }
            if !wait && (e == EAGAIN || e == EACCES) { return nil }
            throw CacheError.system(wait ? "fcntl(F_OFD_SETLKW)" : "fcntl(F_OFD_SETLK)", errno: e, path: display,
                                    cacheRoot: cache.rootPath)
        }
        return EntryLock(table: self, id: id)
    }

    /// Lets byte `id` go. Unlocking and forgetting the id are one step: once the id is free another writer of
    /// this cache may lock the byte again, and an unlock after that would drop its lock.
    fileprivate func release(_ id: Int64) {
        state.withLock { s in
            // An unlock that fails (ENOLCK splitting a range) leaves the byte locked against other processes
            // until this cache closes; this cache's writers go on (the id is free here, their lock a no-op).
            if s.fd >= 0 { _ = Self.lock(s.fd, id, type: F_UNLCK, command: Self.setLock) }
            s.held.remove(id)
        }
    }

    private static func descriptor(_ s: inout State, cache: Cache, display: String) throws(CacheError) -> Int32 {
        if s.fd < 0 {
            s.fd = try cache.fs.openFile(fileName, in: cache.locksFD, flags: O_RDWR | O_CREAT, mode: 0o600, display: display)
        }
        return s.fd
    }

    /// `fcntl(fd, command)` of byte `id`, retried on EINTR; the errno it failed with, or nil.
    private static func lock(_ fd: Int32, _ id: Int64, type: Int32, command: Int32) -> Int32? {
        var range = flock()
        range.l_type = Int16(type)
        range.l_whence = Int16(SEEK_SET)
        range.l_start = off_t(max(id, 0))
        range.l_len = 1
        while fcntl(fd, command, &range) != 0 {
            if errno != EINTR { return errno }
        }
        return nil
    }
}

/// Fills one entry's sparse partial file. Thread-safe: `write(_:at:)` may be called from a transport thread
/// while the cache's writer checkpoints.
///
/// Durability contract: bytes written are *pending* until a checkpoint, which fdatasyncs the partial file and
/// only then commits the ranges to the index. The index never claims bytes that are not on disk; a kill -9
/// loses at most the bytes since the last checkpoint. Readers in other processes see bytes after a checkpoint.
///
/// Threads: ``write(_:at:)`` and ``checkpointIfDue()`` only `pwrite` and take a short lock, so a transport's
/// network thread may call them; the checkpoint itself (fdatasync, then the index) runs on the cache's writer
/// queue (``CacheWriter``) and lags the transfer. A checkpoint that failed there is thrown by the next
/// `checkpointIfDue()`, ending that file's transfer only.
public final class EntryWriter: Sendable {
    public let remote: String
    public let path: String
    /// Size of the current version.
    public let size: Int64
    /// The partial file being filled (the engine may re-hash it). Gone after ``complete(expectedHash:verify:)``.
    /// Built on demand: most writers never need it, and a URL costs more to build than the rest of an open.
    public var partialURL: URL { cache.root.appendingPathComponent("partial/\(partialName)", isDirectory: false) }

    private let cache: Cache
    private let id: Int64
    /// The generation this writer fills. Every partial file has its own generation: a file that is replaced or
    /// removed takes its generation with it, so a reader's descriptor can never meet another file's claims.
    public let generation: Int64
    private let modified: Date
    private let localPath: String
    private let partialName: String
    /// `<cache>/partial/<name>`, for errors.
    let partialDisplay: String
    private let fd: Int32
    private let lock: Mutex<EntryLock?>

    private struct Pending {
        var ranges = ByteRanges()
        /// What the index holds (a copy of `Durable.committed`, updated in the same step as `ranges`), so that
        /// present ranges are read without waiting for a checkpoint in progress.
        var committed: ByteRanges
        var bytesSinceCheckpoint: Int64 = 0
        /// Bytes of the checkpoint running now (its snapshot), durable once it ends.
        var checkpointing: Int64 = 0
        var lastCheckpoint: ContinuousClock.Instant = .now
        var open = true
        /// A checkpoint is queued on the cache's writer.
        var checkpointQueued = false
        /// What the last queued checkpoint threw, for the next ``checkpointIfDue()`` to report.
        var failure: CacheError?
        /// ``verify(expectedHash:verify:)`` passed and nothing was written or discarded since.
        var verified = false
        /// A group commit claimed the file (``renameIntoTracks(db:folders:unsaved:)``) to rename it into `tracks/`: nothing
        /// may be discarded until it is complete or the batch gives it back (``promotionFailed()``).
        var promoting = false
    }

    private struct Durable {
        var committed: ByteRanges
        var completed: Bool
        /// The partial file's descriptor was closed (``close()``): a queued checkpoint finds nothing to do.
        var closed = false
        /// The start set, once known: a commit that covers it marks the entry `head`.
        var startSet: ByteRanges?
        /// The entity tag the present bytes were served under.
        var validator: String?
        /// The tags (the engine's JSON) and duration read from the start set.
        var tags: String?
        var duration: Double?
        /// The engine's key of the policy the start set was computed under.
        var startPolicy: String?
        var unsaved = Unsaved()
    }

    /// Columns set since the index last heard of them (``setValidator(_:)``, ``setStartSet(_:tags:duration:)``).
    /// They are written with the next commit of ranges, the promotion or ``close()``, not in a transaction of
    /// their own (two per file cost 5 % of the CPU of a pull of 2,000 small files): the index still never claims a byte
    /// without the validator it was served under, because both go in the same statement.
    private struct Unsaved {
        var validator = false
        var startSet = false
        /// Bumped on every change: a promotion clears only what it wrote.
        var version = 0
        var isEmpty: Bool { !validator && !startSet }

        func cleared() -> Unsaved { Unsaved(version: version) }
    }

    /// The `SET` assignments (each starting with `, `) and values of a writer's unsaved columns.
    struct UnsavedColumns {
        var assignments = ""
        var values: [SQLValue] = []
        var version = 0
    }

    /// An encrypted entry: the file's sealer and the blocks of which only some bytes arrived (sealed as they
    /// come, in memory until the block is whole: only whole blocks reach the disk).
    private struct SealState {
        /// Nil for a plaintext entry.
        var sealer: Sealer?
        var buffers: [Int64: BlockBuffer] = [:]
        /// Sealed-block buffers to reuse: no allocation per block once a transfer runs.
        var spare: [[UInt8]] = []
        /// The descriptor was closed (``close()``): reads go to the track or the index instead.
        var closed = false
    }

    /// A block whose bytes are arriving: the first `prefix` of them already sealed into `sealed` (the one copy
    /// they need: encrypted straight from the caller's buffer), and the plaintext of pieces that came ahead of
    /// them (rare: fetches are block-aligned and each arrives in order) until the gap is filled.
    private struct BlockBuffer {
        let start: Int64
        /// Plaintext bytes in the block.
        let count: Int64
        /// Ciphertext of `[start, start + prefix)`, then (once whole) the tag: `count + 16` bytes.
        var sealed: [UInt8]
        var prefix: Int64 = 0
        /// Pieces ahead of the prefix: their plaintext at their place in the block, and where they are (file offsets).
        var ahead: [UInt8]?
        var others: ByteRanges?
        let stream: SealStream

        init(sealer: Sealer, index: Int64, block: Range<Int64>, reusing spare: [UInt8]?) {
            start = block.lowerBound
            count = Int64(block.count)
            let size = Int(sealer.layout.blockSize + SealedLayout.tagSize)
            sealed = spare ?? [UInt8](unsafeUninitializedCapacity: size) { _, n in n = size }
            stream = sealer.stream(block: index)
        }

        /// Which bytes of the block arrived (file offsets).
        var filled: ByteRanges {
            var all = others ?? ByteRanges()
            if prefix > 0 { all.insert(contentsOf: start ..< start + prefix) }
            return all
        }

        var isWhole: Bool { prefix == count }

        /// Takes `piece` (file offset `offset`, inside the block). Bytes already taken are skipped: they are the
        /// same version's.
        mutating func add(_ piece: UnsafeRawBufferPointer, at offset: Int64) {
            let upper = offset + Int64(piece.count)
            let next = start + prefix
            guard upper > next else { return }
            guard offset <= next else {
                var held = ahead ?? [UInt8](repeating: 0, count: Int(count))
                held.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: Int(offset - start)).copyMemory(from: piece.baseAddress!, byteCount: piece.count) }
                ahead = held
                var set = others ?? ByteRanges()
                set.insert(contentsOf: offset ..< upper)
                others = set
                return
            }
            seal(UnsafeRawBufferPointer(rebasing: piece[Int(next - offset)...]))
            guard var held = others, let plain = ahead else { return }
            // The gap is filled up to the prefix: seal the pieces waiting right after it.
            while let first = held.ranges.first, first.lowerBound <= start + prefix {
                held.remove(contentsOf: first)
                guard first.upperBound > start + prefix else { continue }
                plain.withUnsafeBytes { seal(UnsafeRawBufferPointer(rebasing: $0[Int(prefix) ..< Int(first.upperBound - start)])) }
            }
            others = held.isEmpty ? nil : held
            if others == nil { ahead = nil }
        }

        private mutating func seal(_ plain: UnsafeRawBufferPointer) {
            let at = Int(prefix), stream = stream
            sealed.withUnsafeMutableBytes { stream.update(plain, into: $0.baseAddress!.advanced(by: at)) }
            prefix += Int64(plain.count)
        }

        /// Appends the tag (call once the block is whole) and returns the sealed block: ciphertext, then tag.
        mutating func finish() -> ArraySlice<UInt8> {
            let at = Int(count), stream = stream
            sealed.withUnsafeMutableBytes { stream.finish(tag: $0.baseAddress!.advanced(by: at)) }
            return sealed[0 ..< at + Int(SealedLayout.tagSize)]
        }
    }

    /// Held while a block is sealed and written, so a ``reset()`` (new salt, new key) never meets a block sealed
    /// under the old key.
    private let seal: Mutex<SealState>
    /// Where an encrypted entry's blocks are; nil for a plaintext entry.
    private let sealedLayout: SealedLayout?
    /// Guards bytes written but not yet committed. Lock order: `durable`, then `seal`, then `pending`.
    private let pending: Mutex<Pending>
    /// Held for a whole checkpoint, discard or completion; guards what the index holds.
    private let durable: Mutex<Durable>

    init(cache: Cache, row: IndexRow, lock: EntryLock) throws(CacheError) {
        self.cache = cache
        remote = row.remote
        path = row.path
        size = row.file.size
        id = row.id
        modified = row.file.modified
        localPath = row.localPath
        self.lock = Mutex(lock)
        if row.state == .complete {
            generation = row.generation
            partialName = Cache.partialName(id: row.id, generation: row.generation)
            partialDisplay = cache.display("partial/\(partialName)")
            fd = -1
            seal = Mutex(SealState())
            sealedLayout = nil
            pending = Mutex(Pending(committed: ByteRanges(0..<row.file.size)))
            durable = Mutex(Durable(committed: ByteRanges(0..<row.file.size), completed: true,
                                    startSet: row.startSet, validator: row.validator))
            return
        }
        // No filesystem holds 2^56 bytes (64 PiB); a listing that says so is hostile or broken.
        guard row.file.size >= 0, row.file.size < Int64(1) << 56 else {
            throw CacheError(.tooLarge, "\(row.remote):\(row.path) is listed with \(row.file.size) bytes, more than any "
                + "filesystem holds; it is skipped (the server's listing is wrong).", path: row.path)
        }
        var generation = row.generation
        var name = Cache.partialName(id: row.id, generation: generation)
        var committed = row.ranges
        // Nothing claimed (most opens: a file not fetched yet) and no partial file: one `openat` creates it.
        var created = false
        var fd: Int32 = -1
        if committed.isEmpty {
            fd = openat(cache.partialFD, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                created = true
            } else if errno != EEXIST {
                throw cache.fs.error("open", cache.display("partial/\(name)"))
            }
        }
        if !created { fd = openat(cache.partialFD, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC) }
        var st = stat()
        let sealing = cache.encryption.sealsNewFiles
        var sealer: Sealer?
        // A sealed file is kept only while it holds claimed blocks: a file that holds none is made afresh, with a
        // new salt, so no key ever seals other bytes under a nonce it used before.
        let sizeMatches = !created && fd >= 0 && fstat(fd, &st) == 0 && row.sealed == sealing
            && Int64(st.st_size) == row.diskSize
        if sizeMatches, !sealing || (!committed.isEmpty && {
            sealer = try? cache.sealer(reading: fd, row: row, generation: generation, display: name)
            return sealer != nil
        }()) {
            // The partial file is intact: keep what the index claims.
        } else {
            if !created {
                if fd < 0, errno != ENOENT { throw cache.fs.error("open", cache.display("partial/\(name)")) }
                if fd >= 0 { Glibc.close(fd) }
                // An encrypted file that nobody claims a byte of is simply made afresh (a new salt).
                let unclaimedSealed = sizeMatches && sealing && committed.isEmpty
                if !committed.isEmpty || (fd >= 0 && !unclaimedSealed) {
                    // The index claimed bytes of a file that is gone or damaged, or stored in the other form
                    // (`cache.encrypt` changed), and readers may still hold it open: the new file gets a generation
                    // of its own, so no reader takes its bytes for the old file's.
                    cache.logger.warning(row.sealed != sealing
                        ? "partial file of \(row.remote):\(row.path) is \(row.sealed ? "encrypted" : "plaintext") but cache.encrypt "
                            + "is \(sealing); restarting it (`cloudsync cache \(sealing ? "encrypt" : "decrypt")` converts instead)"
                        : "partial file of \(row.remote):\(row.path) was missing or truncated; restarting it")
                    generation = try cache.retireGeneration(id: row.id, generation: generation)
                    _ = unlinkat(cache.partialFD, name, 0)
                    name = Cache.partialName(id: row.id, generation: generation)
                    committed = ByteRanges()
                }
                fd = try cache.fs.openFile(name, in: cache.partialFD, flags: O_RDWR | O_CREAT | O_TRUNC, mode: 0o600,
                                           display: cache.display("partial/\(name)"))
            }
            if sealing {
                do throws(CacheError) {
                    let header = SealedHeader.fresh()
                    sealer = Sealer(cacheKey: try cache.sealingKey(for: row.remote, row.path), header: header, id: row.id,
                                    generation: generation, plainSize: row.file.size)
                    try pwriteAll(fd: fd, header.bytes, at: 0, io: cache.io, display: cache.display("partial/\(name)"),
                                  cacheRoot: cache.rootPath)
                } catch {
                    Glibc.close(fd)
                    _ = unlinkat(cache.partialFD, name, 0)
                    throw error
                }
            }
            if row.sealed != sealing {
                do throws(CacheError) {
                    _ = try cache.withDatabase { db throws(CacheError) in
                        try db.run("UPDATE files SET sealed = ? WHERE id = ? AND generation = ?",
                                   [.int(sealing ? 1 : 0), .int(row.id), .int(generation)])
                    }
                } catch {
                    Glibc.close(fd)
                    throw error
                }
            }
        }
        self.generation = generation
        partialName = name
        let display = cache.display("partial/\(name)")
        partialDisplay = display
        self.fd = fd
        seal = Mutex(SealState(sealer: sealer))
        sealedLayout = sealer?.layout
        pending = Mutex(Pending(committed: committed))
        durable = Mutex(Durable(committed: committed, completed: false, startSet: row.startSet,
                                validator: generation == row.generation ? row.validator : nil))
        let diskSize = sealer?.layout.diskSize ?? row.file.size
        do throws(Errno) {
            try cache.io.ftruncate(fd, diskSize)
        } catch {
            Glibc.close(fd)
            if committed.isEmpty { _ = unlinkat(cache.partialFD, name, 0) }
            throw CacheError.system("ftruncate", errno: error.rawValue, path: display, needing: diskSize,
                                    cacheRoot: cache.rootPath)
        }
        // The index must not claim bytes the partial file lost; when it claims exactly what is there (the
        // common case: a fresh entry or an intact partial), there is nothing to write.
        if committed != row.ranges && generation == row.generation {
            do {
                try commit(committed)
            } catch {
                Glibc.close(fd)
                throw error
            }
        }
    }

    deinit { close() }

    /// Bytes present on disk: committed to the index or written and pending.
    public func presentRanges() -> ByteRanges {
        pending.withLock { p in
            // Most calls find one side empty (a file shorter than a checkpoint, or all of it checkpointed).
            if p.committed.isEmpty { return p.ranges }
            if p.ranges.isEmpty { return p.committed }
            var all = p.committed
            all.formUnion(p.ranges)
            return all
        }
    }

    /// Byte ranges still to fetch, in order: neither on disk nor (encrypted entry) waiting in memory for the rest
    /// of their block.
    public func missingRanges() -> ByteRanges {
        var have = presentRanges()
        if sealedLayout != nil {
            seal.withLock { s in
                for buffer in s.buffers.values { have.formUnion(buffer.filled) }
            }
        }
        return have.gaps(within: 0..<size)
    }

    /// `range` widened to what a fetch should ask for so that every block it touches can be sealed: whole blocks
    /// for an encrypted entry (``SealedLayout``), `range` itself otherwise.
    public func aligned(_ range: Range<Int64>) -> Range<Int64> {
        sealedLayout?.aligned(range) ?? range
    }

    /// Whether the entry's bytes are stored encrypted.
    public var isSealed: Bool { sealedLayout != nil }

    /// Writes `bytes` at `offset` (pwrite; all of them or throws). The range becomes pending until the next
    /// checkpoint. Throws `.diskFull` (ENOSPC), `.io`, or `.invalidArgument` (outside the file or after close).
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(CacheError) {
        let end = offset + Int64(bytes.count)
        guard offset >= 0, end <= size else {
            throw CacheError(.invalidArgument, "write of \(bytes.count) bytes at \(offset) is outside \(remote):\(path) "
                + "(\(size) bytes); the server sent more than the listing said. Refresh the listing.", path: path)
        }
        guard pending.withLock({ $0.open }), fd >= 0 else {
            throw CacheError(.invalidArgument, "write to \(remote):\(path) after its writer was closed or completed", path: path)
        }
        if sealedLayout != nil {
            try writeSealed(bytes, at: offset)
            return
        }
        var done = 0
        while done < bytes.count {
            do throws(Errno) {
                let n = try cache.io.pwrite(fd, UnsafeRawBufferPointer(rebasing: bytes[done...]), offset + Int64(done))
                guard n > 0 else { throw Errno(EIO) }
                done += n
            } catch {
                throw CacheError.system("write", errno: error.rawValue, path: partialDisplay,
                                        needing: size, cacheRoot: cache.rootPath)
            }
        }
        if bytes.isEmpty { return }
        pending.withLock {
            $0.ranges.insert(contentsOf: offset..<end)
            $0.bytesSinceCheckpoint += Int64(bytes.count)
            $0.verified = false
        }
    }

    /// Seals `bytes` into their blocks as they arrive (``BlockBuffer``); a block whose bytes are all sealed gets
    /// its tag, is written whole with one `pwrite` and becomes pending. So the writing thread copies each byte
    /// once, as a plaintext write does, and encrypts it in that copy (like the provider's hash, work per byte
    /// that moves with the bytes; no other thread, queue or lock hand-off). Blocks already on disk are skipped:
    /// they hold the same version's bytes (a changed file restarts), and a block is never sealed twice under one
    /// key.
    private func writeSealed(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(CacheError) {
        let end = offset + Int64(bytes.count)
        try seal.withLock { (s: inout SealState) throws(CacheError) in
            guard let sealer = s.sealer else { return }
            let layout = sealer.layout
            var at = offset
            while at < end {
                let index = at / layout.blockSize
                let block = layout.plainRange(ofBlock: index)
                let piece = at ..< min(end, block.upperBound)
                let slice = UnsafeRawBufferPointer(rebasing: bytes[Int(piece.lowerBound - offset) ..< Int(piece.upperBound - offset)])
                at = piece.upperBound
                var gathering: BlockBuffer
                if let existing = s.buffers.removeValue(forKey: index) {
                    gathering = existing  // held here alone while it changes (no copy of its bytes)
                } else if pending.withLock({ $0.committed.containsAll(block) || $0.ranges.containsAll(block) }) {
                    continue
                } else {
                    gathering = BlockBuffer(sealer: sealer, index: index, block: block, reusing: s.spare.popLast())
                }
                gathering.add(slice, at: piece.lowerBound)
                guard gathering.isWhole else {
                    s.buffers[index] = gathering
                    continue
                }
                try pwriteAll(fd: fd, gathering.finish(), at: layout.diskOffset(ofBlock: index),
                              io: cache.io, display: partialDisplay, cacheRoot: cache.rootPath)
                if s.spare.count < 2 { s.spare.append(gathering.sealed) }
                pending.withLock {
                    $0.ranges.insert(contentsOf: block)
                    $0.bytesSinceCheckpoint += Int64(block.count)
                    $0.verified = false
                }
            }
        }
    }

    /// Asks the cache's writer for a checkpoint when ``CacheLimits/checkpointBytes`` were written or
    /// ``CacheLimits/checkpointInterval`` passed since the last one, and returns at once (one checkpoint is queued
    /// at a time). Call after each write; safe on a network thread. Throws what the previous queued checkpoint
    /// threw (`.diskFull`, `.io`, `.changed`), once.
    public func checkpointIfDue() throws(CacheError) {
        let due = try pending.withLock { (p: inout Pending) throws(CacheError) -> Bool in
            if let failure = p.failure {
                p.failure = nil
                throw failure
            }
            guard p.bytesSinceCheckpoint > 0, !p.checkpointQueued else { return false }
            guard p.bytesSinceCheckpoint >= cache.limits.checkpointBytes
                || ContinuousClock.now - p.lastCheckpoint >= cache.limits.checkpointInterval else { return false }
            p.checkpointQueued = true
            return true
        }
        guard due else { return }
        cache.writer.async { [self] in
            let outcome: CacheError?
            do throws(CacheError) { try checkpoint(); outcome = nil } catch { outcome = error }
            pending.withLock { p in
                p.checkpointQueued = false
                if let outcome { p.failure = outcome }
            }
        }
    }

    /// False while a queued checkpoint lags: two checkpoints' worth of bytes (``CacheLimits/checkpointBytes``)
    /// are written and not yet durable. The transfer then pauses (``ByteSink/acceptsBytes()``) until the
    /// checkpoint ends, so a kill -9 loses at most about two checkpoints of a file plus the bytes in flight, even
    /// when a busy disk makes its `fdatasync` slow. Safe on a network thread.
    public var acceptsBytes: Bool {
        let limit = cache.limits.checkpointBytes.addingSaturating(cache.limits.checkpointBytes)
        return pending.withLock { p in !p.checkpointQueued || p.bytesSinceCheckpoint.addingSaturating(p.checkpointing) < limit }
    }

    /// ``checkpoint()`` on the cache's writer, waited for without blocking the caller's thread. Flushes requested
    /// while the writer is busy are done together: their fdatasyncs are issued at once before each checkpoint
    /// runs (and then finds its bytes on disk), so many files flushing at once cost one journal commit.
    public func flush() async throws(CacheError) {
        try await withCheckedContinuation { (c: CheckedContinuation<Result<Void, CacheError>, Never>) in
            flush { c.resume(returning: $0) }
        }.get()
    }

    /// ``flush()`` without waiting: `done` is called with the outcome on the cache's writer queue.
    public func flush(then done: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        cache.writer.flush(self, then: done)
    }

    /// Makes every byte written so far durable and visible: fdatasync the partial file, then commit the ranges
    /// to the index (data before metadata). If fdatasync fails, the pending ranges are dropped (their pages may
    /// be lost) and must be fetched again. Throws `.diskFull`, `.io`, or `.changed` when the remote file changed
    /// (the entry's fingerprint moved on) or was removed since this writer opened. Blocks for the sync: async
    /// code calls ``flush()``.
    public func checkpoint() throws(CacheError) {
        try durable.withLock { (d: inout Durable) throws(CacheError) in
            guard !d.completed, !d.closed else { return }
            let snapshot = pending.withLock { p in
                p.checkpointing = p.bytesSinceCheckpoint
                p.bytesSinceCheckpoint = 0
                p.lastCheckpoint = .now
                return p.ranges
            }
            defer { pending.withLock { $0.checkpointing = 0 } }
            if snapshot.isEmpty {
                try saveUnsaved(&d)
                return
            }
            do throws(Errno) {
                try cache.io.fdatasync(fd)
            } catch {
                pending.withLock { $0.ranges.subtract(snapshot) }
                throw CacheError.system("fdatasync", errno: error.rawValue, path: partialDisplay,
                                        needing: size, cacheRoot: cache.rootPath)
            }
            var next = d.committed
            next.formUnion(snapshot)
            try commit(next, into: &d)
            pending.withLock { p in
                p.committed = next
                p.ranges.subtract(snapshot)
            }
        }
    }

    /// Forgets `range` (e.g. bytes that turned out wrong): removed from the index at once, and from pending.
    public func discard(_ range: Range<Int64>) throws(CacheError) {
        try durable.withLock { (d: inout Durable) throws(CacheError) in
            guard !d.completed else { return }
            // Whole blocks go from an encrypted entry: a block is on disk whole or not at all.
            let range = sealedLayout.map { $0.aligned(range) } ?? range
            var next = d.committed
            next.remove(contentsOf: range)
            // One step with the group commit's claim and with ``verify(expectedHash:verify:)``'s: either the
            // commit sees the verification gone and the bytes missing, and promotes nothing, or the discard is
            // refused.
            let refused = pending.withLock { p -> Bool in
                if p.promoting { return true }
                p.verified = false
                p.ranges.remove(contentsOf: range)
                p.committed = next
                return false
            }
            if refused {
                throw CacheError(.busy, "\(remote):\(path) is being moved into tracks/; its bytes cannot be dropped now",
                                 path: path)
            }
            if let layout = sealedLayout {
                seal.withLock { s in
                    for index in layout.blocks(covering: range) { s.buffers[index] = nil }
                }
            }
            try commit(next, into: &d)
        }
    }

    /// Drops every byte (e.g. the file changed mid-download) and frees their disk blocks.
    public func reset() throws(CacheError) {
        try discard(0..<size)
        // A complete version is never truncated: its file is the track.
        guard fd >= 0, !isCompleted else { return }
        guard sealedLayout != nil else {
            do throws(Errno) {
                try cache.io.ftruncate(fd, 0)
                try cache.io.ftruncate(fd, size)
            } catch {
                throw CacheError.system("ftruncate", errno: error.rawValue, path: partialDisplay, cacheRoot: cache.rootPath)
            }
            return
        }
        // A new salt, hence a new key: the next bytes (maybe another version) are never sealed under the nonces
        // of the old ones.
        try seal.withLock { (s: inout SealState) throws(CacheError) in
            let header = SealedHeader.fresh()
            guard let fresh = Sealer(cacheKey: try cache.sealingKey(for: remote, path), header: header, id: id,
                                     generation: generation, plainSize: size) else { return }
            do throws(Errno) {
                try cache.io.ftruncate(fd, 0)
                try cache.io.ftruncate(fd, fresh.layout.diskSize)
            } catch {
                throw CacheError.system("ftruncate", errno: error.rawValue, path: partialDisplay, cacheRoot: cache.rootPath)
            }
            try pwriteAll(fd: fd, header.bytes, at: 0, io: cache.io, display: partialDisplay, cacheRoot: cache.rootPath)
            s.sealer = fresh
            s.buffers = [:]
        }
    }

    /// ``read(_:)`` as an array (what the audio parsers take), read straight into it when the entry is not
    /// encrypted.
    public func readBytes(_ range: Range<Int64>) throws(CacheError) -> [UInt8] {
        guard sealedLayout == nil, fd >= 0, presentRanges().containsAll(range) else { return [UInt8](try read(range)) }
        return try preadBytes(fd: fd, range: range, display: partialDisplay, cacheRoot: cache.rootPath)
    }

    /// Reads present bytes (committed or pending). Throws `.incomplete` if any byte of `range` is missing.
    public func read(_ range: Range<Int64>) throws(CacheError) -> Data {
        guard presentRanges().containsAll(range) else {
            throw CacheError(.incomplete, "bytes \(range) of \(remote):\(path) are not downloaded yet", path: path)
        }
        guard fd >= 0 else {
            let reader = try cache.openReader(remote: remote, path: path, touching: false)
            defer { reader.close() }
            return try reader.read(range)
        }
        guard sealedLayout != nil else {
            return try preadAll(fd: fd, range: range, display: partialDisplay, cacheRoot: cache.rootPath)
        }
        // Under `seal`, which ``close()`` takes to close the descriptor: a read never meets a closed (or reused)
        // descriptor. (`serve` reads an encrypted entry through its writer, not through a descriptor of its own.)
        let read = seal.withLock { s -> Result<Data, CacheError>? in
            guard !s.closed, let sealer = s.sealer else { return nil }
            return Result { () throws(CacheError) in try sealer.read(fd: fd, range: range, display: partialDisplay, cacheRoot: cache.rootPath) }
        }
        guard let read else {
            let reader = try cache.openReader(remote: remote, path: path, touching: false)
            defer { reader.close() }
            return try reader.read(range)
        }
        do {
            return try read.get()
        } catch where error.code == .damaged {
            // A block changed on disk under us: it is dropped (fetched again), never handed out.
            if let bad = error.damagedBytes {
                cache.logger.warning("\(remote):\(path): \(error.message)")
                try? discard(bad)
            }
            throw error
        }
    }

    /// The start set of this version, if known.
    public var startSet: ByteRanges? { durable.withLock { $0.startSet } }

    /// The entity tag the present bytes were served under (persisted, so every pass and every later run sends
    /// it as `If-Range` and a file that changed in between restarts instead of mixing versions).
    public var validator: String? { durable.withLock { $0.validator } }

    /// Records the entity tag of the bytes written from now on (after ``reset()`` when it changed). The index
    /// learns it with the next commit of ranges (so before it claims any byte served under it), the promotion,
    /// a flush or ``close()``; at once for a complete entry.
    public func setValidator(_ validator: String?) throws(CacheError) {
        try durable.withLock { (d: inout Durable) throws(CacheError) in
            guard d.validator != validator else { return }
            d.validator = validator
            d.unsaved.validator = true
            d.unsaved.version += 1
            if d.completed || d.closed { try saveUnsaved(&d) }
        }
    }

    /// Records the start set of this version (the bytes a player needs to start it; computed by the engine from
    /// present bytes) with the tags and duration read from it (`tags`: the engine's JSON). From now on a commit
    /// that covers the start set marks the entry `head`. Written like ``setValidator(_:)``: with the next commit,
    /// the promotion, a flush or ``close()``, at once for a complete entry. Throws `.changed` if the remote file
    /// changed (for a complete entry; otherwise that next write does).
    /// `policy`: the engine's key of the policy it was computed under (a pull under another derives it again).
    public func setStartSet(_ ranges: ByteRanges, tags: String?, duration: Double?, policy: String? = nil) throws(CacheError) {
        // Sealed, the head is stored as whole blocks: the start set is what it takes (``Cache/alignStartSetsToSealedBlocks(_:)``).
        let clipped = ranges.intersection(ByteRanges(0 ..< size))
        let startSet = sealedLayout.map { $0.aligned(clipped) } ?? clipped
        try durable.withLock { (d: inout Durable) throws(CacheError) in
            d.startSet = startSet
            d.tags = tags
            d.duration = duration
            d.startPolicy = policy
            d.unsaved.startSet = true
            d.unsaved.version += 1
            if d.completed || d.closed { try saveUnsaved(&d) }
        }
    }

    /// Finishes the entry: ``verify(expectedHash:verify:)``, then ``promote()``.
    public func complete(expectedHash: ContentHash?, verify: (URL) throws -> String?) async throws {
        if isCompleted { return }
        try self.verify(expectedHash: expectedHash, verify: verify)
        try await promote()
    }

    /// Checks that every byte is present (committed or pending: no separate checkpoint, the promotion's sync
    /// makes every byte durable) and, if `expectedHash` is given, that `verify` (the hash of the partial file;
    /// nil when it cannot compute that kind, and the hash is then not checked) matches it. On mismatch every byte
    /// is discarded and `.hashMismatch` is thrown (fetch again once; a second mismatch is the caller's error to
    /// report). Throws `.incomplete` if bytes are missing. Allows ``promote()`` until the next write or discard.
    public func verify(expectedHash: ContentHash?, verify: (URL) throws -> String?) throws {
        if isCompleted { return }
        let missing = missingRanges()
        guard missing.isEmpty else {
            throw CacheError(.incomplete, "\(remote):\(path) still misses \(ByteSize.format(missing.byteCount)); fetch "
                + "the missing ranges before completing.", path: path)
        }
        if let expectedHash, let computed = try verify(partialURL), !expectedHash.matches(computed) {
            try reset()
            throw CacheError(.hashMismatch, "\(remote):\(path): downloaded bytes have \(expectedHash.kind.rawValue) "
                + "\(computed) but the provider says \(expectedHash.value); the bytes were discarded. Pull again; if it "
                + "repeats, the provider's copy or hash is inconsistent.", path: path)
        }
        // Checked again in the step that vouches for them: a block dropped since the check above (a reader found
        // it damaged, ``discard(_:)``) must not be promoted.
        let whole = pending.withLock { p -> Bool in
            let all = 0 ..< size
            guard p.ranges.containsAll(all) || p.committed.containsAll(all) || p.committed.union(p.ranges).containsAll(all)
            else { return false }
            p.verified = true
            return true
        }
        guard whole else {
            throw CacheError(.incomplete, "\(remote):\(path) lost bytes while it was verified (a block that failed its "
                + "check was dropped); they are fetched again before it is promoted.", path: path)
        }
    }

    /// Promotes the verified entry in the cache's next group commit (``PromotionBatch``): synced with the rest of
    /// the batch, given the remote's mtime, renamed atomically into `tracks/` (replacing an older version only
    /// now) and marked complete. Returns when that batch is done, within a fraction of a second of the call,
    /// without blocking the caller's thread. Nothing is done if it is already complete. Throws `.incomplete`
    /// unless ``verify(expectedHash:verify:)`` passed since the last write, `.changed` if the remote file changed
    /// meanwhile, `.diskFull`/`.io` from the sync, rename or index.
    public func promote() async throws(CacheError) {
        try await withCheckedContinuation { (c: CheckedContinuation<Result<Void, CacheError>, Never>) in
            promote { c.resume(returning: $0) }
        }.get()
    }

    /// ``promote()`` without waiting: `done` is called with the outcome, on the cache's writer queue once the
    /// file's group commit ran (at once, on the caller's thread, for a file already complete or not verified).
    public func promote(then done: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        if isCompleted { return done(.success(())) }
        guard pending.withLock({ $0.verified }) else {
            return done(.failure(CacheError(.incomplete, "\(remote):\(path) was changed after its verification (or never "
                + "verified); verify it before promoting it.", path: path)))
        }
        cache.writer.promote(self, in: cache, then: done)
    }

    // MARK: Steps of a group commit (``PromotionBatch``, on the cache's writer queue)

    var isCompleted: Bool { durable.withLock { $0.completed } }
    var isClosed: Bool { durable.withLock { $0.closed } }
    var descriptor: Int32 { fd }

    /// Gives the partial file the remote's modification time (before the rename: ``Cache/reconcilePromotions()``
    /// recognises a cut promotion by it). Nil when it worked.
    func setRemoteModificationTime() -> CacheError? {
        var times = modified.fileTimes
        return futimens(fd, &times) != 0 ? cache.fs.error("futimens", partialDisplay) : nil
    }

    /// Inside the batch's transaction: checks that the entry is still this generation, renames the partial into
    /// its folder of `tracks/` (``Cache/renameIntoTracks(from:name:localPath:folders:)``: made if needed, made again
    /// if a concurrent removal pruned it; `folders` keeps each folder open once per batch) and marks the entry
    /// complete. If the index update fails, the file is renamed back before the error is thrown.
    func renameIntoTracks(db: Database, folders: inout [String: Int32], unsaved: UnsavedColumns) throws(CacheError) -> (parent: Int32, leaf: String) {
        let claimed = pending.withLock { p -> Bool in
            guard p.verified else { return false }
            p.promoting = true
            return true
        }
        guard claimed else {
            throw CacheError(.incomplete, "\(remote):\(path) lost bytes after its verification (a block that failed its "
                + "check was dropped); they are fetched again before it is promoted.", path: path)
        }
        let current = try db.first("SELECT generation FROM files WHERE id = ?", [.int(id)]) { $0.int(0) }
        guard current == generation else { throw changedError }
        let (parent, leaf, _) = try cache.renameIntoTracks(from: cache.partialFD, name: partialName, localPath: localPath,
                                                           folders: &folders)
        do throws(CacheError) {
            try db.run("""
                UPDATE files SET state = 2, ranges = NULL, present_bytes = 0, track_bytes = size, head = 1,
                    last_access = ?\(unsaved.assignments)
                WHERE id = ?
                """, [.real(Date().timeIntervalSince1970)] + unsaved.values + [.int(id)])
        } catch {
            renameBack(from: parent, leaf: leaf)
            throw error
        }
        return (parent, leaf)
    }

    /// Undoes ``renameIntoTracks(db:folders:unsaved:)`` after its transaction failed: `tracks/` never holds a file the
    /// index does not know.
    func renameBack(from parent: Int32, leaf: String) {
        if renameat(parent, leaf, cache.partialFD, partialName) != 0 {
            cache.logger.warning("tracks/\(localPath) could not be moved back after a failed index update; the next "
                + "pull repairs it")
        }
    }

    /// The batch committed this entry, with the unsaved columns of `saved`.
    func markCompleted(saved: UnsavedColumns) {
        durable.withLock { d in
            d.completed = true
            if d.unsaved.version == saved.version { d.unsaved = d.unsaved.cleared() }
        }
        pending.withLock { $0.open = false }
    }

    /// The batch did not commit this entry (a failed sync, rename or transaction): its bytes may be dropped again.
    func promotionFailed() {
        pending.withLock { $0.promoting = false }
    }

    /// Checkpoints what is pending (failures are logged) and releases the writer lock. Idempotent.
    public func close() {
        let wasOpen = pending.withLock { p in
            let was = p.open
            p.open = false
            return was
        }
        if wasOpen && fd >= 0 {
            do throws(CacheError) { try checkpoint() } catch {
                cache.warnBookkeepingFailure("last checkpoint of \(remote):\(path) failed", error)
                if error.code == .diskFull { releaseUnclaimed() }
            }
        }
        // Under `durable`: a checkpoint still queued on the cache's writer either ran before or finds it closed.
        durable.withLock { d in
            // Once: a later call (the deinit) would only fail again the same way.
            if !d.closed {
                do throws(CacheError) { try saveUnsaved(&d) } catch {
                    cache.warnBookkeepingFailure("recording the start set or validator of \(remote):\(path) failed", error)
                }
            }
            if !d.closed && fd >= 0 {
                seal.withLock { s in
                    s.closed = true
                    Glibc.close(fd)
                }
            }
            d.closed = true
        }
        lock.withLock { $0 = nil }
    }

    /// Frees the disk blocks of a partial file the index claims no byte of (truncated to 0 and back to its size,
    /// as ``reset()`` does). Called when the last checkpoint failed for a full disk: those bytes are fetched again
    /// anyway (no writer trusts bytes the index does not vouch for), and left in place they kept the disk full —
    /// a group commit that failed on a full disk left its files' whole bytes behind, which no eviction sees. A
    /// file with claimed bytes keeps its unclaimed ones (at most about two checkpoints' worth, by the transfer's
    /// back-pressure); so does an encrypted one (its header is not the index's to drop).
    private func releaseUnclaimed() {
        guard sealedLayout == nil else { return }
        durable.withLock { d in
            guard !d.completed, !d.closed, fd >= 0, d.committed.isEmpty else { return }
            // Forgotten before they go: a reader of the partial file checks after reading that its bytes are
            // still present.
            pending.withLock { $0.ranges = ByteRanges() }
            do throws(Errno) {
                try cache.io.ftruncate(fd, 0)
                try cache.io.ftruncate(fd, size)
            } catch {
                cache.logger.debug("\(remote):\(path): could not free its unclaimed bytes: \(error)")
            }
        }
    }

    /// The `SET` assignments and values of `d`'s unsaved columns.
    private static func columns(_ d: Durable) -> UnsavedColumns {
        var out = UnsavedColumns(version: d.unsaved.version)
        if d.unsaved.validator {
            out.assignments += ", validator = ?"
            out.values.append(d.validator.map(SQLValue.text) ?? .null)
        }
        if d.unsaved.startSet {
            let ranges = d.startSet ?? ByteRanges()
            out.assignments += ", start_set = ?, start_bytes = ?, tags = ?, duration = ?, start_policy = ?"
            out.values += [ranges.isEmpty ? .null : .blob(ranges.encoded), .int(ranges.byteCount),
                           d.tags.map(SQLValue.text) ?? .null, d.duration.map(SQLValue.real) ?? .null,
                           d.startPolicy.map(SQLValue.text) ?? .null]
        }
        return out
    }

    /// The unsaved columns, for a promotion to write with its own update (taken before it locks the index:
    /// `durable` is always taken first).
    func unsavedColumns() -> UnsavedColumns { durable.withLock { Self.columns($0) } }

    /// Writes the unsaved columns on their own, and `head` (call with `durable` held): for a writer that will
    /// commit nothing more. Throws `.changed` if the remote file changed.
    private func saveUnsaved(_ d: inout Durable) throws(CacheError) {
        guard !d.unsaved.isEmpty else { return }
        let head = d.completed || (d.startSet.map { d.committed.isSuperset(of: $0) } ?? false)
        try update("head = ?", [.int(head ? 1 : 0)], with: Self.columns(d))
        d.unsaved = d.unsaved.cleared()
    }

    /// Commits `ranges` as present with `d`'s unsaved columns (call with `durable` held); `d.startSet` decides
    /// `head`.
    private func commit(_ ranges: ByteRanges, into d: inout Durable) throws(CacheError) {
        try commit(ranges, startSet: d.startSet, with: Self.columns(d))
        d.unsaved = d.unsaved.cleared()
        d.committed = ranges
    }

    /// Commits `ranges` as present (from init, or through ``commit(_:into:)``). `startSet` decides `head`.
    private func commit(_ ranges: ByteRanges, startSet: ByteRanges? = nil,
                        with unsaved: UnsavedColumns = UnsavedColumns()) throws(CacheError) {
        let head = startSet.map { ranges.isSuperset(of: $0) } ?? false
        try update("ranges = ?, present_bytes = ?, state = ?, head = ?",
                   [.blob(ranges.encoded), .int(ranges.byteCount), .int(ranges.isEmpty ? 0 : 1), .int(head ? 1 : 0)],
                   with: unsaved)
    }

    /// `UPDATE files SET <set>` plus the `unsaved` columns for this writer's version of the entry; throws
    /// ``changedError`` when the entry moved on (the remote file changed or was removed).
    private func update(_ set: String, _ values: [SQLValue], with unsaved: UnsavedColumns) throws(CacheError) {
        let changed = try cache.withDatabase { db throws(CacheError) in
            try db.run("UPDATE files SET \(set)\(unsaved.assignments) WHERE id = ? AND generation = ?",
                       values + unsaved.values + [.int(id), .int(generation)])
        }
        guard changed == 1 else { throw changedError }
    }

    private var changedError: CacheError {
        CacheError(.changed, "\(remote):\(path) changed on the remote (or was removed) while it downloaded; "
            + "pull again to fetch the new version.", path: path)
    }
}

/// Reads `range` of `fd` fully with pread into memory that is not zeroed first: serve reads a track 256 KiB at a
/// time, and zeroing fresh memory for each read costs about as much as the copy itself.
public func preadAll(fd: Int32, range: Range<Int64>, display: String, cacheRoot: String) throws(CacheError) -> Data {
    let count = Int(range.count)
    guard count > 0 else { return Data() }
    let bytes = malloc(count)!
    let failure = preadFully(fd: fd, into: UnsafeMutableRawBufferPointer(start: bytes, count: count), at: range.lowerBound)
    guard failure == 0 else {
        free(bytes)
        throw CacheError.system("read", errno: failure, path: display, cacheRoot: cacheRoot)
    }
    return Data(bytesNoCopy: bytes, count: count, deallocator: .free)
}

/// ``preadAll(fd:range:display:cacheRoot:)`` straight into an array: for parsers that take `[UInt8]`, one copy
/// (the kernel's) instead of two.
func preadBytes(fd: Int32, range: Range<Int64>, display: String, cacheRoot: String) throws(CacheError) -> [UInt8] {
    var failure: Int32 = 0
    let bytes = [UInt8](unsafeUninitializedCapacity: Int(range.count)) { buffer, initialized in
        failure = buffer.isEmpty ? 0 : preadFully(fd: fd, into: UnsafeMutableRawBufferPointer(buffer), at: range.lowerBound)
        initialized = failure == 0 ? buffer.count : 0
    }
    guard failure == 0 else { throw CacheError.system("read", errno: failure, path: display, cacheRoot: cacheRoot) }
    return bytes
}

/// Fills `buffer` from `fd` at `offset` with pread (retrying EINTR and short reads); 0, or the errno of the
/// failure (EIO when the file ends first).
func preadFully(fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
    var done = 0
    while done < buffer.count {
        let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + Int64(done)))
        if n < 0 {
            if errno == EINTR { continue }
            return errno
        }
        if n == 0 { return EIO }
        done += n
    }
    return 0
}
