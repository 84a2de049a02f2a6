import Foundation
import Testing
import TestSupport

/// Full pulls from real WebDAV servers (Debian's rclone, Apache mod_dav, nginx dav-ext), through the counting
/// proxy of files_fake.py so GETs can be counted.
@Suite(.serialized) struct RealServerTests {
    @Test(arguments: ["rclone", "apache", "nginx"])
    func fullPullOfHostileNamesIsByteIdenticalAndSecondPullFetchesNothing(server: String) throws {
        var sizes = Library.hostileNames.enumerated().map { ($0.element, 1000 + $0.offset * 37_000) }
        sizes.append(("Кино/Группа крови/cover notes.txt", 100))  // not audio: listed by the server, never fetched
        let root = try temporaryDirectory("real-\(server)")
        defer { try? FileManager.default.removeItem(at: root) }
        var library = try Library.make(in: root, seed: 7, files: sizes)
        // An old library, as real ones are: Apache gives a file modified within the last second a weak ETag
        // (W/"…") and a strong one later, which changes the fingerprint and refetches it once.
        for path in library.files.keys {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -7200)],
                                                  ofItemAtPath: root.appendingPathComponent(path).path)
        }

        let server = try RealWebDAV.start(server, root: root)
        defer { server.stop() }

        let proxy = try FakeServer(arguments: ["--proxy-to", "http://127.0.0.1:\(server.port)"])
        defer { proxy.stop() }
        let env = try Env(url: proxy.url)
        defer { env.cleanup() }

        let first = try env.run(["pull", "--json"])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        library.files["Кино/Группа крови/cover notes.txt"] = nil
        try env.expectTracksEqual(library)
        let gets = try proxy.log()
        #expect(Set(gets.map(\.path)).count == library.files.count, "GETs: \(gets.map(\.path))")
        #expect(!gets.contains { $0.path.hasSuffix(".txt") })

        try proxy.reset()
        let second = try env.run(["pull", "--json"])
        #expect(second.status == 0, "stderr: \(second.stderr)")
        let refetched = try proxy.log().map(\.path)
        #expect(try proxy.stats()["get"] == 0, "the second pull fetched again: \(refetched)")
        #expect(try proxy.stats()["propfind"] ?? 0 > 0)
        try env.expectTracksEqual(library)
    }

    /// A person reorganising the library on the server: a folder renamed and a track moved into another folder. The
    /// next pull renames them in the cache and downloads nothing (each server's ETag, made of size and mtime, stays
    /// with a file that moves); tracks/ holds the same bytes at the new paths and no trace of the old folder.
    @Test(arguments: ["rclone", "apache", "nginx"])
    func tracksMovedOnTheServerAreRenamedNotFetchedAgain(server: String) throws {
        let sizes = Library.hostileNames.enumerated().map { ($0.element, 1000 + $0.offset * 37_000) }
        let root = try temporaryDirectory("real-move-\(server)")
        defer { try? FileManager.default.removeItem(at: root) }
        var library = try Library.make(in: root, seed: 8, files: sizes)
        for path in library.files.keys {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -7200)],
                                                  ofItemAtPath: root.appendingPathComponent(path).path)
        }
        let server = try RealWebDAV.start(server, root: root, fresh: true)
        defer { server.stop() }
        let proxy = try FakeServer(arguments: ["--proxy-to", "http://127.0.0.1:\(server.port)"])
        defer { proxy.stop() }
        let env = try Env(url: proxy.url)
        defer { env.cleanup() }
        let first = try env.run(["pull"])
        #expect(first.status == 0, "stderr: \(first.stderr)")

        try library.move("Кино", to: "Кино (1988)")
        try library.move("plain.mp3", to: "Deep/plain.mp3")
        try proxy.reset()
        let second = try env.run(["pull"])
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(second.stderr.contains("moved    lib/Кино/Группа крови/01 - Группа крови.mp3 → Кино (1988)/Группа крови/01 - Группа крови.mp3"),
                "stderr: \(second.stderr)")
        #expect(second.stderr.contains(", 2 moved; fetched 0 files"), "stderr: \(second.stderr)")
        let fetched = try proxy.log().map(\.path)
        #expect(fetched.isEmpty, "fetched again: \(fetched)")
        try env.expectTracksEqual(library)
        #expect(!FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("Кино").path))
    }
}
