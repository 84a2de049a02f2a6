import Foundation
import Testing

/// Faults injected by files_fake.py: each pull ends complete and correct, or fails with a clear message and
/// the exit code README documents (1 some files failed, 4 auth, 5 remote unavailable).
@Suite struct FaultTests {
    static let files: [(String, Int)] = (0 ..< 6).map { ("Album/track \($0).mp3", 300_000 + $0 * 1000) }

    /// 429/503 with Retry-After: the remote's pause is shared by every job. From the fake's clock: once the
    /// throttled answer is out (plus a grace for GETs the other job had already sent), no GET of the remote
    /// arrives before Retry-After has passed.
    @Test(arguments: [429, 503])
    func retryAfterPausesEveryJob(status: Int) throws {
        let fixture = try Fixture(seed: 1, files: Self.files, delayMS: 300,
                                  faults: #"[{"path": "track 0", "kind": "status", "status": \#(status), "retry_after": 2}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--jobs", "2"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let log = try fixture.server.log()
        let throttled = try #require(log.first { $0.status == status })
        // The window opens when the throttled answer left the fake; a GET the other job sent before the
        // client read that answer may still arrive just after it.
        let sent = try #require(throttled.answered)
        let grace = 0.1
        let early = log.filter { $0.t > sent + grace && $0.t < sent + 2 }
        #expect(early.isEmpty, "GETs during the Retry-After window: \(early.map { ($0.path, $0.t - sent) })")
        #expect(log.contains { $0.path == throttled.path && $0.status == 206 && $0.t >= sent + 2 })
    }

    /// A server that keeps answering 503 exhausts the retries: exit 5 with a message naming the server.
    @Test func persistentUnavailabilityExits5() throws {
        let fixture = try Fixture(seed: 2, files: Array(Self.files.prefix(2)),
                                  faults: #"[{"kind": "status", "status": 503, "retry_after": 0, "count": -1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--retries", "2"])
        #expect(r.status == 5, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("503"), "stderr: \(r.stderr)")
        #expect(r.stderr.contains("track 0.mp3") && r.stderr.contains("track 1.mp3"))
    }

    /// Cut connections after K bytes: the pull resumes from the bytes received, so the fake serves each byte
    /// about once (at most the cut answers' bytes more), and the files are identical.
    @Test func cutConnectionsResume() throws {
        let cutAfter = 100_000
        let fixture = try Fixture(seed: 3, files: Self.files,
                                  faults: #"[{"kind": "cut", "after": \#(cutAfter), "count": 4}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--jobs", "2"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let total = Int64(fixture.library.files.values.reduce(0) { $0 + $1.count })
        let served = try fixture.server.stats()["bytes"] ?? 0
        #expect(try fixture.server.log().filter { $0.bytes == Int64(cutAfter) && $0.status == 206 }.count >= 4)
        // Bytes of a cut answer that reached the client are kept: the resumed request starts after them.
        #expect(served <= total + 4 * 256 * 1024, "served \(served) bytes for \(total)")
        let resumedFromMiddle = try fixture.server.log().contains { $0.rangeStart > 0 && $0.rangeStart % (64 << 10) != 0 }
        #expect(resumedFromMiddle, "no GET resumed where a cut answer stopped")
    }

    /// A connection cut after every 40 KB, for good: each attempt brings bytes, so the retries start again after
    /// each (`Pacer.run(progress:)`) and the file completes — 1 MB in ~25 answers with `--retries 3`. Before,
    /// the fourth cut failed the file although every attempt had made progress. A file whose answers bring
    /// nothing still fails after its retries.
    @Test func cutsThatBringBytesDoNotUseUpTheRetries() throws {
        let fixture = try Fixture(seed: 8, files: [("Album/long.mp3", 1_000_000), ("Album/stuck.mp3", 200_000)],
                                  faults: #"[{"path": "long", "kind": "cut", "after": 40000, "count": -1}, {"path": "stuck", "kind": "cut", "after": 0, "count": -1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--retries", "3"])
        #expect(r.status == 1, "stuck.mp3 fails: \(r.stderr)")
        #expect(r.stderr.contains("1 failed"), "only stuck.mp3 fails: \(r.stderr)")
        let long = try #require(fixture.library.files["Album/long.mp3"])
        let got = try Data(contentsOf: fixture.env.tracks.appendingPathComponent("Album/long.mp3"))
        #expect(got == long, "long.mp3 is whole and right")
        #expect(try fixture.server.log().filter { $0.path.contains("long") }.count >= 20)
    }

    /// A server that ignores Range answers 200 with the whole body: bytes land at their offsets, never appended.
    @Test func serverIgnoringRange() throws {
        let fixture = try Fixture(seed: 4, files: Self.files,
                                  faults: #"[{"kind": "ignore_range", "count": -1}]"#, pull: [#"chunk_size = "64KiB""#])
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--jobs", "2"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        #expect(try fixture.server.log().allSatisfy { $0.status == 200 })
    }

    /// The file changes between two ranged requests (new bytes, new ETag). With If-Range honoured the server
    /// answers 200 with the new version; a server that ignores If-Range sends new bytes as 206 with the new
    /// ETag. Either way the track is the new version entirely, or the file fails clearly — never mixed.
    @Test(arguments: ["mutate", "mutate_ignoring_if_range"])
    func fileChangedMidDownload(variant: String) throws {
        var faults = #"[{"path": "changing", "kind": "mutate", "count": 1}"#
        if variant == "mutate_ignoring_if_range" { faults += #", {"path": "changing", "kind": "ignore_if_range", "count": -1}"# }
        faults += "]"
        var fixture = try Fixture(seed: 5, files: [("changing.flac", 1_000_000), ("steady.mp3", 200_000)],
                                  faults: faults, pull: [#"chunk_size = "256KiB""#])
        defer { fixture.cleanup() }
        let old = try #require(fixture.library.files["changing.flac"])
        let new = Data(old.map { $0 ^ 0x5A })
        let r = try fixture.env.run(["pull", "--jobs", "1"])
        fixture.expectNewVersionOrCleanFailure(r, path: "changing.flac", new: new)
        // The next pull ends with the new version, identical.
        fixture.library.files["changing.flac"] = new
        let again = try fixture.env.run(["pull"])
        #expect(again.status == 0, "stderr: \(again.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
    }

    /// Something answers in the cloud's place halfway through a file (a network's login page: 200 text/html to
    /// every GET, as captive portals and proxies send): the file fails naming that, no byte of the page lands in
    /// the cache and the bytes fetched before stay; back on the real network the next pull goes on from them.
    @Test func aLoginPageInTheCloudsPlaceKeepsTheCachedBytes() throws {
        let fixture = try Fixture(seed: 8, files: [("Album/long.flac", 1_000_000)],
                                  faults: #"[{"kind": "portal", "from": 262144, "count": -1}]"#,
                                  pull: [#"chunk_size = "256KiB""#])
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--retries", "1"])
        #expect(r.status == 1, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("Album/long.flac") && r.stderr.contains("login page") && r.stderr.contains("text/html"),
                "stderr: \(r.stderr)")
        let kept = try fixture.env.cachedBytes()
        #expect(kept >= 262_144, "the bytes fetched before the login page answered were dropped")
        try fixture.server.setFaults("[]")
        try fixture.server.reset()
        let again = try fixture.env.run(["pull"])
        #expect(again.status == 0, "stderr: \(again.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let starts = try fixture.server.log().map(\.rangeStart)
        #expect(!starts.isEmpty && starts.allSatisfy { $0 >= kept }, "the next pull fetched again from \(starts)")
    }

    /// 401 once from the content host: the download is resolved again and continues.
    @Test func unauthorizedOnceIsResolvedAgain() throws {
        let fixture = try Fixture(seed: 6, files: Array(Self.files.prefix(3)),
                                  faults: #"[{"path": "track 1", "kind": "status", "status": 401, "count": 1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let track1 = try fixture.server.log().filter { $0.path.hasSuffix("track 1.mp3") }.map(\.status)
        #expect(track1 == [401, 206])
    }

    /// Credentials refused for good: exit 4 with a message about credentials.
    @Test func unauthorizedForeverExits4() throws {
        let fixture = try Fixture(seed: 6, files: Array(Self.files.prefix(2)),
                                  faults: #"[{"kind": "status", "status": 401, "count": -1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull"])
        #expect(r.status == 4, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("401") || r.stderr.lowercased().contains("credentials"), "stderr: \(r.stderr)")
        // The advice names this remote's login, not a placeholder.
        #expect(r.stderr.contains("cloudsync login lib`") && !r.stderr.contains("login NAME"), "stderr: \(r.stderr)")
    }

    /// A download that answers 404 even after resolving again fails that file only (exit 1), others complete.
    @Test func vanishedFileFailsAloneWithExit1() throws {
        var fixture = try Fixture(seed: 7, files: Array(Self.files.prefix(3)),
                                  faults: #"[{"path": "track 2", "kind": "status", "status": 404, "count": -1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--json"])
        #expect(r.status == 1, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("track 2.mp3"), "stderr: \(r.stderr)")
        fixture.library.files["Album/track 2.mp3"] = nil
        try fixture.env.expectTracksEqual(fixture.library)
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let remote = (json?["remotes"] as? [[String: Any]])?.first
        let failed = remote?["failed"] as? [[String: Any]]
        #expect(failed?.count == 1 && failed?.first?["path"] as? String == "Album/track 2.mp3", "stdout: \(r.stdout)")
    }

    /// #19.7: a download redirected to another scheme is a wrong answer about that file: it fails alone (exit 1,
    /// named with a message), the other files complete — it used to stop the remote with exit 3.
    @Test(arguments: ["file:///etc/passwd", "gopher://127.0.0.1:70/1secret"])
    func redirectToAnotherSchemeFailsThatFileOnly(location: String) throws {
        var fixture = try Fixture(seed: 9, files: Array(Self.files.prefix(3)),
                                  faults: #"[{"path": "track 1", "kind": "redirect", "location": "\#(location)", "count": -1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--json"])
        #expect(r.status == 1, "stderr: \(r.stderr)")
        let scheme = String(location.prefix { $0 != ":" })
        #expect(r.stderr.contains("failed   lib/Album/track 1.mp3") && r.stderr.contains("to a \(scheme): URL"), "stderr: \(r.stderr)")
        #expect(!r.stderr.contains("passwd") && !r.stderr.contains("secret"), "stderr: \(r.stderr)")
        fixture.library.files["Album/track 1.mp3"] = nil
        try fixture.env.expectTracksEqual(fixture.library)
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let remote = (json?["remotes"] as? [[String: Any]])?.first
        #expect((remote?["failed"] as? [[String: Any]])?.map { $0["path"] as? String } == ["Album/track 1.mp3"], "stdout: \(r.stdout)")
        #expect(remote?["fatal"] == nil)
    }

    /// A 206 whose Content-Range does not match the request: nothing is written, the file fails (exit 1).
    @Test func wrongContentRangeWritesNothing() throws {
        var fixture = try Fixture(seed: 8, files: Array(Self.files.prefix(2)),
                                  faults: #"[{"path": "track 0", "kind": "wrong_range", "shift": 4096, "count": -1}]"#,
                                  pull: [#"chunk_size = "64KiB""#])
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--retries", "1"])
        #expect(r.status == 1, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("track 0.mp3") && r.stderr.contains("nothing was written"), "stderr: \(r.stderr)")
        let row = try fixture.env.index()["Album/track 0.mp3"]
        #expect((row?["cached_bytes"] as? NSNumber)?.int64Value == 0, "bytes were claimed: \(String(describing: row))")
        fixture.library.files["Album/track 0.mp3"] = nil
        try fixture.env.expectTracksEqual(fixture.library)
    }

    /// A slow server (paced body, delayed answers) still ends complete and identical.
    @Test func slowServer() throws {
        let fixture = try Fixture(seed: 9, files: Array(Self.files.prefix(4)), rate: 1 << 20, delayMS: 200)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--jobs", "2"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
    }
}
