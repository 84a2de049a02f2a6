import TestSupport
import Foundation
import Testing

/// Locks, remote changes, dry runs, head-first order, output shapes and Ctrl-C, with the real binary.
@Suite struct PullBehaviourTests {
    static let files: [(String, Int)] = (0 ..< 4).map { ("Disc/song \($0).mp3", 400_000 + $0 * 1000) }

    @Test func secondPullExits75NamingTheRemoteAndWaitWaits() throws {
        let fixture = try Fixture(seed: 11, files: Self.files, rate: 1 << 20)
        defer { fixture.cleanup() }
        let first = try fixture.env.start(["pull", "--jobs", "1"])
        #expect(try eventuallyBlocking { try fixture.server.stats()["get"] ?? 0 > 0 }, "the first pull never started fetching")
        let second = try fixture.env.run(["pull"])
        #expect(second.status == 75, "stderr: \(second.stderr)")
        #expect(second.stderr.contains(fixture.env.remote) && second.stderr.contains("--wait"), "stderr: \(second.stderr)")
        let waiting = try fixture.env.start(["pull", "--wait", "--json"])
        let firstResult = try first.wait(timeout: 60)
        #expect(firstResult.status == 0, "stderr: \(firstResult.stderr)")
        let waited = try waiting.wait(timeout: 60)
        #expect(waited.status == 0, "stderr: \(waited.stderr)")
        #expect(waited.stdout.contains(#""fetched_files":0"#), "the waiting pull should find everything done: \(waited.stdout)")
        try fixture.env.expectTracksEqual(fixture.library)
    }

    @Test func pullWhileAnotherProcessReadsTheCache() throws {
        let fixture = try Fixture(seed: 12, files: Self.files, rate: 2 << 20)
        defer { fixture.cleanup() }
        _ = try fixture.env.run(["pull", "Disc/song 0.mp3"])
        let pull = try fixture.env.start(["pull", "--jobs", "2"])
        var listings = 0
        while pull.process.isRunning {
            let ls = try fixture.env.run(["ls", "--offline"])
            #expect(ls.status == 0, "ls --offline during a pull: \(ls.stderr)")
            listings += 1
        }
        let r = try pull.wait(timeout: 60)
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(listings > 1)
        try fixture.env.expectTracksEqual(fixture.library)
    }

