import CloudSyncHTTP
import Foundation
import TestSupport
import Testing

/// The pull engine with a provider that has a change feed (the Dropbox fake, driven through the CLI).
@Suite(.serialized) struct ChangeFeedTests {
    static var spec: [String: Any] { [
        "page_size": 2, "token": "access-1",
        "files": [["path": "/A/one.mp3", "size": 1000], ["path": "/A/two.mp3", "size": 2000],
                  ["path": "/B/three.mp3", "size": 3000]],
    ] }

    func control(_ fake: PythonFake, _ op: [String: Any]) async throws {
        try await fake.control([op], via: try CurlTransport())
    }

    /// A pull restricted to PATHs applies only part of the changes, so it must not advance the cursor: a
    /// deletion outside its selection still reaches the next full pull.
    @Test func restrictedPullLeavesTheFeedForTheNextFullPull() async throws {
        let fake = try await PythonFake.start("dropbox_fake.py", spec: Self.spec)
        defer { fake.stop() }
        let env = try Env(remoteLines: ["provider = \"dropbox\"", "api_url = \"\(fake.baseURL())\"",
                                        "content_url = \"\(fake.baseURL())\"", "access_token = \"access-1\""])
        defer { env.cleanup() }
        let first = try env.run(["pull"])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("B/three.mp3").path))

        try await control(fake, ["op": "delete", "path": "/B/three.mp3"])
        try await control(fake, ["op": "add", "path": "/A/four.mp3", "size": 4000])
        let restricted = try env.run(["pull", "A"])
        #expect(restricted.status == 0, "stderr: \(restricted.stderr)")
        #expect(FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("A/four.mp3").path))
        #expect(FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("B/three.mp3").path),
                "a deletion outside the selection waits for a full pull")

        let full = try env.run(["pull"])
        #expect(full.status == 0, "stderr: \(full.stderr)")
        #expect(full.stderr.contains("removed  lib/B/three.mp3"), "stderr: \(full.stderr)")
        #expect(!FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("B/three.mp3").path))
    }
}
