#if canImport(Glibc)
import Glibc
#endif
import CloudSyncCache
import Foundation
import Testing
import TestSupport

/// The built `cloudsync` as a person uses it (#20): PATHs that match nothing, dry runs for scripts, names
/// from a hostile server on the terminal, and the cache commands that drop or locate one track.
@Suite struct CommandLineBehaviourTests {
    static let files: [(String, Int)] = [("Album/track 0.mp3", 40_000), ("Album/track 1.mp3", 50_000)]

    /// #20.5: a PATH that matches nothing exits 2 naming it and the closest path, before any download; the
    /// `remote/path` form that ls prints is accepted; `--head-first 1MiB` takes the size, not a PATH.
    @Test func pathsThatMatchNothingExit2WithTheClosestMatch() throws {
        let fixture = try Fixture(seed: 41, files: Self.files)
        defer { fixture.cleanup() }
        let typo = try fixture.env.run(["pull", "album/track 0.mp3"])
        #expect(typo.status == 2, "stderr: \(typo.stderr)")
        #expect(typo.stderr.contains("no file or folder 'album/track 0.mp3' in remote lib; the closest is 'Album/track 0.mp3'"), "stderr: \(typo.stderr)")
        #expect(try fixture.server.stats()["get"] == 0, "nothing is downloaded for a PATH that matches nothing")
        let glob = try fixture.env.run(["pull", "Album/*.mp3"])
        #expect(glob.status == 2 && glob.stderr.contains("'Album/*.mp3'"), "stderr: \(glob.stderr)")

        let prefixed = try fixture.env.run(["pull", "lib/Album/track 0.mp3"])
        #expect(prefixed.status == 0, "stderr: \(prefixed.stderr)")
        #expect(try fixture.env.index()["Album/track 0.mp3"]?["state"] as? String == "cached")
        #expect(try fixture.env.index()["Album/track 1.mp3"]?["state"] as? String == "missing")

        let spaced = try fixture.env.run(["pull", "--head-first", "1MiB", "Album"])
        #expect(spaced.status == 0, "the size is not taken as a PATH: \(spaced.stderr)")
        #expect(try fixture.env.index()["Album/track 1.mp3"]?["state"] as? String == "cached")

        let ls = try fixture.env.run(["ls", "--offline", "Albun"])
        #expect(ls.status == 2 && ls.stderr.contains("'Albun'") && ls.stderr.contains("'Album'"), "stderr: \(ls.stderr)")
        #expect(!ls.stderr.contains("cloudsync: error: cloudsync:"), "the program's name once: \(ls.stderr)")
        let lsPrefixed = try fixture.env.run(["ls", "--offline", "lib/Album"])
        #expect(lsPrefixed.status == 0 && lsPrefixed.stdout.split(separator: "\n").count == 2, "stdout: \(lsPrefixed.stdout)")
    }

    /// #20.8: `pull --dry-run --json` prints only JSON, holding the plan.
    @Test func dryRunJSONHoldsThePlanAndNothingElse() throws {
        let fixture = try Fixture(seed: 42, files: Self.files)
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--dry-run", "--json"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "stdout: \(r.stdout)")
        let remote = try #require((object["remotes"] as? [[String: Any]])?.first)
        let plan = try #require(remote["plan"] as? [String: Any], "\(remote)")
        let fetch = try #require(plan["fetch"] as? [[String: Any]])
        #expect(fetch.compactMap { $0["path"] as? String } == ["Album/track 0.mp3", "Album/track 1.mp3"])
        #expect((plan["fetch_bytes"] as? NSNumber)?.int64Value == 90_000)
        #expect(plan["fetch_count"] as? Int == 2 && plan["remove"] as? [String] == [] && plan["remove_count"] as? Int == 0)
        #expect(try fixture.server.stats()["get"] == 0)
    }

