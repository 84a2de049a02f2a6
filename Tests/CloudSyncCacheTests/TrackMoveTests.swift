@testable import CloudSyncCache
import CloudSyncCore
import Foundation
import Testing
import TestSupport

/// `Cache.move`: an entry takes the path its file was moved to on the remote and keeps everything it holds.
@Suite struct TrackMoveTests {
    private func moved(_ file: RemoteFile, to path: String, modified: TimeInterval? = nil) -> RemoteFile {
        var copy = file
        copy.path = path
        copy.providerID = "id:" + path
        if let modified { copy.modified = Date(timeIntervalSince1970: modified) }
        return copy
    }

    private func complete(_ cache: Cache, _ file: RemoteFile, sealed: Bool = false) async throws {
        try cache.upsert(remote: "r", file: file)
        let writer = try cache.openWriter(remote: "r", path: file.path)
        if sealed { try await writer.fillAndCompleteSealed() } else { try await writer.fillAndComplete() }
        writer.close()
    }

    /// A complete track moves to its new folder with its pin, tags and play history; the old folder, now empty, goes;
    /// the row the listing made for the new path (empty) is replaced; the bytes read back through a reader.
    @Test func aCompleteTrackMovesWithEverythingItHas() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let file = remoteFile("Old Album/01 Song.mp3", size: 5000)
        try await complete(cache, file)
        try cache.upsert(remote: "r", file: remoteFile("Old Album/cover-less neighbour.mp3"))
        try cache.pin(remote: "r", path: file.path)
        let before = try #require(try cache.entry(remote: "r", path: file.path))
        let target = moved(file, to: "New Album (2024)/01 Song.mp3", modified: 1_800_000_000.25)
        #expect(try cache.upsert(remote: "r", file: target) == .new, "the listing records the new path first")

        #expect(try cache.move(remote: "r", [(file.path, target)]) == [Cache.MovedEntry(complete: true, presentBytes: 5000)])

