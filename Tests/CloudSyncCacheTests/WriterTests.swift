@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Synchronization
import Testing
import TestSupport

@Suite struct WriterTests {
    @Test func writeCheckpointReadComplete() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url, limits: CacheLimits(checkpointBytes: 1 << 40, checkpointInterval: .seconds(3600)))
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 1000, modified: 1_600_000_000.5))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        #expect(FileManager.default.fileExists(atPath: writer.partialURL.path))
        #expect(try FileManager.default.attributesOfItem(atPath: writer.partialURL.path)[.size] as? Int == 1000)
        try writer.writePattern(100..<300)
        #expect(writer.missingRanges().ranges.map { $0 } == [0..<100, 300..<1000])
        // Pending bytes are not in the index yet.
        let reader = try cache.openReader(remote: "r", path: "a.mp3")
        #expect(try reader.presentRanges().isEmpty)
        try writer.checkpointIfDue()  // not due: limits are huge
        #expect(try reader.presentRanges().isEmpty)
        try writer.checkpoint()
        #expect(try reader.presentRanges().ranges.map { $0 } == [100..<300])
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .partial)
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.presentBytes == 200)
        #expect(try reader.read(150..<250) == Data(pattern(150..<250)))
        #expect(throws: CacheError.self) { try reader.read(250..<350) }
        #expect(try await reader.waitUntilPresent(0..<1000, timeout: .milliseconds(120)) == false)
        // Writes past the end are refused.
        let outside = #expect(throws: CacheError.self) { try writer.writePattern(990..<1001) }
        #expect(outside?.code == .invalidArgument)
        // Completion is refused while bytes are missing.
        let incomplete = await #expect(throws: CacheError.self) { try await writer.complete(expectedHash: nil) { _ in nil } }
        #expect(incomplete?.code == .incomplete)
        try await writer.fillAndComplete()
        #expect(try await reader.waitUntilPresent(0..<1000, timeout: .seconds(5)))
        #expect(try reader.read(0..<1000) == Data(pattern(0..<1000)))
        let entry = try #require(try cache.entry(remote: "r", path: "a.mp3"))
        #expect(entry.state == .complete)
        #expect(entry.presentBytes == 1000)
        #expect(try Data(contentsOf: entry.localURL) == Data(pattern(0..<1000)))
        let mtime = try #require(try FileManager.default.attributesOfItem(atPath: entry.localURL.path)[.modificationDate] as? Date)
        #expect(abs(mtime.timeIntervalSince1970 - 1_600_000_000.5) < 0.01)
        #expect(!FileManager.default.fileExists(atPath: writer.partialURL.path))
        writer.close()
        // A writer on a complete entry has nothing to do.
        let again = try cache.openWriter(remote: "r", path: "a.mp3")
        #expect(again.missingRanges().isEmpty)
        try await again.complete(expectedHash: nil) { _ in nil }
        #expect(try again.read(0..<10) == Data(pattern(0..<10)))
    }

    @Test func secondWriterIsBusyUntilTheFirstCloses() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3"))
        let first = try cache.openWriter(remote: "r", path: "a.mp3")
        let error = #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "a.mp3") }
        #expect(error?.code == .busy)
        #expect(error?.exitCode == .locked)
        try first.writePattern(0..<10)
        first.close()  // checkpoints what was pending
        let second = try cache.openWriter(remote: "r", path: "a.mp3")
        #expect(second.missingRanges().ranges.map { $0 } == [10..<1000])
        #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "nope.mp3") }
    }

    /// Entry locks are byte-range locks in one file: writing creates no file per entry, a waiter gets the lock
    /// once its holder closes, and a lock taken by another process on the entry's byte (Python's
    /// `F_OFD_SETLK`, as documented in docs/cache.md) makes the entry busy.
    @Test func entryLocksShareOneFileAndExcludeOtherProcesses() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("a.mp3", size: 100), remoteFile("b.mp3", size: 100)])
        let locks = dir.url.appendingPathComponent("locks")
        func lockFiles() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: locks.path).sorted() }

        let first = try cache.openWriter(remote: "r", path: "a.mp3")
        let other = try cache.openWriter(remote: "r", path: "b.mp3")
        other.close()
        let waiterLocked = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            if let waiter = try? cache.openWriter(remote: "r", path: "a.mp3", wait: true) {
                waiterLocked.signal()
                release.wait()
                waiter.close()
            } else {
                waiterLocked.signal()
            }
        }
        #expect(waiterLocked.wait(timeout: .now() + 0.3) == .timedOut)
        try await first.fillAndComplete()
        first.close()
        #expect(waiterLocked.wait(timeout: .now() + 10) == .success)
        let error = #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "a.mp3") }
        #expect(error?.code == .busy)
        release.signal()
        #expect(try lockFiles().filter { $0 != "index.lock" } == ["entries.lock"])

        // Another process locks byte <id of b.mp3> of locks/entries.lock.
        let id = try #require(cache.row(remote: "r", path: "b.mp3")?.id)
        let holder = try ChildProcess("python3", ["-c", """
            import fcntl, os, struct, sys, time
            fd = os.open(sys.argv[1], os.O_RDWR)
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, int(sys.argv[2]), 1, 0))
            print("locked", flush=True)
            sys.stdin.read()
            """, locks.appendingPathComponent("entries.lock").path, String(id)])
        _ = try await holder.waitForLine(prefix: "locked")
        let busy = #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "b.mp3") }
        #expect(busy?.code == .busy)
        holder.stop()
        for _ in 0 ..< 100 {
            guard let writer = try? cache.openWriter(remote: "r", path: "b.mp3") else {
                try await Task.sleep(for: .milliseconds(50))
                continue
            }
            writer.close()
            return
        }
        Issue.record("b.mp3 stayed locked after the other process ended")
    }

    /// One cache's locks share one descriptor, where the kernel merges neighbouring bytes into one range: letting
    /// one entry go frees exactly that entry, for this cache and for another (a second `Cache` of the same root
    /// has its own descriptor, so it meets the first one's locks as another process would), and writers that
    /// come and go in any order leave nothing locked.
    @Test func neighbouringEntryLocksAreLetGoOneByOne() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let names = (0 ..< 6).map { "t\($0).mp3" }
        try cache.upsert(remote: "r", files: names.map { remoteFile($0, size: 100) })
        let other = try Cache.open(root: dir.url)
        func busyInOther(_ name: String) -> Bool {
            do {
                try other.openWriter(remote: "r", path: name).close()
                return false
            } catch {
                return error.code == .busy
            }
        }
        var writers = try names.map { try cache.openWriter(remote: "r", path: $0) }
        #expect(names.allSatisfy(busyInOther))
        writers[2].close()
        #expect(names.map(busyInOther) == [true, true, false, true, true, true])
        // Still this cache's own: the ones held are busy here too, the one let go opens.
        #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: names[3]) }
        writers[2] = try cache.openWriter(remote: "r", path: names[2])
        var rng = SystemRandomNumberGenerator()
        for i in writers.indices.shuffled(using: &rng) { writers[i].close() }
        writers.removeAll()
        #expect(!names.contains(where: busyInOther))
        // The entries are free in this cache again.
        for name in names { try cache.openWriter(remote: "r", path: name).close() }
    }

    /// Lock files of older builds (one per entry) are swept; one an older build still holds stays.
    @Test func legacyLockFilesAreSwept() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let locks = dir.url.appendingPathComponent("locks")
        for name in ["entry-1.lock", "entry-2.lock", "entry-77.lock", "pull-r.lock"] {
            _ = FileManager.default.createFile(atPath: locks.appendingPathComponent(name).path, contents: nil)
        }
        let held = open(locks.appendingPathComponent("entry-2.lock").path, O_RDWR)
        defer { close(held) }
        #expect(flock(held, LOCK_EX) == 0)
        #expect(cache.removeLegacyLockFiles() == 2)
        let left = try FileManager.default.contentsOfDirectory(atPath: locks.path).filter { $0.hasPrefix("entry-") || $0.hasPrefix("pull-") }
        #expect(left.sorted() == ["entry-2.lock", "pull-r.lock"])
    }

    @Test func atomicCompletionKeepsTheOldCopyUntilTheNewOneIsVerified() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let v1 = remoteFile("song.flac", size: 500, revision: "v1", hashes: [ContentHash(kind: .sha256, value: "pattern")])
        try cache.upsert(remote: "r", file: v1)
        try await cache.openWriter(remote: "r", path: "song.flac").fillAndComplete()
        let url = try #require(try cache.entry(remote: "r", path: "song.flac")).localURL
        let old = try Data(contentsOf: url)
        var v2 = v1
        v2.revision = "v2"
        v2.size = 800
        #expect(try cache.upsert(remote: "r", file: v2) == .changed(wasComplete: true))
        let entry = try #require(try cache.entry(remote: "r", path: "song.flac"))
        #expect(entry.state == .missing)
        #expect(try Data(contentsOf: url) == old)  // the old copy still plays
        let writer = try cache.openWriter(remote: "r", path: "song.flac")
        #expect(writer.size == 800)
        try writer.writePattern(0..<800)
        try writer.checkpoint()
        #expect(try Data(contentsOf: url) == old)  // still old until verified
        // A wrong hash discards the new bytes and leaves the old copy alone.
        let error = await #expect(throws: CacheError.self) {
            try await writer.complete(expectedHash: ContentHash(kind: .sha256, value: "PATTERN-X")) { _ in "pattern" }
        }
        #expect(error?.code == .hashMismatch)
        #expect(writer.missingRanges().ranges.map { $0 } == [0..<800])
        #expect(try cache.entry(remote: "r", path: "song.flac")?.presentBytes == 0)
        #expect(try Data(contentsOf: url) == old)
        // Hex hashes compare case-insensitively.
        try writer.writePattern(0..<800)
        try await writer.complete(expectedHash: ContentHash(kind: .md5, value: "ABCDEF")) { _ in "abcdef" }
        #expect(try Data(contentsOf: url) == Data(pattern(0..<800)))
    }

    @Test func fingerprintChangeMidDownloadStopsTheOldWriter() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", revision: "1"))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0..<100)
        try writer.checkpoint()
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", revision: "2"))
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.presentBytes == 0)
        try writer.writePattern(100..<200)
        let error = #expect(throws: CacheError.self) { try writer.checkpoint() }
        #expect(error?.code == .changed)
        writer.close()
        let fresh = try cache.openWriter(remote: "r", path: "a.mp3")
        #expect(fresh.missingRanges().ranges.map { $0 } == [0..<1000])
    }

    @Test func discardAndReset() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3"))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0..<600)
        try writer.checkpoint()
        try writer.discard(100..<200)
        #expect(writer.missingRanges().ranges.map { $0 } == [100..<200, 600..<1000])
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.presentBytes == 500)
        try writer.reset()
        #expect(writer.missingRanges().ranges.map { $0 } == [0..<1000])
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .missing)
    }

    @Test func indexClaimsAreDroppedWhenThePartialFileIsGone() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3"))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0..<500)
        try writer.checkpoint()
        let partial = writer.partialURL
        writer.close()
        try FileManager.default.removeItem(at: partial)
        let again = try cache.openWriter(remote: "r", path: "a.mp3")
        #expect(again.missingRanges().ranges.map { $0 } == [0..<1000])
    }

    /// ENOSPC from an injected pwrite/fdatasync: clear error, the index never claims the failed bytes, and a
    /// complete entry is untouched.
    @Test func diskFullByFaultInjection() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let failWrites = Atomic<Bool>(false)
        let failSync = Atomic<Bool>(false)
        var io = FileIO.system
        let real = FileIO.system
        io.pwrite = { fd, buffer, offset throws(Errno) in
            if failWrites.load(ordering: .relaxed) {
                // A short write, then ENOSPC, as a nearly full disk does.
                if buffer.count > 1 { return try real.pwrite(fd, UnsafeRawBufferPointer(rebasing: buffer[..<(buffer.count / 2)]), offset) }
                throw Errno(ENOSPC)
            }
            return try real.pwrite(fd, buffer, offset)
        }
        io.fdatasync = { fd throws(Errno) in
            if failSync.load(ordering: .relaxed) { throw Errno(ENOSPC) }
            try real.fdatasync(fd)
        }
        let cache = try Cache.open(root: dir.url, io: io)
        try cache.upsert(remote: "r", files: [remoteFile("done.mp3", size: 100), remoteFile("a.mp3", size: 4096)])
        try await cache.openWriter(remote: "r", path: "done.mp3").fillAndComplete()
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0..<1000)
        try writer.checkpoint()
        failWrites.store(true, ordering: .relaxed)
        let error = #expect(throws: CacheError.self) { try writer.writePattern(1000..<2000) }
        #expect(error?.code == .diskFull)
        #expect(error?.exitCode == .ioError)
        #expect(error?.message.contains(dir.url.path) == true)
        #expect(error?.message.contains("4.0 KiB") == true)
        failWrites.store(false, ordering: .relaxed)
        try writer.writePattern(2000..<3000)
        failSync.store(true, ordering: .relaxed)
        let syncError = #expect(throws: CacheError.self) { try writer.checkpoint() }
        #expect(syncError?.code == .diskFull)
        failSync.store(false, ordering: .relaxed)
        // Only the bytes synced before the faults are claimed; the failed ones must be fetched again.
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.presentBytes == 1000)
        #expect(writer.missingRanges().ranges.map { $0 } == [1000..<4096])
        let done = try #require(try cache.entry(remote: "r", path: "done.mp3"))
        #expect(done.state == .complete)
        #expect(try Data(contentsOf: done.localURL) == Data(pattern(0..<100)))
        try await writer.fillAndComplete()
    }

    /// A disk that fills under a pull fails every writer in flight alike; their closing checkpoints are one
    /// warning, the rest debug lines, and a later close (the deinit) does not try again. Other failures stay
    /// warnings each. The unclaimed bytes of the full disk's writers are freed (they would keep it full).
    @Test func aFullDiskIsLoggedOnceAndItsUnclaimedBytesFreed() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let failSync = Atomic<Int32>(0)
        var io = FileIO.system
        let real = FileIO.system
        io.fdatasync = { fd throws(Errno) in
            let code = failSync.load(ordering: .relaxed)
            if code != 0 { throw Errno(code) }
            try real.fdatasync(fd)
        }
        let lines = Mutex<[(LogLevel, String)]>([])
        let logger = Logger(level: .debug) { level, message in lines.withLock { $0.append((level, message)) } }
        let cache = try Cache.open(root: dir.url, logger: logger, io: io)
        let names = (0 ..< 6).map { "t\($0).mp3" }
        try cache.upsert(remote: "r", files: names.map { remoteFile($0, size: 4096) })
        var writers: [EntryWriter] = []
        for name in names {
            let writer = try cache.openWriter(remote: "r", path: name)
            try writer.writePattern(0 ..< 1000)
            writers.append(writer)
        }
        failSync.store(ENOSPC, ordering: .relaxed)
        for writer in writers[..<4] { writer.close() }
        let full = lines.withLock { $0 }.filter { $0.1.contains("last checkpoint") }
        #expect(full.map(\.0) == [.warning, .debug, .debug, .debug])
        #expect(full.first?.1.contains("No space left for the cache in \(dir.url.path)") == true)
        failSync.store(EIO, ordering: .relaxed)
        for writer in writers[4...] { writer.close() }
        let all = lines.withLock { $0 }.filter { $0.1.contains("last checkpoint") }
        #expect(all.map(\.0) == [.warning, .debug, .debug, .debug, .warning, .warning])
        failSync.store(0, ordering: .relaxed)
        for writer in writers { writer.close() }
        #expect(lines.withLock { $0 }.count == all.count, "a second close logged again")
        // Nothing was claimed that is not durable: every entry still misses all its bytes. The partial files of the
        // full disk hold no blocks any more (their bytes would be fetched again anyway); the others keep theirs.
        for (i, name) in names.enumerated() {
            #expect(try cache.entry(remote: "r", path: name)?.presentBytes == 0)
            var st = stat()
            #expect(stat(writers[i].partialURL.path, &st) == 0)
            #expect(st.st_size == 4096)
            #expect((st.st_blocks == 0) == (i < 4), "\(name): \(st.st_blocks) blocks")
        }
    }

    /// SQLite's result codes and the errno behind them, as `CacheError`s: a full disk is `.diskFull` whether SQLite
    /// says FULL or an I/O error caused by ENOSPC/EDQUOT, and its message names the cache, not the statement.
    @Test(arguments: [
        (13, 0, CacheError.Code.diskFull),  // SQLITE_FULL
        (1802, Int(ENOSPC), .diskFull),      // SQLITE_IOERR_FSTAT of a full disk
        (778, Int(EDQUOT), .diskFull),       // SQLITE_IOERR_WRITE over quota
        (778, Int(EIO), .io),                // SQLITE_IOERR_WRITE of a failing disk
        (10, 0, .io),                        // SQLITE_IOERR
        (14, Int(EROFS), .io),               // SQLITE_CANTOPEN on a read-only filesystem
        (5, 0, .busy),                       // SQLITE_BUSY
        (11, 0, .corrupt),                   // SQLITE_CORRUPT
        (26, 0, .corrupt),                   // SQLITE_NOTADB
    ] as [(Int, Int, CacheError.Code)])
    func sqliteErrors(code: Int, systemErrno: Int, expected: CacheError.Code) {
        let error = Database.error(code: Int32(code), message: "m", systemErrno: Int32(systemErrno),
                                   sql: "UPDATE files SET ranges = ?", path: "/c/index.sqlite")
        #expect(error.code == expected)
        #expect(error.message.contains("UPDATE files") == (expected != .diskFull && systemErrno != Int(EROFS)))
        if expected == .diskFull { #expect(error.message.hasPrefix("No space left for the cache in /c:")) }
        if systemErrno == Int(EROFS) { #expect(error.message.contains("Read-only file system") && error.message.contains("writable")) }
    }

    @Test func verifyRepairsMismatches() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let hash = [ContentHash(kind: .sha256, value: "pattern")]
        try cache.upsert(remote: "r", files: [remoteFile("good.mp3", hashes: hash), remoteFile("bad.mp3", hashes: hash),
                                              remoteFile("nohash.mp3"), remoteFile("gone.mp3", hashes: hash)])
        for name in ["good.mp3", "bad.mp3", "nohash.mp3", "gone.mp3"] {
            try await cache.openWriter(remote: "r", path: name).fillAndComplete()
        }
        let bad = try #require(try cache.entry(remote: "r", path: "bad.mp3")).localURL
        let handle = try FileHandle(forWritingTo: bad)
        try handle.write(contentsOf: Data([0xFF, 0xFF]))
        try handle.close()
        try FileManager.default.removeItem(at: try #require(try cache.entry(remote: "r", path: "gone.mp3")).localURL)
        let report = try cache.verify { _, bytes in try patternVerifier(bytes) }
        #expect(report.checked == 3)
        #expect(report.skippedNoHash == 1)
        #expect(report.mismatched == ["r:bad.mp3"])
        #expect(report.vanished == ["r:gone.mp3"])
        #expect(report.wrongSize.isEmpty && report.mtimeDrift.isEmpty)
        #expect(try cache.entry(remote: "r", path: "bad.mp3")?.state == .missing)
        #expect(!FileManager.default.fileExists(atPath: bad.path))
        #expect(try cache.entry(remote: "r", path: "good.mp3")?.state == .complete)
    }

    /// Without a provider hash (plain WebDAV) a truncated track is found by its size, and a touched one is
    /// reported by its mtime (#20.9).
    @Test func verifyComparesSizeAndMtimeWithoutAHash() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("cut.mp3"), remoteFile("touched.mp3"), remoteFile("fine.mp3")])
        for name in ["cut.mp3", "touched.mp3", "fine.mp3"] { try await cache.openWriter(remote: "r", path: name).fillAndComplete() }
        let cut = try #require(try cache.entry(remote: "r", path: "cut.mp3")).localURL
        #expect(truncate(cut.path, 500) == 0)
        let touched = try #require(try cache.entry(remote: "r", path: "touched.mp3")).localURL
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)], ofItemAtPath: touched.path)
        let report = try cache.verify { _, _ in Issue.record("no hash to compute"); return "" }
        #expect(report.checked == 3)
        #expect(report.skippedNoHash == 2)
        #expect(report.wrongSize == ["r:cut.mp3"])
        #expect(report.mtimeDrift == ["r:touched.mp3"])
        #expect(try cache.entry(remote: "r", path: "cut.mp3")?.state == .missing)
        #expect(try cache.entry(remote: "r", path: "touched.mp3")?.state == .complete)
    }

    /// A track that another process evicts while verify reads it is not reported as missing (#19.13).
    @Test func verifyIgnoresATrackEvictedMeanwhile() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let hash = [ContentHash(kind: .sha256, value: "pattern")]
        try cache.upsert(remote: "r", files: [remoteFile("a.mp3", hashes: hash), remoteFile("b.mp3", hashes: hash)])
        for name in ["a.mp3", "b.mp3"] { try await cache.openWriter(remote: "r", path: name).fillAndComplete() }
        let other = try Cache.open(root: dir.url)
        let report = try cache.verify { _, bytes in
            if bytes.path.hasSuffix("/a.mp3") { _ = try other.dropBytes(remote: "r", paths: ["a.mp3"]) }
            return try patternVerifier(bytes)
        }
        #expect(report.vanished.isEmpty && report.mismatched.isEmpty, "\(report)")
        #expect(try cache.entry(remote: "r", path: "b.mp3")?.state == .complete)
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .missing)
    }

    @Test func pullLockNamesTheHolder() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let lock = try await cache.pullLock(remote: "music", wait: false)
        let error = await #expect(throws: CacheError.self) { try await cache.pullLock(remote: "music", wait: false) }
        #expect(error?.code == .locked)
        #expect(error?.exitCode == .locked)
        #expect(error?.message.contains("pulling remote music") == true)
        #expect(error?.message.contains("pid \(getpid())") == true)
        #expect(error?.message.contains("--wait") == true)
        let other = try await cache.pullLock(remote: "other", wait: false)
        lock.release()
        let again = try await cache.pullLock(remote: "music", wait: true)
        again.release()
        other.release()
    }

    /// Waiting for a held lock parks no thread and ends when the task is cancelled (`pull --wait` under Ctrl-C).
    @Test func waitingForThePullLockIsCancellable() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let held = try await cache.pullLock(remote: "music", wait: false)
        defer { held.release() }
        let (announced, continuation) = AsyncStream<String>.makeStream()
        let waiter = Task {
            try await cache.pullLock(remote: "music", wait: true) { holder in continuation.yield(holder) }
        }
        var holders = announced.makeAsyncIterator()
        #expect(await holders.next() == "\(getpid())")
        waiter.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiter.value }
    }

    /// A pull opens a writer by the id its plan gave (no lookup by path); an id that names another entry now, or
    /// none, falls back to the path, so the writer is always the asked path's.
    @Test func openingByIDFallsBackToThePathWhenTheIDIsStale() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3", size: 100))
        try cache.upsert(remote: "r", file: remoteFile("b.mp3", size: 200))
        try cache.upsert(remote: "other", file: remoteFile("a.mp3", size: 300))
        let a = try #require(try cache.rowID(remote: "r", path: "a.mp3"))
        let b = try #require(try cache.rowID(remote: "r", path: "b.mp3"))
        let otherA = try #require(try cache.rowID(remote: "other", path: "a.mp3"))
        for (path, id, size) in [("a.mp3", a, Int64(100)), ("a.mp3", b, 100), ("b.mp3", 9_999, 200), ("a.mp3", otherA, 100)] {
            let writer = try cache.openWriter(remote: "r", path: path, id: id)
            #expect(writer.remote == "r" && writer.path == path && writer.size == size, "\(path) by id \(id)")
            writer.close()
        }
        // While the right writer is open, the entry is busy, whatever id is given.
        let held = try cache.openWriter(remote: "r", path: "a.mp3", id: a)
        let busy = #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "a.mp3", id: b) }
        #expect(busy?.code == .busy)
        // Another entry's writer holding the stale id's lock says nothing about this path: it opens.
        let other = try cache.openWriter(remote: "r", path: "b.mp3", id: a)
        #expect(other.path == "b.mp3" && other.size == 200)
        // Nor does it make a missing path busy.
        let stillMissing = #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "c.mp3", id: a) }
        #expect(stillMissing?.code == .notFound)
        other.close()
        held.close()
        let missing = #expect(throws: CacheError.self) { try cache.openWriter(remote: "r", path: "c.mp3", id: a) }
        #expect(missing?.code == .notFound)
    }
}