    /// #19.8: escape sequences and CR/LF in remote names are shown as `\x1b`, `\r`, `\n` by pull and ls;
    /// `--json` keeps the name exactly.
    @Test func hostileNamesAreShownNotObeyed() throws {
        let name = "Evil/\u{1B}]0;owned\u{07}\u{1B}[31mred\rfetched  fake.mp3"
        let fixture = try Fixture(seed: 43, files: [(name, 20_000), ("Evil/plain.mp3", 10_000)])
        defer { fixture.cleanup() }
        let pull = try fixture.env.run(["pull"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        let shown = "Evil/\\x1b]0;owned\\x07\\x1b[31mred\\rfetched  fake.mp3"
        #expect(pull.stderr.contains(shown), "stderr: \(pull.stderr)")
        #expect(!pull.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0 == "\r" })
        let ls = try fixture.env.run(["ls", "--offline"])
        #expect(ls.stdout.contains(shown) && !ls.stdout.unicodeScalars.contains { $0.value == 0x1B || $0 == "\r" }, "stdout: \(ls.stdout)")
        #expect(ls.stdout.split(separator: "\n").count == 2, "one line per track, the count on stderr: \(ls.stdout)")
        #expect(ls.stderr.contains("2 tracks"))
        let none = try fixture.env.run(["ls", "--offline", "--artist", "nobody"])
        #expect(none.status == 0 && none.stdout.isEmpty && none.stderr.contains("0 tracks, 0 B; 0 cached"), "stderr: \(none.stderr)")
        let json = try fixture.env.index()
        #expect(json[name] != nil, "--json keeps the name as it is")
        let tsv = try fixture.env.run(["ls", "--offline", "--tsv"])
        let fields = tsv.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false) }
        #expect(fields.count == 2 && fields.allSatisfy { $0.count == 6 && $0[0] == "lib" && $0[2] == "cached" }, "stdout: \(tsv.stdout)")
        #expect(fields.contains { $0[1] == "Evil/plain.mp3" && $0[3] == "10000" && $0[4] == "10000" })
    }

    /// `cache clear` leaves a track another process is writing and says so (exit 1), as `cache rm` does; before,
    /// it said only "cleared N tracks".
    @Test func clearNamesTheTracksBeingWritten() throws {
        let fixture = try Fixture(seed: 45, files: [("Album/a.mp3", 50_000), ("Album/b.mp3", 50_000)])
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        let cache = try Cache.open(root: fixture.env.cacheDir)
        let writer = try cache.openWriter(remote: "lib", path: "Album/b.mp3")
        defer { writer.close() }
        let clear = try fixture.env.run(["cache", "clear", "--yes"])
        #expect(clear.status == 1, "stderr: \(clear.stderr)")
        #expect(clear.stdout.contains("cleared 1 track") && clear.stderr.contains("lib:Album/b.mp3 is being written by another process"),
                "stdout: \(clear.stdout) stderr: \(clear.stderr)")
    }

    /// #20.9: `cache path` of a track that is not complete says so on stderr (exit 1, nothing on stdout) and
    /// where its bytes are; `cache rm` drops a track's bytes; `pull --refetch` downloads a PATH again.
    @Test func cachePathRmAndRefetch() throws {
        let head = 64 << 10
        let fixture = try Fixture(seed: 44, files: [("Album/track 0.mp3", 400_000), ("Album/track 1.mp3", 50_000)],
                                  faults: "[{\"kind\": \"status\", \"status\": 403, \"count\": -1, \"from\": \(head), \"path\": \"track 0\"}]")
        defer { fixture.cleanup() }
        let first = try fixture.env.run(["pull", "--head-first=64KiB"])
        #expect(first.status == 1, "track 0 fails after its head: \(first.stderr)")
        let partial = try fixture.env.run(["cache", "path", "lib", "Album/track 0.mp3"])
        #expect(partial.status == 1 && partial.stdout.isEmpty, "stdout: \(partial.stdout)")
        #expect(partial.stderr.contains("lib/Album/track 0.mp3 is not complete") && partial.stderr.contains("/partial/"), "stderr: \(partial.stderr)")
        let complete = try fixture.env.run(["cache", "path", "lib", "Album/track 1.mp3"])
        #expect(complete.status == 0 && complete.stdout == fixture.env.tracks.appendingPathComponent("Album/track 1.mp3").path + "\n")
        let typo = try fixture.env.run(["cache", "path", "lib", "Album/track 2.mp3"])
        #expect(typo.status == 2 && (typo.stderr.contains("(the closest is 'Album/track 0.mp3')") || typo.stderr.contains("(the closest is 'Album/track 1.mp3')")),
                "stderr: \(typo.stderr)")
        let folder = try fixture.env.run(["cache", "path", "lib", "Album"])
        #expect(folder.status == 2 && folder.stderr.contains("'Album' is a folder of remote 'lib'"), "stderr: \(folder.stderr)")

        try fixture.server.setFaults("[]")
        let rm = try fixture.env.run(["cache", "rm", "Album/track 1.mp3"])
        #expect(rm.status == 0 && rm.stdout.contains("removed") && rm.stdout.contains("lib/Album/track 1.mp3"), "\(rm.stdout) \(rm.stderr)")
        #expect(try fixture.env.index()["Album/track 1.mp3"]?["state"] as? String == "missing")
        #expect(try fixture.env.run(["cache", "rm", "Album/nope.mp3"]).status == 2)

        #expect(try fixture.env.run(["pull"]).status == 0)
        try fixture.server.reset()
        let refetch = try fixture.env.run(["pull", "--refetch", "Album/track 1.mp3"])
        #expect(refetch.status == 0, "stderr: \(refetch.stderr)")
        #expect(try fixture.server.log().filter { $0.path.hasSuffix("track%201.mp3") || $0.path.hasSuffix("track 1.mp3") }.reduce(0) { $0 + $1.bytes } == 50_000)
        #expect(try fixture.server.stats()["bytes"] == 50_000, "only the PATH is fetched again")
        #expect(try fixture.env.run(["pull", "--refetch"]).status == 2, "--refetch needs a PATH")
    }
}

