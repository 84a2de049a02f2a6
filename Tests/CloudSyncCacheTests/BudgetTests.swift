@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Testing
import TestSupport

/// Shrinking entries to their heads, evicting them, and what readers holding them open see meanwhile.
@Suite struct BudgetTests {
    static let startSet: ByteRanges = {
        var set = ByteRanges(0 ..< 300)
        set.insert(contentsOf: 900 ..< 1000)
        return set
    }()

    private func completeEntry(_ cache: Cache, _ path: String = "a.mp3") async throws {
        try cache.upsert(remote: "r", file: remoteFile(path))
        let writer = try cache.openWriter(remote: "r", path: path)
        try writer.setStartSet(Self.startSet, tags: #"{"title":"A"}"#, duration: 42)
        try await writer.fillAndComplete()
        writer.close()
    }

    /// A complete track shrinks to its start set: out of `tracks/`, the head in a new partial file, the index
    /// claiming exactly the start set; a reader that held the track open keeps reading every byte, correctly.
    @Test func shrinkingKeepsTheHeadAndOpenReadersKeepReading() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try await completeEntry(cache)
        let reader = try cache.openReader(remote: "r", path: "a.mp3")
        #expect(try reader.read(0 ..< 10) == Data(pattern(0 ..< 10)))

        #expect(try cache.shrinkToHead(id: try #require(try cache.row(remote: "r", path: "a.mp3")).id) == .done(freed: 600))
        let entry = try #require(try cache.entry(remote: "r", path: "a.mp3"))
        #expect(entry.state == .partial)
        #expect(entry.headPresent)
        #expect(entry.presentBytes == 400)
        #expect(entry.outdatedTrackBytes == 0)
        #expect(entry.tags == #"{"title":"A"}"#)
        #expect(entry.duration == 42)
        #expect(!FileManager.default.fileExists(atPath: dir.url.path + "/tracks/r/a.mp3"))
        #expect(try cache.heldBytes() == 400)
        // The old reader holds the complete copy: every byte stays readable and right.
        #expect(try reader.presentRanges() == ByteRanges(0 ..< 1000))
        #expect(try reader.read(300 ..< 900) == Data(pattern(300 ..< 900)))
        // A new reader sees the head only, with the right bytes.
        let fresh = try cache.openReader(remote: "r", path: "a.mp3")
        #expect(try fresh.presentRanges() == Self.startSet)
        #expect(try fresh.read(900 ..< 1000) == Data(pattern(900 ..< 1000)))
        #expect(throws: CacheError.self) { try fresh.read(300 ..< 400) }
        // Shrinking again changes nothing; filling the rest completes it again.
        #expect(try cache.shrinkToHead(id: try #require(try cache.row(remote: "r", path: "a.mp3")).id) == .unchanged)
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try await writer.fillAndComplete()
        writer.close()
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.state == .complete)
    }

    /// A partial with bytes beyond its head loses them; without a known start set nothing can be kept.
    @Test func partialsShrinkToTheirHeads() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("p.mp3"), remoteFile("unknown.mp3")])
        let writer = try cache.openWriter(remote: "r", path: "p.mp3")
        try writer.setStartSet(Self.startSet, tags: nil, duration: nil)
        try writer.writePattern(0 ..< 600)
        try writer.writePattern(900 ..< 1000)
        writer.close()
        let other = try cache.openWriter(remote: "r", path: "unknown.mp3")
        try other.writePattern(0 ..< 500)
        other.close()
        #expect(try cache.entry(remote: "r", path: "p.mp3")?.headPresent == true)
        let id = try #require(try cache.row(remote: "r", path: "p.mp3")).id
        #expect(try cache.shrinkToHead(id: id) == .done(freed: 300))
        #expect(try cache.entry(remote: "r", path: "p.mp3")?.presentBytes == 400)
        let reader = try cache.openReader(remote: "r", path: "p.mp3")
        #expect(try reader.read(0 ..< 300) == Data(pattern(0 ..< 300)))
        #expect(try cache.shrinkToHead(id: try #require(try cache.row(remote: "r", path: "unknown.mp3")).id) == .noHead)
    }

    /// Regression (#19.1): a reader holds a partial file open; the entry is evicted and fetched again into a
    /// new partial. The reader must never take the new file's claims for its own (it would serve the holes of
    /// its old file, zeros, under the track's ETag): it sees its generation end instead.
    @Test func anEvictedEntryNeverLendsItsNewBytesToAnOldReader() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("t.mp3"))
        let first = try cache.openWriter(remote: "r", path: "t.mp3")
        try first.writePattern(0 ..< 200)
        first.close()
        let reader = try cache.openReader(remote: "r", path: "t.mp3")
        #expect(try reader.read(0 ..< 100) == Data(pattern(0 ..< 100)))  // holds the old partial's inode now

        let cleared = try cache.clear(remote: "r")
        #expect(cleared.evicted.map(\.path) == ["t.mp3"])
        let second = try cache.openWriter(remote: "r", path: "t.mp3")
        try second.writePattern(0 ..< 1000)
        second.close()

        #expect(throws: CacheError.self) { try reader.presentRanges() }
        #expect(throws: CacheError.self) { try reader.read(500 ..< 600) }
        // A new reader gets the new bytes.
        let fresh = try cache.openReader(remote: "r", path: "t.mp3")
        #expect(try fresh.read(500 ..< 600) == Data(pattern(500 ..< 600)))
    }

    /// Evicting drops every byte but keeps what is known of the version (start set, tags), so the planner does
    /// not fetch the same head again just to measure it.
    @Test func evictingKeepsTheStartSetKnowledge() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try await completeEntry(cache)
        let id = try #require(try cache.row(remote: "r", path: "a.mp3")).id
        #expect(try cache.evictEntry(id: id) == .done(freed: 1000))
        let row = try #require(try cache.planningRows().first)
        #expect(row.state == .missing)
        #expect(row.startBytes == 400)
        #expect(!row.headPresent)
        #expect(try cache.evictEntry(id: id) == .unchanged)
        // Being written elsewhere: left alone.
        let writer = try cache.openWriter(remote: "r", path: "a.mp3")
        try writer.writePattern(0 ..< 100)
        try writer.checkpoint()
        #expect(try cache.evictEntry(id: id) == .busy)
        writer.close()
    }

    /// Sizes from a hostile server (Int64.max) never trap in the sums that status and planning make.
    @Test func hostileSizesDoNotTrapTheSums() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", files: [remoteFile("huge.mp3", size: .max), remoteFile("huge2.mp3", size: .max)])
        let status = try cache.status()
        #expect(status.libraryBytes == .max)
        #expect(try cache.heldBytes() == 0)
        #expect(try cache.planningRows().count == 2)
    }

    @Test func playsAreRecorded() throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        try cache.upsert(remote: "r", file: remoteFile("a.mp3"))
        cache.recordPlay(remote: "r", path: "a.mp3", at: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(try cache.planningRows().first?.lastPlayed == 1_800_000_000)
        #expect(try cache.entry(remote: "r", path: "a.mp3")?.lastPlayed == Date(timeIntervalSince1970: 1_800_000_000))
    }
}
