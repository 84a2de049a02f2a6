import CloudSyncHTTP
import Foundation
import TestSupport
import Testing

/// Tracks moved or renamed on the server keep their cached bytes: the real binary against the fakes (the WebDAV
/// one with its ETags, Dropbox's change feed, Yandex's hashes). Real servers: `RealServerTests`.
@Suite(.serialized) struct MoveTests {
    /// What these tests read of a fake's request log: Dropbox's route, Yandex's download link.
    struct Logged: Decodable {
        var route: String?
        var href_id: String?
    }

    /// The `remotes[0]` object of `pull --json`.
    static func remoteReport(_ r: Env.Result) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        return try #require((object?["remotes"] as? [[String: Any]])?.first, "stdout: \(r.stdout)")
    }

    /// A library bigger than its budget, its album folder renamed on the server once the cache converged: a dry run
    /// shows the moves and changes nothing; the pull renames every head and whole track it holds, transfers no byte,
    /// keeps each track's state, and every byte the index claims is the source's at the new path.
    @Test func aRenamedFolderKeepsItsHeadsAndTracks() throws {
        var fixture = try Fixture(seed: 61, files: BudgetTests.files(count: 12), cache: BudgetTests.cacheLines,
                                  pull: BudgetTests.pull)
        defer { fixture.cleanup() }
        for _ in 1 ... 2 { #expect(try fixture.env.run(["pull"]).status == 0) }
        let before = try BudgetTests.rows(fixture.env)
        let states = Dictionary(before.map { ($0["path"] as? String ?? "", $0["state"] as? String ?? "") }, uniquingKeysWith: { a, _ in a })
        #expect(Set(states.values) == ["head", "cached"], "the test needs both: \(states)")

        let unmoved = try fixture.env.run(["pull", "--dry-run"]).stdout.split(separator: "\n").last { $0.contains(" to fetch (") }
        try fixture.library.move("Album", to: "Album (Remastered)")
        let dry = try fixture.env.run(["pull", "--dry-run"])
        #expect(dry.status == 0, "stderr: \(dry.stderr)")
        #expect(dry.stdout.split(separator: "\n").count { $0.hasPrefix("would move ") } == 12, "stdout: \(dry.stdout)")
        #expect(dry.stdout.contains("lib/Album/t00.mp3 → Album (Remastered)/t00.mp3"), "stdout: \(dry.stdout)")
        // The tails the budget leaves out are candidates as before; nothing is removed.
        let summary = dry.stdout.split(separator: "\n").last { $0.contains(" to fetch (") }
        #expect(summary == unmoved.map { $0.replacingOccurrences(of: "0 to remove, ", with: "0 to remove, 12 to move, ")[...] },
                "stdout: \(dry.stdout)")
        #expect(Set(try BudgetTests.rows(fixture.env).compactMap { $0["path"] as? String }) == Set(states.keys), "a dry run moves nothing")

        try fixture.server.reset()
        let pull = try fixture.env.run(["pull", "--json"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        let report = try Self.remoteReport(pull)
        #expect(report["moved"] as? Int == 12 && report["deleted"] as? Int == 0 && report["new"] as? Int == 0, "\(report)")
        #expect(try fixture.server.stats()["bytes"] == 0, "the moved tracks were fetched again")
        let after = try BudgetTests.rows(fixture.env)
        #expect(Dictionary(after.map { ($0["path"] as? String ?? "", $0["state"] as? String ?? "") }, uniquingKeysWith: { a, _ in a })
                == Dictionary(states.map { ("Album (Remastered)/" + $0.key.dropFirst("Album/".count), $0.value) }, uniquingKeysWith: { a, _ in a }))
        try BudgetTests.expectClaimsMatch(fixture.env, libraries: ["lib": fixture.library])
        #expect(!FileManager.default.fileExists(atPath: fixture.env.tracks.appendingPathComponent("Album").path))
        let text = try fixture.env.run(["pull"])
        #expect(text.status == 0 && !text.stderr.contains("moved"), "nothing moves twice: \(text.stderr)")
    }

    /// `--no-delete` keeps a moved track where it was (as deleted remotely) and fetches the new path: a move deletes
    /// the old path, which that option promises not to do. A file renamed and changed is no move either.
    @Test func noDeleteAndChangedFilesAreNotMoves() throws {
        var fixture = try Fixture(seed: 62, files: [("A/one.mp3", 40_000), ("A/two.mp3", 50_000)])
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        try fixture.library.move("A/one.mp3", to: "B/one.mp3")
        try fixture.library.remove("A/two.mp3")
        try fixture.library.add("B/two.mp3", Data(repeating: 7, count: 50_000))
        let kept = try fixture.env.run(["pull", "--no-delete", "--json"])
        #expect(kept.status == 0, "stderr: \(kept.stderr)")
        let report = try Self.remoteReport(kept)
        #expect(report["moved"] as? Int == 0 && report["new"] as? Int == 2, "\(report)")
        #expect(FileManager.default.fileExists(atPath: fixture.env.tracks.appendingPathComponent("A/one.mp3").path))
        let index = try fixture.env.index()
        #expect(index["A/one.mp3"]?["deleted_remotely"] != nil, "\(index)")
        fixture.library.files["A/one.mp3"] = try Data(contentsOf: fixture.env.tracks.appendingPathComponent("A/one.mp3"))
        fixture.library.files["A/two.mp3"] = try Data(contentsOf: fixture.env.tracks.appendingPathComponent("A/two.mp3"))
        try fixture.env.expectTracksEqual(fixture.library)
    }

    /// Dropbox's change feed reports a moved folder as `deleted` entries and the files at their new paths, with
    /// their ids and `content_hash` and a new `rev`: the pull renames the tracks and downloads nothing.
    @Test func aFolderMovedOnDropboxIsRenamedFromTheChangeFeed() async throws {
        let fake = try await PythonFake.start("dropbox_fake.py", spec: [
            "page_size": 2, "token": "access-1",
            "files": [["path": "/A/one.mp3", "size": 100_000], ["path": "/A/two.flac", "size": 200_000],
                      ["path": "/B/three.mp3", "size": 3000]],
        ])
        defer { fake.stop() }
        let env = try Env(remoteLines: ["provider = \"dropbox\"", "api_url = \"\(fake.baseURL())\"",
                                        "content_url = \"\(fake.baseURL())\"", "access_token = \"access-1\""])
        defer { env.cleanup() }
        #expect(try env.run(["pull"]).status == 0)
        let one = try Data(contentsOf: env.tracks.appendingPathComponent("A/one.mp3"))
        let transport = try CurlTransport()
        try await fake.control([["op": "move", "from": "/A", "to": "/Albums/A (2001)"]], via: transport)
        try await fake.clearLog(via: transport)

        let pull = try env.run(["pull", "--json"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        let report = try Self.remoteReport(pull)
        #expect(report["moved"] as? Int == 2 && report["new"] as? Int == 0 && report["deleted"] as? Int == 0, "\(report)")
        let routes = try await fake.log(Logged.self, via: transport).compactMap(\.route)
        #expect(routes.contains("files/list_folder/continue"), "the change feed was read: \(routes)")
        #expect(!routes.contains("files/download"), "downloaded again: \(routes)")
        #expect(try Data(contentsOf: env.tracks.appendingPathComponent("Albums/A (2001)/one.mp3")) == one)
        #expect(!FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("A").path))
        let verify = try env.run(["cache", "verify"])
        #expect(verify.status == 0 && verify.stdout.contains("0 mismatched"), "the moved tracks match their content_hash: \(verify.stdout)")
    }

    /// Yandex.Disk lists fully; a moved file keeps its md5 and sha256: renamed, not downloaded.
    @Test func aFileMovedOnYandexIsRenamedByItsHashes() async throws {
        let fake = try await Env.yandexFake()
        defer { fake.stop() }
        let env = try Env(remoteLines: Env.yandexLines(fake))
        defer { env.cleanup() }
        #expect(try env.run(["pull"]).status == 0)
        let transport = try CurlTransport()
        try await fake.control([["op": "move", "from": "Music/A/one.mp3", "to": "Music/Moved/one.mp3"]], via: transport)
        try await fake.clearLog(via: transport)

        let pull = try env.run(["pull", "--json"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        #expect(try Self.remoteReport(pull)["moved"] as? Int == 1, "stdout: \(pull.stdout)")
        let downloads = try await fake.log(Logged.self, via: transport).filter { $0.href_id != nil }
        #expect(downloads.isEmpty, "downloaded again: \(downloads)")
        let index = try env.index()
        #expect(index["Music/Moved/one.mp3"]?["state"] as? String == "cached" && index["Music/A/one.mp3"] == nil, "\(index)")
    }
}