/// #20.3: the live progress frame as a terminal receives it: redrawn in place (cursor up, erase), every frame
/// line within the width, finished-file lines above it; TERM=dumb and --no-progress get no cursor movement.
@Suite struct ProgressOutputTests {
    @Test func frameFitsTheWidthAndIsRedrawnInPlace() throws {
        let long = "Classical/" + String(repeating: "Very Long Folder Name ", count: 4) + "/01 " + String(repeating: "x", count: 80) + ".mp3"
        let fixture = try Fixture(seed: 45, files: [(long, 600_000), ("b.mp3", 300_000)], rate: 400 << 10)
        defer { fixture.cleanup() }
        let env = fixture.env
        let p = env.process(["pull", "--progress", "--jobs", "2"])
        var environment = p.environment ?? [:]
        environment["COLUMNS"] = "40"
        environment["TERM"] = "xterm"
        p.environment = environment
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let bytes = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains("\u{1B}[J") && text.contains("A\r"), "the frame is erased and redrawn: \(text.debugDescription)")
        // What is left between the control sequences: frame lines are the status line and the file lines.
        let plain = text.replacingOccurrences(of: "\u{1B}\\[[0-9]*[AJK]", with: "", options: .regularExpression)
            .replacingOccurrences(of: "\r", with: "")
        let frameLines = plain.split(separator: "\n").filter { $0.hasPrefix("[") || $0.hasPrefix("  ") }
        #expect(!frameLines.isEmpty)
        for line in frameLines { #expect(line.count <= 39, "wider than 40 columns: \(line)") }
        #expect(frameLines.contains { $0.contains("…") }, "the long name is shortened: \(frameLines)")
        #expect(plain.contains("fetched") && plain.contains("b.mp3"), "finished files are printed above the frame")
    }

    @Test(arguments: [["pull", "--progress"], ["pull", "--no-progress"]])
    func noCursorMovementWhenDumbOrDisabled(arguments: [String]) throws {
        let fixture = try Fixture(seed: 46, files: [("a.mp3", 200_000)])
        defer { fixture.cleanup() }
        let p = fixture.env.process(arguments)
        var environment = p.environment ?? [:]
        environment["TERM"] = arguments.contains("--progress") ? "dumb" : "xterm"
        p.environment = environment
        let err = Pipe()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = err
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        #expect(!text.contains("\u{1B}"), "no escape sequence: \(text.debugDescription)")
        #expect(text.contains("fetched"))
    }
}

