import Foundation
import Testing
import TestSupport

/// A track moved on the remote keeps working at its old `serve` URL: a playlist saved before the move plays on.
@Suite(.serialized) struct MovedTrackRedirectTests {
    @Test func anOldURLRedirectsToWhereTheTrackMoved() async throws {
        let fixtures = try AudioFixtures.shared()
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-moved")
        let library = dir.file("library")
        let old = library.appendingPathComponent("Old Album/01 Song.mp3")
        try FileManager.default.createDirectory(at: old.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: fixtures.url("mp3-cover.mp3"), to: old)
        let contents = try Data(contentsOf: old)
        let fake = try await FilesFake(root: library)
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL)
        #expect(try env.run(["pull"]).status == 0)

        // Renamed twice on the server, each followed by a pull: the first URL follows both moves.
        try FileManager.default.moveItem(at: library.appendingPathComponent("Old Album"), to: library.appendingPathComponent("Album (2024)"))
        var pull = try env.run(["pull"])
        #expect(pull.status == 0 && pull.stderr.contains("1 moved"), "stderr: \(pull.stderr)")
        try FileManager.default.moveItem(at: library.appendingPathComponent("Album (2024)/01 Song.mp3"),
                                         to: library.appendingPathComponent("Album (2024)/01 - Song.mp3"))
        try FileManager.default.createDirectory(at: library.appendingPathComponent("Singles"), withIntermediateDirectories: true)
        try FileManager.default.moveItem(at: library.appendingPathComponent("Album (2024)/01 - Song.mp3"),
                                         to: library.appendingPathComponent("Singles/01 Song.mp3"))
        pull = try env.run(["pull"])
        #expect(pull.status == 0 && pull.stderr.contains("1 moved"), "stderr: \(pull.stderr)")

        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let now = "/tracks/lib/Singles/01%20Song.mp3"
        for old in ["/tracks/lib/Old%20Album/01%20Song.mp3", "/tracks/lib/Album%20%282024%29/01%20Song.mp3"] {
            let redirect = try await offPool { try RawClient(port: port).get(old + "?cached=1") }
            #expect(redirect.status == 301 && redirect.headers["location"] == now + "?cached=1", "\(old): \(redirect.status) \(redirect.headers)")
        }
        let moved = try await offPool { try RawClient(port: port).get(now) }
        #expect(moved.status == 200 && moved.body == contents)
        let dav = try await offPool { try RawClient(port: port).get("/dav/lib/Old%20Album/01%20Song.mp3", method: "HEAD") }
        #expect(dav.status == 301 && dav.headers["location"] == "/dav/lib/Singles/01%20Song.mp3", "\(dav.status) \(dav.headers)")
        let never = try await offPool { try RawClient(port: port).get("/tracks/lib/Old%20Album/02%20Other.mp3") }
        #expect(never.status == 404)

        // A real player given the old URL plays the track.
        let url = "http://127.0.0.1:\(port)/tracks/lib/Old%20Album/01%20Song.mp3"
        let probe = try await offPool { try Tool.run("ffprobe", ["-v", "error", "-show_entries", "format_tags=title", "-of", "csv=p=0", url]) }
        #expect(probe.status == 0 && !probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
                "ffprobe: \(probe.status) \(probe.stdout) \(probe.stderr)")
    }
}