    @Test func remoteDeletionAndModificationAreReflected() throws {
        var fixture = try Fixture(seed: 13, files: Self.files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        try fixture.library.remove("Disc/song 1.mp3")
        var random = SeededRandom(seed: 99)
        try fixture.library.add("Disc/song 2.mp3", random.bytes(333_333))
        try fixture.server.reset()
        let r = try fixture.env.run(["pull", "--json"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout.contains(#""deleted":1"#) && r.stdout.contains(#""changed":1"#), "stdout: \(r.stdout)")
        #expect(r.stderr.contains("removed  lib/Disc/song 1.mp3"), "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        #expect(try fixture.server.log().map(\.path) == ["/dav/Disc/song 2.mp3"])
        #expect(try fixture.env.index()["Disc/song 1.mp3"] == nil)
    }

    /// A folder the server refuses to list this time is not a deletion: its cached tracks stay. But its new tracks
    /// were not seen, so the pull is not a success (#19.3): exit 1, the folder named in the summary and in the JSON.
    @Test func unreadableFolderKeepsItsTracksAndFailsThePull() throws {
        var fixture = try Fixture(seed: 16, files: Self.files + [("Other/keep me.mp3", 5000)])
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        try fixture.server.setFaults(#"[{"kind": "propfind_status", "path": "Disc", "status": 403, "count": -1}]"#)
        try fixture.library.remove("Other/keep me.mp3")
        let r = try fixture.env.run(["pull", "--json"])
        #expect(r.status == 1, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("could not be read") && r.stderr.contains("Disc"), "stderr: \(r.stderr)")
        #expect(r.stderr.contains("lib: 4 listed") && r.stderr.contains("; 1 folder could not be read: Disc\n"),
                "the summary names the folder: \(r.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let remote = (json?["remotes"] as? [[String: Any]])?.first
        #expect(remote?["unreadable_folders"] as? [String] == ["Disc"], "stdout: \(r.stdout)")
        #expect((remote?["failed"] as? [Any])?.isEmpty == true)
        #expect(r.stderr.contains("removed  lib/Other/keep me.mp3"), "a real deletion elsewhere still applies: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        #expect(try fixture.env.index()["Disc/song 0.mp3"] != nil)
    }

    @Test func pinnedTrackDeletedRemotelyIsKeptAndReported() throws {
        var fixture = try Fixture(seed: 14, files: Self.files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        let pin = try fixture.env.run(["cache", "pin", "Disc/song 3.mp3"])
        #expect(pin.status == 0, "stderr: \(pin.stderr)")
        let kept = try #require(fixture.library.files["Disc/song 3.mp3"])
        try fixture.library.remove("Disc/song 3.mp3")
        let r = try fixture.env.run(["pull"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("kept     lib/Disc/song 3.mp3 (deleted remotely, but pinned)"), "stderr: \(r.stderr)")
        fixture.library.files["Disc/song 3.mp3"] = kept
        try fixture.env.expectTracksEqual(fixture.library)
    }

    /// Tracks deleted from tracks/ by hand (a whole folder too) or cut short by a tool are fetched again by the next
    /// pull: before, the index still called them complete, `status` said every track was ready and the pull fetched
    /// nothing until `cache verify` ran.
    @Test func tracksRemovedFromTheCacheByHandAreFetchedAgain() throws {
        let files = Self.files + [("Other/a.mp3", 300_000), ("Other/b.mp3", 300_001)]
        let fixture = try Fixture(seed: 16, files: files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        let tracks = fixture.env.tracks
        try FileManager.default.removeItem(at: tracks.appendingPathComponent("Disc/song 1.mp3"))
        try FileManager.default.removeItem(at: tracks.appendingPathComponent("Other"))
        let cut = try FileHandle(forWritingTo: tracks.appendingPathComponent("Disc/song 2.mp3"))
        try cut.truncate(atOffset: 1000)
        try cut.close()
        let r = try fixture.env.run(["pull"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("4 complete tracks were missing from tracks/ or had another size"), "stderr: \(r.stderr)")
        #expect(r.stderr.contains("fetched 4 files"), "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let again = try fixture.env.run(["pull"])
        #expect(again.stderr.contains("fetched 0 files") && !again.stderr.contains("missing from tracks/"), "stderr: \(again.stderr)")
    }

    @Test func dryRunChangesNothingAndPrintsThePlan() throws {
        var fixture = try Fixture(seed: 15, files: Self.files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull", "Disc/song 0.mp3", "Disc/song 1.mp3"]).status == 0)
        let expected = fixture.library
        try fixture.library.remove("Disc/song 1.mp3")
        var random = SeededRandom(seed: 5)
        try fixture.library.add("Disc/song 0.mp3", random.bytes(1234))
        let before = try fixture.env.run(["ls", "--offline", "--json"]).stdout
        try fixture.server.reset()
        let r = try fixture.env.run(["pull", "--dry-run"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(try fixture.server.stats()["get"] == 0)
        #expect(try fixture.env.run(["ls", "--offline", "--json"]).stdout == before, "the index changed")
        var original = expected
        original.files = expected.files.filter { ["Disc/song 0.mp3", "Disc/song 1.mp3"].contains($0.key) }
        try fixture.env.expectTracksEqual(original)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("would fetch") && $0.hasSuffix("lib/Disc/song 0.mp3  (changed)") }, "stdout: \(r.stdout)")
        #expect(lines.contains { $0.hasPrefix("would fetch") && $0.hasSuffix("lib/Disc/song 2.mp3") })
        #expect(lines.contains("would remove             lib/Disc/song 1.mp3"), "stdout: \(r.stdout)")
        #expect(lines.contains("lib: 3 to fetch (\(planBytes(fixture.library, except: "Disc/song 1.mp3"))), 1 to remove, 0 up to date"), "stdout: \(r.stdout)")
        // The plan within the budget comes last: what the cache would hold after the pull.
        #expect(lines.last?.hasPrefix("after the pull: library ") == true, "stdout: \(r.stdout)")
        #expect(lines.last?.hasSuffix(": 3 tracks complete, 0 heads only") == true, "stdout: \(r.stdout)")
    }

    private func planBytes(_ library: Library, except: String) -> String {
        let bytes = library.files.filter { $0.key != except && $0.key != "Disc/song 1.mp3" }.values.reduce(0) { $0 + $1.count }
        return formatSize(Int64(bytes))
    }

    /// Every pull fetches start sets first: with `--head-first=64KiB` on a slow server, the start set of every
    /// track (here, random bytes: its first 128 KiB and its last 128 KiB) is asked for before any track's rest,
    /// each byte once, and a file smaller than its head is fetched exactly once.
    @Test func startSetsOfEveryTrackComeBeforeAnyRest() throws {
        let size = 1_000_000
        var files = (0 ..< 5).map { ("Heads/t\($0).mp3", size) }
        files.append(("Heads/tiny.mp3", 10_000))
        let fixture = try Fixture(seed: 16, files: files, rate: 4 << 20, delayMS: 20)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--head-first=64KiB", "--jobs", "2", "--json"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let log = try fixture.server.log()
        let big = log.filter { !$0.path.hasSuffix("tiny.mp3") }
        let heads = big.filter { $0.rangeStart < 128 << 10 || $0.rangeStart >= Int64(size - (128 << 10)) }
        let rests = big.filter { $0.rangeStart >= 128 << 10 && $0.rangeStart < Int64(size - (128 << 10)) }
        #expect(Set(heads.map(\.path)).count == 5)
        #expect(Set(rests.map(\.path)).count == 5)
        let lastHead = try #require(heads.map(\.t).max()), firstRest = try #require(rests.map(\.t).min())
        #expect(lastHead < firstRest, "a rest was requested before every start set")
        #expect(log.filter { $0.path.hasSuffix("tiny.mp3") }.count == 1, "tiny.mp3 fetched more than once")
        #expect(r.stdout.contains(#""fetched_files":6"#), "stdout: \(r.stdout)")
        // Every byte is fetched once: heads and rests add up to the library.
        #expect(r.stdout.contains("\"fetched_bytes\":\(5 * size + 10_000)"), "stdout: \(r.stdout)")
    }

    /// `--json` prints exactly README's shape.
    @Test func jsonSummaryShape() throws {
        let fixture = try Fixture(seed: 17, files: Array(Self.files.prefix(2)),
                                  faults: #"[{"path": "song 1", "kind": "status", "status": 404, "count": -1}]"#)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--json"])
        #expect(r.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "stdout: \(r.stdout)")
        #expect(Set(object.keys) == ["remotes", "duration_s"])
        #expect(object["duration_s"] is NSNumber)
        let remotes = try #require(object["remotes"] as? [[String: Any]])
        #expect(remotes.count == 1)
        let remote = remotes[0]
        #expect(Set(remote.keys) == ["remote", "provider", "listed", "new", "resumed", "changed", "deleted", "moved", "fetched_files",
                                     "fetched_bytes", "head_bytes", "heads_cached", "skipped", "failed", "unreadable_folders",
                                     "unmatched_paths", "budget"])
        #expect(remote["unmatched_paths"] as? [Any] != nil && (remote["unmatched_paths"] as? [Any])?.isEmpty == true)
        #expect(remote["unreadable_folders"] as? [String] == [], "every folder was read")
        let budget = try #require(remote["budget"] as? [String: Any])
        #expect(Set(budget.keys) == ["budget", "planned_bytes", "library_bytes", "complete", "head_only", "none", "heads_bytes",
                                     "heads", "full_heads_bytes", "reduced", "freed_bytes", "pinned_over_budget", "limited_by_disk"])
        #expect(remote["remote"] as? String == "lib" && remote["provider"] as? String == "webdav")
        #expect((remote["listed"] as? NSNumber)?.intValue == 2 && (remote["new"] as? NSNumber)?.intValue == 2)
        #expect((remote["fetched_files"] as? NSNumber)?.intValue == 1)
        #expect((remote["fetched_bytes"] as? NSNumber)?.intValue == 400_000)
        let failed = try #require(remote["failed"] as? [[String: Any]])
        #expect(failed.count == 1 && Set(failed[0].keys) == ["path", "error"])
        #expect(r.stdout.hasSuffix("\n") && r.stdout.split(separator: "\n").count == 1)
    }

    /// What a cron mail holds: one line per file and a summary (no progress bars), timing normalised. The files
    /// finish in any order (a pull keeps twice --jobs files open, and they take the transfer slots as they come).
    @Test func nonTTYOutputSnapshot() throws {
        let fixture = try Fixture(seed: 18, files: Array(Self.files.prefix(3)))
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--jobs", "1"])
        #expect(r.status == 0)
        #expect(r.stdout.isEmpty)
        var lines = r.stderr.replacingOccurrences(of: #"in [0-9]+\.[0-9] s"#, with: "in T s", options: .regularExpression)
            .components(separatedBy: "\n")
        if lines.count > 4 { lines[1 ... 3].sort() }
        let normalised = lines.joined(separator: "\n")
        #expect(normalised == """
            lib: 3 files to fetch (1.1 MiB), 0 up to date
            fetched    391 KiB  lib/Disc/song 0.mp3
            fetched    392 KiB  lib/Disc/song 1.mp3
            fetched    393 KiB  lib/Disc/song 2.mp3
            lib: 3 listed, 3 new, 0 changed, 0 deleted; fetched 3 files (1.1 MiB) in T s

            """)
        let again = try fixture.env.run(["pull"])
        #expect(again.stderr.replacingOccurrences(of: #"in [0-9]+\.[0-9] s"#, with: "in T s", options: .regularExpression)
            == "lib: 3 listed, 0 new, 0 changed, 0 deleted; fetched 0 files (0 B) in T s\n")
    }

    /// Ctrl-C during a pull: a prompt exit with a message; the next pull resumes and completes.
    @Test func interruptExitsWithAMessageAndTheNextPullResumes() throws {
        let fixture = try Fixture(seed: 19, files: Self.files, rate: 512 << 10)
        defer { fixture.cleanup() }
        let pull = try fixture.env.start(["pull", "--jobs", "2"])
        #expect(try eventuallyBlocking { try fixture.server.stats()["bytes"] ?? 0 > 300_000 })
        pull.signal(SIGINT)
        let r = try pull.wait(timeout: 15)
        #expect(r.status == 130, "Ctrl-C exits 130: \(r.stderr)")
        #expect(r.stderr.contains("interrupted"), "stderr: \(r.stderr)")
        let cached = try fixture.env.cachedBytes()
        let partlyCached = try fixture.env.index().values.count {
            $0["state"] as? String != "cached" && (($0["cached_bytes"] as? NSNumber)?.int64Value ?? 0) > 0
        }
        try fixture.server.settle()
        let servedBefore = try fixture.server.stats()["bytes"] ?? 0
        let again = try fixture.env.run(["pull"])
        #expect(again.status == 0, "stderr: \(again.stderr)")
        try fixture.env.expectTracksEqual(fixture.library)
        let total = Int64(fixture.library.files.values.reduce(0) { $0 + $1.count })
        let refetched = (try fixture.server.stats()["bytes"] ?? 0) - servedBefore
        #expect(cached > 0, "nothing was kept after Ctrl-C")
        #expect(refetched == total - cached, "the resumed pull fetched \(refetched) bytes, \(total - cached) were missing")
        // The summary accounts for every file it fetched: the partly cached ones as resumed, not as nothing.
        let counts = try #require(again.stderr.firstMatch(of: /(\d+) new, (?:(\d+) resumed, )?0 changed, 0 deleted; fetched (\d+) file/),
                                  "summary: \(again.stderr)")
        let resumed = Int(counts.2 ?? "0") ?? 0
        #expect(resumed == partlyCached, "\(partlyCached) files were partly cached: \(again.stderr)")
        #expect((Int(counts.1) ?? 0) + resumed == Int(counts.3), "summary: \(again.stderr)")
    }

    /// `status` after a pull that was interrupted counts what it did fetch (it said "fetched 0 tracks": the counts
    /// were in the report a stopped run never returns).
    @Test func anInterruptedPullIsRecordedWithWhatItFetched() throws {
        let fixture = try Fixture(seed: 20, files: [("A/small.mp3", 40_000), ("B/big 1.mp3", 4_000_000), ("B/big 2.mp3", 4_000_000)],
                                  rate: 512 << 10)
        defer { fixture.cleanup() }
        let pull = try fixture.env.start(["pull", "--jobs", "3"])
        #expect(try eventuallyBlocking { FileManager.default.fileExists(atPath: fixture.env.tracks.appendingPathComponent("A/small.mp3").path) })
        pull.signal(SIGINT)
        let r = try pull.wait(timeout: 15)
        #expect(r.status == 130, "stderr: \(r.stderr)")
        let status = try fixture.env.run(["status", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        let last = (object?["remotes"] as? [[String: Any]])?.first?["last_pull"] as? [String: Any]
        #expect(last?["outcome"] as? String == "interrupted", "\(status.stdout)")
        #expect(last?["fetched_files"] as? Int == 1, "\(status.stdout)")
        #expect((last?["fetched_bytes"] as? Int ?? 0) >= 40_000, "\(status.stdout)")
    }
}

/// ByteSize.format's rendering, for expected plan lines: 1 decimal under 100, whole numbers above, binary units.
func formatSize(_ bytes: Int64) -> String {
    if bytes < 1024 { return "\(bytes) B" }
    for (name, f) in [("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)] where Double(bytes) >= f {
        let v = Double(bytes) / f
        return v >= 100 ? "\(Int(v.rounded())) \(name)" : "\((v * 10).rounded() / 10) \(name)"
    }
    return "\(bytes) B"
}