/// #20.11: -q means errors only, each fact is printed once, counts read "1 file", "1 track".
@Suite struct OutputEconomyTests {
    @Test func quietPrintsNothingAndVerboseLogsEachExchangeOnce() throws {
        var fixture = try Fixture(seed: 47, files: [("one.mp3", 30_000)])
        defer { fixture.cleanup() }
        let verbose = try fixture.env.run(["-v", "ls"])
        #expect(verbose.status == 0, "stderr: \(verbose.stderr)")
        let exchanges = verbose.stderr.split(separator: "\n").filter { $0.contains("debug: PROPFIND") }
        #expect(!exchanges.isEmpty && exchanges.count == Set(exchanges).count, "each exchange once: \(verbose.stderr)")
        #expect(Int64(exchanges.count) == (try fixture.server.stats()["propfind"] ?? -1), "one line per request: \(verbose.stderr)")
        #expect(verbose.stderr.contains("1 track, "), "singular: \(verbose.stderr)")

        let pull = try fixture.env.run(["pull"])
        #expect(pull.stderr.contains("1 file to fetch") && pull.stderr.contains("fetched 1 file ("), "stderr: \(pull.stderr)")
        try fixture.library.remove("one.mp3")
        let quiet = try fixture.env.run(["-q", "pull"])
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty, "-q: \(quiet.stdout) \(quiet.stderr)")
        let evict = try fixture.env.run(["-q", "cache", "evict"])
        #expect(evict.status == 0 && evict.stdout.isEmpty && evict.stderr.isEmpty, "-q: \(evict.stdout) \(evict.stderr)")
    }
}

/// #20.12: a file changed on the server shows as `outdated` in ls (its old version still plays), and pull
/// counts it as changed whether or not ls recorded the new version first.
@Suite struct ChangedFileTests {
    @Test func changedFileIsOutdatedAndCountedAsChanged() throws {
        var fixture = try Fixture(seed: 48, files: [("a.mp3", 30_000), ("b.mp3", 30_000)])
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        var random = SeededRandom(seed: 9)
        try fixture.library.add("a.mp3", random.bytes(31_000))
        let ls = try fixture.env.run(["ls"])
        #expect(ls.stdout.split(separator: "\n").contains { $0.hasPrefix("outdated") && $0.hasSuffix("a.mp3") }, "stdout: \(ls.stdout)")
        for path in ["a.mp3", "b.mp3"] {
            if path == "b.mp3" { try fixture.library.add("b.mp3", random.bytes(32_000)) }
            let pull = try fixture.env.run(["pull", "--json"])
            #expect(pull.status == 0, "stderr: \(pull.stderr)")
            let object = try JSONSerialization.jsonObject(with: Data(pull.stdout.utf8)) as? [String: Any]
            let remote = try #require((object?["remotes"] as? [[String: Any]])?.first)
            #expect(remote["changed"] as? Int == 1 && remote["new"] as? Int == 0, "\(path) (after ls: \(path == "a.mp3")): \(remote)")
        }
    }
}

/// #20.9: `cache verify` finds a truncated track by its size and reports a touched one by its mtime.
@Suite struct VerifyCommandTests {
    @Test func verifyFindsATruncatedTrackAndReportsMtimeDrift() throws {
        let fixture = try Fixture(seed: 49, files: [("a.mp3", 30_000), ("b.mp3", 30_000), ("c.mp3", 30_000)])
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        #expect(truncate(fixture.env.tracks.appendingPathComponent("a.mp3").path, 10_000) == 0)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_000_000)],
                                              ofItemAtPath: fixture.env.tracks.appendingPathComponent("b.mp3").path)
        let r = try fixture.env.run(["cache", "verify", "--json"])
        #expect(r.status == 1, "stderr: \(r.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "stdout: \(r.stdout)")
        #expect(object["wrong_size"] as? [String] == ["lib:a.mp3"], "\(object)")
        #expect(object["mtime_drift"] as? [String] == ["lib:b.mp3"], "\(object)")
        #expect(object["checked"] as? Int == 3)
        #expect(try fixture.env.index()["a.mp3"]?["state"] as? String == "missing")
        let again = try fixture.env.run(["cache", "verify"])
        #expect(again.status == 0 && again.stdout.contains("2 checked"), "stdout: \(again.stdout)")
    }
}
