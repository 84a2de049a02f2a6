import Foundation
import Testing
import TestSupport

/// Plays through `serve` raise a track's priority in the cache's budget (#18): three head-only tracks played to
/// their end are complete after the next pull, and the cache stays within its budget.
@Suite(.serialized) struct PlayedTracksTests {
    static func states(_ env: BinaryEnv) throws -> [String: String] {
        let r = try env.run(["ls", "--offline", "--json"])
        let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
        return Dictionary(rows.map { ($0["path"] as? String ?? "", $0["state"] as? String ?? "") }, uniquingKeysWith: { $1 })
    }

    static func held(_ env: BinaryEnv) throws -> Int64 {
        let r = try env.run(["cache", "status", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] ?? [:]
        return (object["bytes"] as? NSNumber)?.int64Value ?? -1
    }

    @Test func playedTracksAreCompleteAfterTheNextPull() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-serve-played")
        let files = (0 ..< 10).map { (String(format: "Album/t%02d.mp3", $0), 1 << 20) }
        let contents = try ServeBinaryTests.library(files, in: dir)
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let budget: Int64 = 5 << 20
        let env = try BinaryEnv(davURL: fake.davURL, extra: "max_size = \"5MiB\"\nmin_free = \"0\"\n\n[pull]\nhead_first = \"64KiB\"")
        let first = try env.run(["pull"])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        let before = try Self.states(env)
        let headOnly = before.filter { $0.value == "head" }.map(\.key).sorted()
        #expect(headOnly.count >= 3, "states: \(before)")
        let played = Array(headOnly.suffix(3))

        let (serve, port) = try await env.serve()
        for path in played {
            let response = try await offPool { try RawClient(port: port).get("/tracks/lib/\(path)") }
            #expect(response.status == 200)
            #expect(response.body == contents[path], "\(path) through serve differs from the source")
        }
        serve.stop()

        let next = try env.run(["pull"])
        #expect(next.status == 0, "stderr: \(next.stderr)")
        let after = try Self.states(env)
        for path in played { #expect(after[path] == "cached", "\(path) was played but is \(after[path] ?? "-")") }
        #expect(after.values.allSatisfy { $0 == "head" || $0 == "cached" }, "states: \(after)")
        #expect(try Self.held(env) <= budget)
        // Converged: the pull after changes nothing.
        try fake.reset()
        #expect(try env.run(["pull"]).status == 0)
        #expect(try fake.log().isEmpty, "a converged pull fetched again")
    }
}
