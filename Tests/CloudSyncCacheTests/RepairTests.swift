@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Testing
import TestSupport

/// The index and `tracks/` agree after interrupted promotions, hostile sizes and pruned folders (#19).
@Suite struct RepairTests {
    /// A promotion cut between the rename into `tracks/` and the index commit (kill -9, full disk) leaves a
    /// verified file the index does not know as complete; the next open of the entry, or a pull's
    /// `reconcilePromotions()`, marks it complete instead of downloading it again.
    @Test func aCutPromotionIsRepaired() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("a.mp3"), remoteFile("b.mp3")])
        for name in ["a.mp3", "b.mp3"] {
            let writer = try cache.openWriter(remote: "r", path: name)
            try await writer.fillAndComplete()
            writer.close()
        }
        // Undo the commit, as a kill between rename and commit would have left it.
        _ = try cache.withDatabase { db throws(CacheError) in
            try db.run("UPDATE files SET state = 1, ranges = ?, present_bytes = size, track_bytes = 0",
                       [.blob(ByteRanges(0 ..< 1000).encoded)])
        }
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .partial)
        #expect(try cache.reconcilePromotions() == 2)
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .complete)
        #expect(try cache.reconcilePromotions() == 0)

        // The same repair when a writer opens the entry.
        _ = try cache.withDatabase { db throws(CacheError) in
            try db.run("UPDATE files SET state = 1, ranges = ?, present_bytes = size, track_bytes = 0 WHERE path = 'b.mp3'",
                       [.blob(ByteRanges(0 ..< 1000).encoded)])
        }
        let writer = try cache.openWriter(remote: "r", path: "b.mp3")
        #expect(writer.missingRanges().isEmpty)
        writer.close()
        #expect(try cache.entry(remote: "r", path: "b.mp3")?.state == .complete)
        #expect(try Data(contentsOf: dir.url.appendingPathComponent("tracks/r/b.mp3")) == Data(pattern(0 ..< 1000)))
    }

    /// A file in `tracks/` of another size or mtime (an older version) is not taken for the promoted one.
    @Test func anOlderFileIsNotTakenForThePromotedOne() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3"))
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try await writer.fillAndComplete()
        writer.close()
        let track = dir.url.appendingPathComponent("tracks/r/a.mp3").path
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)], ofItemAtPath: track)
        _ = try cache.withDatabase { db throws(CacheError) in
            try db.run("UPDATE files SET state = 1, ranges = ?, present_bytes = size", [.blob(ByteRanges(0 ..< 1000).encoded)])
        }
        #expect(try cache.reconcilePromotions() == 0)
    }

    /// Sizes no filesystem holds fail that one file (exit 1), before any byte is written.
    @Test func absurdSizesFailTheFileOnly() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("huge.mp3", size: .max), remoteFile("pb.mp3", size: 1 << 58)])
        for name in ["huge.mp3", "pb.mp3"] {
            do {
                _ = try cache.openWriter(remote: "r", path: name)
                Issue.record("\(name): opened a writer")
            } catch {
                #expect(error.code == .tooLarge)
                #expect(error.exitCode == .partialFailure)
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path + "/partial").isEmpty)
    }

    /// A promotion whose folder a concurrent removal just pruned makes the folder again (11 of 40 pulls beside
    /// a `cache clear` loop used to stop with exit 74): two threads, one completing entries in a folder, the
    /// other removing its only sibling (which prunes the folder when it empties) over and over; the two often share
    /// a group commit.
    @Test func promotionSurvivesConcurrentPruning() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let rounds = 600
        let failures = ManagedAtomicCounter()
        let remover = Task.detached {
            for i in 0 ..< rounds {
                do {
                    try cache.upsert(remote: "r", file: remoteFile("Album/other-\(i).mp3", size: 10))
                    let writer = try cache.openWriter(remote: "r", path: "Album/other-\(i).mp3")
                    try await writer.fillAndComplete()
                    writer.close()
                    try cache.remove(remote: "r", path: "Album/other-\(i).mp3")
                } catch {
                    failures.add()
                }
            }
        }
        for i in 0 ..< rounds {
            try cache.upsert(remote: "r", file: remoteFile("Album/t\(i).mp3", size: 10))
            let writer = try cache.openWriter(remote: "r", path: "Album/t\(i).mp3")
            try await writer.fillAndComplete()
            writer.close()
            try cache.remove(remote: "r", path: "Album/t\(i).mp3")
        }
        await remover.value
        #expect(failures.value == 0)
    }
}

/// A counter threads can bump.
final class ManagedAtomicCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
