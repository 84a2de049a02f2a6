#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCore
import Foundation
import Synchronization

extension Cache {
    /// Opens the entry at `path` of `remote` for reading (for `serve`), touching its last access time (best
    /// effort: a full disk must not stop playback). Reading never blocks writers; it sees bytes once a writer
    /// has checkpointed them.
    /// Throws `.notFound` for an unknown entry. `touching: false` leaves the access time alone (the cache's own
    /// reads: analysing a track's start set is not an access).
    public func openReader(remote: String, path: String, touching: Bool = true) throws(CacheError) -> EntryReader {
        guard let row = try row(remote: remote, path: path) else { throw notFound(remote: remote, path: path) }
        if touching { touch(row) }
        return EntryReader(cache: self, row: row)
    }

    private func touch(_ row: IndexRow) {
        do {
            _ = try withDatabase { db throws(CacheError) in
                try db.run("UPDATE files SET last_access = ? WHERE id = ?", [.real(Date().timeIntervalSince1970), .int(row.id)])
            }
        } catch {
            logger.debug("could not record the access to \(row.remote):\(row.path): \(error)")
        }
    }
}

/// Reads one entry's present bytes, from the complete track or the partial file being filled.
/// Thread-safe. If the remote file changes (new fingerprint) or is removed while open, calls throw `.changed`.
///
/// Bytes served are always bytes the index vouches for *in the file this reader holds*: a partial file belongs
/// to one generation (its name carries it, and a replaced or removed partial takes its generation with it), so
/// the index's claims count only while its generation is the reader's. Once the reader holds a complete copy of
/// its version (it opened the track, or its partial was promoted), every byte stays good for as long as the
/// version is current, even when the cache meanwhile shrinks the entry to its head (the copy is unlinked, not
/// changed).
public final class EntryReader: Sendable {
    /// Metadata of the version this reader serves (size, MIME type, modified date…).
    public let file: RemoteFile
    public let remote: String

    private let cache: Cache
    private let id: Int64
    private let generation: Int64
    private let localPath: String
    /// The row this reader opened (its entry's form: plaintext or sealed).
    private let opened: IndexRow

    private struct State {
        var fd: Int32 = -1
        /// Opens the blocks of `fd` when the entry is encrypted.
        var sealer: Sealer?
        /// `fd` is a complete copy of this version.
        var fdComplete = false
        var present = ByteRanges()
        var closed = false
    }

    private let state: Mutex<State>

    init(cache: Cache, row: IndexRow) {
        self.cache = cache
        file = row.file
        remote = row.remote
        id = row.id
        generation = row.generation
        localPath = row.localPath
        opened = row
        state = Mutex(State(present: row.state == .complete ? ByteRanges(0..<row.file.size) : row.ranges))
    }

    deinit { close() }

    /// Byte ranges present now, re-read from the index. Throws `.changed` if the file changed or was removed.
    public func presentRanges() throws(CacheError) -> ByteRanges {
        let row = try cache.row(id: id)
        return try state.withLock { (s: inout State) throws(CacheError) -> ByteRanges in
            guard let row, row.file.fingerprint == file.fingerprint else { throw changed() }
            if s.fdComplete {
                s.present = ByteRanges(0 ..< file.size)
            } else if row.generation == generation {
                if row.state == .complete {
                    // Promoted: the partial's inode became the track, so an open descriptor now holds it all.
                    if s.fd >= 0 { s.fdComplete = true }
                    s.present = ByteRanges(0 ..< file.size)
                } else {
                    s.present = row.ranges
                }
            } else {
                throw changed()
            }
            return s.present
        }
    }

    private func changed() -> CacheError {
        CacheError(.changed, "\(remote):\(file.path) changed on the remote or was removed; open it again.", path: file.path)
    }

    /// Reads `range`, which must be present (see ``waitUntilPresent(_:timeout:)``); `.incomplete` otherwise.
    public func read(_ range: Range<Int64>) throws(CacheError) -> Data {
        guard range.lowerBound >= 0, range.upperBound <= file.size else {
            throw CacheError(.invalidArgument, "range \(range) is outside \(remote):\(file.path) (\(file.size) bytes)",
                             path: file.path)
        }
        if range.isEmpty { return Data() }
        if !state.withLock({ $0.present.containsAll(range) }) {
            guard try presentRanges().containsAll(range) else {
                throw CacheError(.incomplete, "bytes \(range) of \(remote):\(file.path) are not downloaded yet", path: file.path)
            }
        }
        let fd: Int32, sealer: Sealer?
        do {
            (fd, sealer) = try descriptor()
        } catch where error.code == .damaged && error.damagedBytes != nil {
            throw dropped(error)
        }
        let display = cache.display("tracks/\(localPath)")
        guard let sealer else {
            do {
                return try preadAll(fd: fd, range: range, display: display, cacheRoot: cache.rootPath)
            } catch where error.errno == EIO {
                // The file ends before bytes the index claims: it was cut short on disk (a tool, a repair).
                var st = stat()
                guard fstat(fd, &st) == 0, Int64(st.st_size) < range.upperBound else { throw error }
                let kept = max(0, Int64(st.st_size))
                var cut = CacheError(.damaged, "\(display) has \(kept) bytes on disk where the index expects \(file.size): "
                    + "it was cut short. The bytes after it are not served; they are fetched again.", path: display)
                cut.damagedBytes = kept ..< file.size
                throw dropped(cut)
            }
        }
        do {
            return try sealer.read(fd: fd, range: range, display: display, cacheRoot: cache.rootPath)
        } catch where error.code == .damaged {
            throw dropped(error)
        }
    }

