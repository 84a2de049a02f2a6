@testable import CloudSyncCache
import Foundation
import TestSupport
import Testing

/// `cloudsync status` (#25): the last pull per remote (ok, killed), tracks and bytes, running pulls and serves,
/// from the real binary against the WebDAV fake. The JSON schema is the documented one (README).
@Suite struct StatusTests {
    /// Every key path of a JSON value, `remotes[].last_pull.outcome` style, sorted: the schema without values.
    static func keyPaths(_ value: Any, _ prefix: String = "") -> [String] {
        if let object = value as? [String: Any] {
            return object.keys.sorted().flatMap { key -> [String] in
                let path = prefix.isEmpty ? key : prefix + "." + key
                let inner = keyPaths(object[key]!, path)
                return inner.isEmpty ? [path] : inner
            }
        }
        if let array = value as? [Any] { return Array(Set(array.flatMap { keyPaths($0, prefix + "[]") })).sorted() }
        return []
    }

    static let schema = [
        "cache.budget", "cache.bytes", "cache.free_disk", "cache.full_heads_bytes", "cache.heads_bytes", "cache.heads_fit", "cache.library_bytes",
        "cache.max_size", "cache.path",
        "ready.instant", "ready.need_network", "ready.tracks",
        "remotes[].bytes", "remotes[].complete", "remotes[].head", "remotes[].last_pull.ended",
        "remotes[].last_pull.exit_code", "remotes[].last_pull.failed", "remotes[].last_pull.fetched_bytes",
        "remotes[].last_pull.fetched_files", "remotes[].last_pull.message", "remotes[].last_pull.outcome",
        "remotes[].last_pull.started", "remotes[].library_bytes", "remotes[].missing", "remotes[].partial",
        "remotes[].provider", "remotes[].pulling_pid", "remotes[].remote", "remotes[].tracks",
        "serves[].pid", "serves[].url",
    ]

    @Test func statusTellsWhetherTheMusicIsReady() async throws {
        let fake = try await PythonFake.start("webdav_fake.py")
        defer { fake.stop() }
        let env = try Env(url: fake.baseURL().appendingPathComponent("dav/").absoluteString)
        defer { env.cleanup() }

        let fresh = try env.run(["status"])
        #expect(fresh.status == 0, "stderr: \(fresh.stderr)")
        #expect(fresh.stdout.contains("last pull   never"), "\(fresh.stdout)")

        let pull = try env.run(["pull"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        let serve = try env.start(["serve", "--port", "0"])
        defer { serve.stop() }
        let url = try serve.firstStdoutLine(timeout: 30).replacingOccurrences(of: "listening on ", with: "")

        let r = try env.run(["status", "--json"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8))
        #expect(Self.keyPaths(json) == Self.schema)
        let object = try #require(json as? [String: Any])
        let remote = try #require((object["remotes"] as? [[String: Any]])?.first)
        let last = try #require(remote["last_pull"] as? [String: Any])
        #expect(last["outcome"] as? String == "ok")
        #expect((last["fetched_files"] as? Int ?? 0) > 0)
        #expect(remote["complete"] as? Int == remote["tracks"] as? Int)
        #expect(remote["pulling_pid"] is NSNull)
        let serves = try #require(object["serves"] as? [[String: Any]])
        #expect(serves.map { $0["url"] as? String } == [url])

        // A pull that started and never ended, with its lock free, was killed.
        let cache = try Cache.open(root: env.cacheDir)
        try cache.recordPullStart(remote: env.remote)
        let killed = try env.run(["status"])
        #expect(killed.stdout.contains(": killed"), "\(killed.stdout)")
        let killedJSON = try env.run(["status", "--json"])
        let killedRun = (((try JSONSerialization.jsonObject(with: Data(killedJSON.stdout.utf8)) as? [String: Any])?["remotes"]
            as? [[String: Any]])?.first?["last_pull"] as? [String: Any]) ?? [:]
        #expect(killedRun["outcome"] as? String == "killed")
        #expect(killedRun["exit_code"] is NSNull && killedRun["ended"] is NSNull, "a pull that never ended has no exit code: \(killedRun)")
        // While a pull holds the lock, status names it (and takes nothing).
        let lock = try await cache.pullLock(remote: env.remote, wait: false)
        let running = try env.run(["status", "--json"])
        let runningRemote = ((try JSONSerialization.jsonObject(with: Data(running.stdout.utf8)) as? [String: Any])?["remotes"] as? [[String: Any]])?.first
        #expect(runningRemote?["pulling_pid"] as? Int == Int(getpid()))
        #expect((runningRemote?["last_pull"] as? [String: Any])?["outcome"] as? String == "running")
        lock.release()
    }
}