        #expect(try cache.entry(remote: "r", path: file.path) == nil)
        let after = try #require(try cache.entry(remote: "r", path: target.path))
        #expect(after.state == .complete && after.pinned && after.added == before.added)
        #expect(after.file == target, "the listing's id, mtime and revision are taken")
        #expect(after.localPath == "r/New Album (2024)/01 Song.mp3")
        let tracks = dir.url.appendingPathComponent("tracks/r")
        let data = try Data(contentsOf: tracks.appendingPathComponent("New Album (2024)/01 Song.mp3"))
        #expect(data == Data(pattern(0..<5000)))
        let attributes = try FileManager.default.attributesOfItem(atPath: tracks.appendingPathComponent("New Album (2024)/01 Song.mp3").path)
        #expect((attributes[.modificationDate] as? Date)?.timeIntervalSince1970 == 1_800_000_000.25)
        #expect(!FileManager.default.fileExists(atPath: tracks.appendingPathComponent("Old Album").path),
                "the old folder held only the moved track and goes")
        let reader = try cache.openReader(remote: "r", path: target.path)
        #expect(try reader.read(0..<5000) == Data(pattern(0..<5000)))
        #expect(try cache.entries(remote: "r").map(\.path).sorted() == ["New Album (2024)/01 Song.mp3", "Old Album/cover-less neighbour.mp3"])
    }

    /// A partial entry keeps its bytes and its partial file (named by id); a writer opened at the new path resumes it.
    @Test func aPartialEntryMovesAndResumes() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let file = remoteFile("A/part.flac", size: 4000)
        try cache.upsert(remote: "r", file: file)
        let writer = try cache.openWriter(remote: "r", path: file.path)
        try writer.writePattern(0..<1500)
        try writer.checkpoint()
        writer.close()
        let target = moved(file, to: "B/part.flac")

        #expect(try cache.move(remote: "r", [(file.path, target)]) == [Cache.MovedEntry(complete: false, presentBytes: 1500)])

        let resumed = try cache.openWriter(remote: "r", path: target.path)
        #expect(resumed.missingRanges().ranges == [1500..<4000])
        try await resumed.fillAndComplete()
        resumed.close()
        #expect(try Data(contentsOf: dir.url.appendingPathComponent("tracks/r/B/part.flac")) == Data(pattern(0..<4000)))
    }

    /// Skipped moves (nil) change nothing: no bytes to keep, a writer holding the entry, a new path whose row holds
    /// bytes of its own, an entry no longer at `from`.
    @Test func movesThatCannotBeMadeChangeNothing() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let empty = remoteFile("empty.mp3")
        try cache.upsert(remote: "r", file: empty)
        let held = remoteFile("held.mp3", size: 2000)
        try await complete(cache, held)
        let busy = remoteFile("busy.mp3", size: 2000)
        try await complete(cache, busy)
        let occupied = remoteFile("occupied.mp3", size: 2000)
        try await complete(cache, occupied)
        let writer = try cache.openWriter(remote: "r", path: busy.path)
        defer { writer.close() }

        let results = try cache.move(remote: "r", [
            (empty.path, moved(empty, to: "x/empty.mp3")),
            (busy.path, moved(busy, to: "x/busy.mp3")),
            (held.path, moved(held, to: occupied.path)),
            ("not-there.mp3", moved(held, to: "x/not-there.mp3")),
        ])
        #expect(results == [nil, nil, nil, nil])
        #expect(try cache.entries(remote: "r").map(\.path).sorted() == ["busy.mp3", "empty.mp3", "held.mp3", "occupied.mp3"])
        for name in ["held.mp3", "busy.mp3", "occupied.mp3"] {
            #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("tracks/r/\(name)").path))
        }
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("tracks/r/x").path))
    }

    /// A rename that changes only case keeps the plain name (the entry's own collision key does not count against
    /// it), and a batch of moves that swap two names' folders works in one call.
    @Test func caseOnlyRenamesAndBatchesWork() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let abba = remoteFile("abba/gold.mp3", size: 3000)
        try await complete(cache, abba)
        let other = remoteFile("abba/silver.mp3", size: 3001)
        try await complete(cache, other)
        let results = try cache.move(remote: "r", [(abba.path, moved(abba, to: "ABBA/gold.mp3")),
                                                   (other.path, moved(other, to: "ABBA/silver.mp3"))])
        #expect(results.allSatisfy { $0?.complete == true })
        #expect(try cache.entry(remote: "r", path: "ABBA/gold.mp3")?.localPath == "r/ABBA/gold.mp3")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.appendingPathComponent("tracks/r").path)
        #expect(names == ["ABBA"])
        #expect(try Data(contentsOf: dir.url.appendingPathComponent("tracks/r/ABBA/silver.mp3")) == Data(pattern(0..<3001)))
    }

    /// An encrypted track stays readable after its move: its blocks are sealed under its id, not its path.
    @Test func anEncryptedTrackStaysReadable() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url, encryption: .on(CacheKey.random()))
        let file = remoteFile("Sealed/a.ogg", size: 70_000)
        try await complete(cache, file, sealed: true)
        let target = moved(file, to: "Open/a.ogg")
        #expect(try cache.move(remote: "r", [(file.path, target)]).first??.complete == true)
        let reader = try cache.openReader(remote: "r", path: target.path)
        #expect(try reader.read(0..<70_000) == Data(pattern(0..<70_000)))
    }

    /// Where a moved track went is remembered for `serve`'s redirects: through later moves, never from a path that
    /// holds an entry again, never to a path that holds none.
    @Test func movesAreRememberedThroughChains() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.cleanup() }
        let cache = try Cache.open(root: dir.url)
        let a = remoteFile("A/song.mp3", size: 3000)
        try await complete(cache, a)
        func move(_ from: String, _ to: String) throws {
            let target = moved(try #require(try cache.entry(remote: "r", path: from)).file, to: to)
            try cache.upsert(remote: "r", file: target)
            #expect(try cache.move(remote: "r", [(from, target)]).first??.complete == true)
        }
        try move("A/song.mp3", "B/song.mp3")
        #expect(try cache.movedPath(remote: "r", from: "A/song.mp3") == "B/song.mp3")
        try move("B/song.mp3", "C/song.mp3")
        #expect(try cache.movedPath(remote: "r", from: "A/song.mp3") == "C/song.mp3")
        #expect(try cache.movedPath(remote: "r", from: "B/song.mp3") == "C/song.mp3")
        try move("C/song.mp3", "A/song.mp3")
        #expect(try cache.movedPath(remote: "r", from: "A/song.mp3") == nil, "A holds the track again")
        #expect(try cache.movedPath(remote: "r", from: "C/song.mp3") == "A/song.mp3")
        #expect(try cache.movedPath(remote: "other", from: "C/song.mp3") == nil)
        // The track gone from the remote: its old paths lead nowhere.
        _ = try cache.remove(remote: "r", path: "A/song.mp3")
        #expect(try cache.movedPath(remote: "r", from: "B/song.mp3") == nil)
    }
}