    /// Bytes that failed their check (`error.damagedBytes`) are never served: they are dropped from the index, so
    /// the next pull or serve fetches them again. This reader no longer holds a complete copy: what is present is
    /// the index's to say again (the file keeps its inode and generation, so the descriptor stays good for the
    /// bytes fetched again). Returns `error`.
    private func dropped(_ error: CacheError) -> CacheError {
        if let bad = error.damagedBytes { cache.dropDamaged(remote: remote, path: file.path, bytes: bad) }
        state.withLock { s in
            s.fdComplete = false
            s.present = ByteRanges()
        }
        return error
    }

    /// Waits (polling the index every 50 ms) until every byte of `range` is present; returns false on timeout.
    /// Throws `.changed` if the file changed, and `CancellationError` when the task is cancelled.
    public func waitUntilPresent(_ range: Range<Int64>, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try presentRanges().containsAll(range) { return true }
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Releases the file descriptor. Idempotent.
    public func close() {
        state.withLock { s in
            if s.fd >= 0 { Glibc.close(s.fd) }
            s.fd = -1
            s.closed = true
        }
    }

    /// The open file: the partial file (whose inode becomes the track on completion, so an open descriptor
    /// stays valid), or the track when the entry is complete.
    private func descriptor() throws(CacheError) -> (Int32, Sealer?) {
        try state.withLock { (s: inout State) throws(CacheError) -> (Int32, Sealer?) in
            if s.fd >= 0 { return (s.fd, s.sealer) }
            guard !s.closed else {
                throw CacheError(.invalidArgument, "read from a closed reader of \(remote):\(file.path)", path: file.path)
            }
            let partial = Cache.partialName(id: id, generation: generation)
            let fd = openat(cache.partialFD, partial, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if fd >= 0 {
                // This generation's partial file (or, promoted since, the track it became).
                do throws(CacheError) {
                    s.sealer = try checkedSealer(fd, display: cache.display("partial/\(partial)"))
                } catch {
                    Glibc.close(fd)
                    throw error
                }
                s.fd = fd
                return (fd, s.sealer)
            }
            // Completed meanwhile (or was complete at open): read the track — but only if the index still says
            // the track is this version, checked after opening (a newer version may have replaced the file).
            var components = localPath.split(separator: "/").map(String.init)
            let leaf = components.popLast() ?? ""
            let track: Int32
            do throws(CacheError) {
                let dir = try cache.fs.openDirectory(components, in: cache.tracksFD, create: false,
                                                     display: cache.display("tracks/\(localPath)"))
                defer { Glibc.close(dir) }
                track = try cache.fs.openFile(leaf, in: dir, flags: O_RDONLY, display: cache.display("tracks/\(localPath)"))
            } catch where error.errno == ENOENT {
                // Deleted from tracks/ (by hand, by a tool) while the index calls it complete: every byte is
                // dropped from the index and fetched again, as for a track cut short.
                guard let row = try? cache.row(id: id), row.state == .complete, row.generation == generation else { throw changed() }
                cache.dropDamaged(remote: remote, path: file.path, bytes: 0 ..< file.size, why: "are gone from the disk (its file in tracks/ was deleted)")
                throw CacheError(.damaged, "\(cache.display("tracks/\(localPath)")) is gone from the disk although the index "
                    + "said it was complete; it is fetched again.", path: localPath)
            }
            guard let row = try? cache.row(id: id), row.state == .complete, row.file.fingerprint == file.fingerprint,
                  row.generation == generation else {
                Glibc.close(track)
                throw changed()
            }
            do throws(CacheError) {
                s.sealer = try checkedSealer(track, display: cache.display("tracks/\(localPath)"))
            } catch {
                Glibc.close(track)
                throw error
            }
            s.fd = track
            s.fdComplete = true
            s.present = ByteRanges(0 ..< file.size)
            return (track, s.sealer)
        }
    }

    /// For an encrypted entry, the sealer of the file open at `fd` (its size and header checked); nil otherwise.
    /// A file of the wrong size is never read: `.damaged`.
    private func checkedSealer(_ fd: Int32, display: String) throws(CacheError) -> Sealer? {
        guard opened.sealed else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, Int64(st.st_size) == opened.diskSize else {
            var error = CacheError(.damaged, "\(display) has \(st.st_size) bytes on disk where the index expects \(opened.diskSize); "
                + "the blocks it lacks are not served; they are fetched again.", path: display)
            if let layout = SealedLayout(plainSize: file.size), Int64(st.st_size) < opened.diskSize {
                // The blocks wholly on disk are kept (their tags still check them); the rest is fetched again.
                let whole = max(0, (Int64(st.st_size) - SealedLayout.headerSize) / (layout.blockSize + SealedLayout.tagSize))
                error.damagedBytes = min(file.size, whole * layout.blockSize) ..< file.size
            }
            throw error
        }
        return try cache.sealer(reading: fd, row: opened, generation: generation, display: display)
    }
}
