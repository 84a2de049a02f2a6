@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Synchronization
import Testing
import TestSupport

@Suite struct IndexTests {
    @Test func upsertReportsOutcomesAndKeepsMetadata() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let file = remoteFile("A/one.mp3", hashes: [ContentHash(kind: .quickXor, value: "ab+/cd==")])
        #expect(try cache.upsert(remote: "r", files: [file, remoteFile("A/two.mp3")]) == [.new, .new])
        #expect(try cache.upsert(remote: "r", file: file) == .same(complete: false, presentBytes: 0))
        var changed = file
        changed.revision = "r2"
        #expect(try cache.upsert(remote: "r", file: changed) == .changed(wasComplete: false))
        let entry = try #require(try cache.entry(remote: "r", path: "A/one.mp3"))
        #expect(entry.file == changed)
        #expect(entry.state == .missing)
        #expect(entry.localPath == "r/A/one.mp3")
        #expect(entry.localURL.path == dir.url.path + "/tracks/r/A/one.mp3")
        #expect(try cache.entries(remote: "r").map(\.path) == ["A/one.mp3", "A/two.mp3"])
        #expect(try cache.entries(remote: "other").isEmpty)
        #expect(try cache.knownPaths(remote: "r") == ["A/one.mp3", "A/two.mp3"])
    }

    /// A listing that finds a file unchanged (same fingerprint) records its other listed columns when they are new
    /// (a hash the provider now gives, a MIME type, a download hint, a sub-second mtime, a new provider id), writes
    /// nothing when they are not, and lists a track kept as deleted remotely again.
    @Test func unchangedFilesKeepTheirListedColumnsCurrent() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        var file = remoteFile("A/one.mp3")
        try cache.upsert(remote: "r", file: file)
        #expect(try cache.upsert(remote: "r", file: file) == .same(complete: false, presentBytes: 0))
        file.hashes = [ContentHash(kind: .sha256, value: "00ff")]
        file.mimeType = "audio/flac"
        file.downloadHint = "https://example.invalid/one"
        file.providerID = "id-2"
        file.modified = file.modified.addingTimeInterval(0.25)  // the same whole second: the same fingerprint
        #expect(try cache.upsert(remote: "r", file: file) == .same(complete: false, presentBytes: 0))
        #expect(try cache.entry(remote: "r", path: "A/one.mp3")?.file == file)
        try cache.markDeletedRemotely(remote: "r", paths: ["A/one.mp3"])
        #expect(try cache.entry(remote: "r", path: "A/one.mp3")?.deletedRemotely != nil)
        #expect(try cache.upsert(remote: "r", file: file) == .same(complete: false, presentBytes: 0))
        #expect(try cache.entry(remote: "r", path: "A/one.mp3")?.deletedRemotely == nil)
        #expect(try cache.entry(remote: "r", path: "A/one.mp3")?.file == file)
    }

    @Test func cursorsRoundTrip() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        #expect(try cache.cursor(remote: "r") == nil)
        try cache.setCursor("abc", remote: "r")
        try cache.setCursor("def", remote: "r")
        #expect(try cache.cursor(remote: "r") == "def")
        try cache.setCursor(nil, remote: "r")
        #expect(try cache.cursor(remote: "r") == nil)
        // Reopening keeps everything (and does not re-run migrations).
        try cache.setCursor("kept", remote: "r")
        #expect(try Cache.open(root: dir.url).cursor(remote: "r") == "kept")
    }

    @Test func hostileNamesStayInsideTheCacheAndNeverCollide() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let paths = ["..", "a/../../etc/passwd.mp3", "nul\u{0}.mp3", String(repeating: "n", count: 300) + ".mp3",
                     "Caf\u{E9}.mp3", "Cafe\u{301}.mp3", "ABC.mp3", "abc.mp3", "a/./b.mp3", "a/b.mp3"]
        try cache.upsert(remote: "../evil", files: paths.map { remoteFile($0, size: 10) })
        let entries = try cache.entries(remote: "../evil")
        #expect(entries.count == paths.count)
        let keys = Set(entries.map { LocalPath.collisionKey($0.localPath) })
        #expect(keys.count == paths.count)
        let abc = try #require(entries.first { $0.path == "ABC.mp3" })
        let lower = try #require(entries.first { $0.path == "abc.mp3" })
        #expect(abc.localPath == ".._evil/ABC.mp3")  // "/" in the remote name became "_"; first one keeps its name
        #expect(lower.localPath.hasPrefix(".._evil/abc~") && lower.localPath.hasSuffix(".mp3"))
        for entry in entries {
            #expect(entry.localPath.hasPrefix(".._evil/"))
            let writer = try cache.openWriter(remote: "../evil", path: entry.path)
            try await writer.fillAndComplete()
            writer.close()
            let resolved = entry.localURL.standardizedFileURL.path
            #expect(resolved.hasPrefix(dir.url.path + "/tracks/.._evil/"))
            #expect(FileManager.default.fileExists(atPath: entry.localURL.path))
        }
        // Stable across runs: a new index over the same listing gives the same names.
        let dir2 = try TemporaryDirectory()
        defer { dir2.cleanup() }
        let again = try Cache.open(root: dir2.url)
        try again.upsert(remote: "../evil", files: paths.map { remoteFile($0, size: 10) })
        #expect(try again.entries(remote: "../evil").map(\.localPath) == entries.map(\.localPath))
    }

    @Test func refusesSymlinksInsideTheCache() async throws {
        let dir = try TemporaryDirectory()
        let outside = try TemporaryDirectory(prefix: "cloudsync-outside")
        defer { dir.cleanup(); outside.cleanup() }
        try FileManager.default.createDirectory(at: outside.url, withIntermediateDirectories: true)
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("link/x.mp3", size: 10))
        try FileManager.default.createDirectory(at: dir.url.appendingPathComponent("tracks/r"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: dir.url.appendingPathComponent("tracks/r/link"), withDestinationURL: outside.url)
        let writer = try cache.openWriter(remote: "r", path: "link/x.mp3")
        let error = await #expect(throws: CacheError.self) { try await writer.fillAndComplete() }
        #expect(error?.code == .corrupt)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.url.path).isEmpty)
    }

    /// cache.dir may itself be a symlink (a cache moved to a bigger disk): the root is the user's choice and is
    /// followed; links inside it still are not. (SQLite's NOFOLLOW open refused the index before: "unable to
    /// open database file".)
    @Test func aCacheDirThatIsASymlinkWorks() async throws {
        let real = try TemporaryDirectory(prefix: "cloudsync-real")
        let holder = try TemporaryDirectory(prefix: "cloudsync-link")
        defer { real.cleanup(); holder.cleanup() }
        try FileManager.default.createDirectory(at: real.url, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: holder.url, withIntermediateDirectories: true)
        let link = holder.url.appendingPathComponent("cache")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real.url)
        let cache = try Cache.open(root: link)
        try cache.upsert(remote: "r", file: remoteFile("A/x.mp3", size: 100))
        try await cache.openWriter(remote: "r", path: "A/x.mp3").fillAndComplete()
        #expect(try cache.entry(remote: "r", path: "A/x.mp3")?.state == .complete)
        #expect(try Data(contentsOf: real.url.appendingPathComponent("tracks/r/A/x.mp3")) == Data(pattern(0 ..< 100)))
        #expect(FileManager.default.fileExists(atPath: real.url.appendingPathComponent("index.sqlite").path))
    }

    /// A disk that takes every name is asked once: the next opens of the cache write nothing to find out (the
    /// probe's create and unlink would change partial/'s mtime).
    @Test func theNameProbeRunsOncePerFileSystem() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let first = try Cache.open(root: dir.url)
        #expect(first.nameRules == .posix)
        let partial = dir.url.appendingPathComponent("partial").path
        func modified() throws -> Date? { try FileManager.default.attributesOfItem(atPath: partial)[.modificationDate] as? Date }
        let before = try modified()
        usleep(20_000)
        let second = try Cache.open(root: dir.url)
        #expect(second.nameRules == .posix)
        #expect(try modified() == before, "the second open probed again")
    }

    @Test func removalDeletesFilesButKeepsPinned() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let paths = ["A/1.mp3", "A/2.mp3", "A/sub/3.mp3", "AB/4.mp3", "B/5.mp3"]
        try cache.upsert(remote: "r", files: paths.map { remoteFile($0, size: 10) })
        for path in paths {
            let w = try cache.openWriter(remote: "r", path: path)
            try await w.fillAndComplete()
        }
        try cache.pin(remote: "r", path: "A/2.mp3")
        let report = try cache.removeTree(remote: "r", prefix: "A/")
        #expect(Set(report.removed) == ["A/1.mp3", "A/sub/3.mp3"])
        #expect(report.keptPinned == ["A/2.mp3"])
        #expect(!FileManager.default.fileExists(atPath: dir.url.path + "/tracks/r/A/sub"))  // empty folder pruned
        #expect(FileManager.default.fileExists(atPath: dir.url.path + "/tracks/r/A/2.mp3"))
        #expect(FileManager.default.fileExists(atPath: dir.url.path + "/tracks/r/AB/4.mp3"))
        #expect(try cache.remove(remote: "r", providerID: "id:B/5.mp3").removed == ["B/5.mp3"])
        #expect(try cache.remove(remote: "r", path: "AB/4.mp3").removed == ["AB/4.mp3"])
        #expect(try cache.knownPaths(remote: "r") == ["A/2.mp3"])
        #expect(throws: CacheError.self) { try cache.pin(remote: "r", path: "nope.mp3") }
    }

    /// 100,000 indexed tracks: upserted in batches, listed for `ls --offline`. Prints timings; asserts counts only.
    /// An entry's row is read on the second connection: it does not wait while the first is held (the writer's
    /// group commit, between its renames and its transaction), sees every commit, and reads no uncommitted one.
    /// Without it, the read below waits for the holder, which waits for the read: the holder gives up after 10 s.
    @Test func rowReadsDoNotWaitForTheIndexConnection() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("A/one.mp3")])
        let id = try #require(try cache.rowID(remote: "r", path: "A/one.mp3"))
        let read = DispatchSemaphore(value: 0)
        let seen = Mutex<(IndexRow?, Bool)>((nil, false))
        let answered = try cache.withDatabase { db throws(CacheError) -> Bool in
            try db.withTransaction { () throws(CacheError) in
                _ = try db.run("UPDATE files SET pinned = 1 WHERE id = ?", [.int(id)])
            }
            try db.execute("BEGIN IMMEDIATE")
            _ = try db.run("UPDATE files SET size = 7 WHERE id = ?", [.int(id)])
            Thread.detachNewThread {
                let row = try? cache.row(id: id)
                seen.withLock { $0 = (row, true) }
                read.signal()
            }
            let answered = read.wait(timeout: .now() + 10) == .success
            try db.execute("ROLLBACK")
            return answered
        }
        #expect(answered, "row(id:) waited for the index connection")
        let (row, done) = seen.withLock { $0 }
        #expect(done)
        #expect(row?.pinned == true, "the committed change is seen")
        #expect(row?.file.size == 1000, "the open transaction's change is not")
    }

    @Test func largeListing() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let clock = ContinuousClock()
        let files = (0..<100_000).map { i in
            remoteFile("Artist \(i / 1000)/Album \(i / 100)/\(i) Track.flac", size: Int64(i),
                       hashes: [ContentHash(kind: .md5, value: "0123456789abcdef0123456789abcdef")])
        }
        let upsert = try clock.measure {
            for start in stride(from: 0, to: files.count, by: 20_000) {
                try cache.upsert(remote: "big", files: Array(files[start..<start + 20_000]))
            }
        }
        var entries: [CacheEntryInfo] = []
        let list = try clock.measure { entries = try cache.entries(remote: "big") }
        let again = try clock.measure { try cache.upsert(remote: "big", files: Array(files[0..<20_000])) }
        print("largeListing: upsert 100k \(upsert), entries(remote:) 100k \(list), re-upsert 20k unchanged \(again)")
        #expect(entries.count == 100_000)
        #expect(entries.first?.file.hashes.first?.kind == .md5)
    }
}
