import TestSupport
import Foundation
import Testing

/// #25's filters with the real binary and the WebDAV fake: config keys per remote and the flags of ls, pull and
/// cache pin. Excluded files are neither indexed nor fetched, and a cached track that becomes excluded stays.
@Suite struct FilterTests {
    static let files: [(String, Int)] = [
        ("Album/a.flac", 300_000), ("Album/b.mp3", 200_000), ("Album/tiny.mp3", 1_000), ("Live/c.mp3", 100_000),
        ("Live/2019/d.MP3", 120_000),
    ]

    private func paths(_ r: Env.Result) throws -> [String] {
        let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
        return rows.compactMap { $0["path"] as? String }.sorted()
    }

    /// The files the fake served (GETs) since its last reset.
    private func fetched(_ server: FakeServer) throws -> Set<String> {
        Set(try server.log().map { String($0.path.dropFirst("/dav/".count)) })
    }

    @Test func configFiltersDecideWhatIsIndexedAndFetched() throws {
        var fixture = try Fixture(seed: 25, files: Self.files)
        defer { fixture.cleanup() }
        let lines = Env.webdavLines(fixture.server.url) + ["exclude = [\"Live/**\"]", "min_size = \"10KiB\""]
        try fixture.env.write(remoteLines: lines)
        let pull = try fixture.env.run(["pull", "--json"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        #expect(try fetched(fixture.server) == ["Album/a.flac", "Album/b.mp3"])
        let ls = try fixture.env.run(["ls", "--json"])
        #expect(try paths(ls) == ["Album/a.flac", "Album/b.mp3"], "stdout: \(ls.stdout)")
        // Without the filter the index shows what the filtered pull never recorded: nothing of Live/ or tiny.
        try fixture.env.write(remoteLines: Env.webdavLines(fixture.server.url))
        #expect(try fixture.env.index().keys.sorted() == ["Album/a.flac", "Album/b.mp3"])
        fixture.library.files = fixture.library.files.filter { $0.key.hasPrefix("Album/") && $0.key != "Album/tiny.mp3" }
        try fixture.env.expectTracksEqual(fixture.library)
    }

    @Test func aCachedTrackThatBecomesExcludedStays() throws {
        let fixture = try Fixture(seed: 26, files: Self.files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        try fixture.env.write(remoteLines: Env.webdavLines(fixture.server.url) + ["include = [\"*.flac\"]"])
        try fixture.server.reset()
        let again = try fixture.env.run(["pull", "--json"])
        #expect(again.status == 0 && again.stdout.contains(#""deleted":0"#), "\(again.stdout) \(again.stderr)")
        #expect(try fixture.server.log().isEmpty)
        try fixture.env.write(remoteLines: Env.webdavLines(fixture.server.url))
        #expect(try fixture.env.index().count == Self.files.count)
        try fixture.env.expectTracksEqual(fixture.library)
    }

    @Test func commandLineFiltersOfLsPullAndPin() throws {
        let fixture = try Fixture(seed: 27, files: Self.files)
        defer { fixture.cleanup() }
        // rclone's rules: the first matching rule wins, * stays within a folder, ** crosses folders, a leading / anchors at
        // the root.
        let flac = try fixture.env.run(["ls", "--json", "--include", "*.flac"])
        #expect(flac.status == 0, "stderr: \(flac.stderr)")
        #expect(try paths(flac) == ["Album/a.flac"], "\(flac.stdout)")
        let pullLive = try fixture.env.run(["pull", "--include", "/Live/*.mp3"])
        #expect(pullLive.status == 0, "stderr: \(pullLive.stderr)")
        let liveFetched = try fetched(fixture.server)
        #expect(liveFetched == ["Live/c.mp3"], "\(liveFetched)")
        let rulesFile = fixture.env.dir.appendingPathComponent("rules.txt")
        try "# keep big mp3s\n- Live/c.mp3\n+ **.{mp3,flac}\n- **\n".write(to: rulesFile, atomically: true, encoding: .utf8)
        try fixture.server.reset()
        let sized = try fixture.env.run(["pull", "--filter-from", rulesFile.path, "--ignore-case", "--min-size", "100KiB",
                                         "--max-size", "250000"])
        #expect(sized.status == 0, "stderr: \(sized.stderr)")
        let sizedFetched = try fetched(fixture.server)
        #expect(sizedFetched == ["Album/b.mp3", "Live/2019/d.MP3"], "\(sizedFetched)")
        // The index now holds what the three filtered runs recorded: a.flac, b.mp3, c.mp3 and d.MP3 (not tiny.mp3).
        #expect(try fixture.env.index().keys.sorted() == ["Album/a.flac", "Album/b.mp3", "Live/2019/d.MP3", "Live/c.mp3"])
        // --include rules come before --exclude rules, so /Live/** keeps Live/c.mp3 although *.mp3 is excluded.
        let live = try fixture.env.run(["ls", "--offline", "--json", "--include", "/Live/**", "--exclude", "*.mp3"])
        #expect(try paths(live) == ["Live/2019/d.MP3", "Live/c.mp3"], "\(live.stdout)")
        let pin = try fixture.env.run(["cache", "pin", "--include", "*.mp3", "--remote", "lib", "Album"])
        #expect(pin.status == 0 && pin.stdout.contains("pinned 1 track under lib/Album"), "\(pin.stdout) \(pin.stderr)")
        let none = try fixture.env.run(["cache", "pin", "--exclude", "*", "--remote", "lib", "Album"])
        #expect(none.status != 0 && none.stderr.contains("no track 'Album'"), "\(none.stdout) \(none.stderr)")
        // PATHs as pull, ls and rm take them: prefixed with the remote's name too; one that names nothing is a usage
        // error with the closest path, before anything is pinned.
        let prefixed = try fixture.env.run(["cache", "unpin", "--remote", "lib", "lib/Album/b.mp3"])
        #expect(prefixed.status == 0 && prefixed.stdout.contains("unpinned 1 track under lib/Album/b.mp3"), "\(prefixed.stdout) \(prefixed.stderr)")
        let miss = try fixture.env.run(["cache", "pin", "--remote", "lib", "Live", "Albun"])
        #expect(miss.status == 2 && miss.stderr.contains("no track or folder 'Albun' in remote 'lib' (the closest is 'Album')"),
                "\(miss.stdout) \(miss.stderr)")
        #expect(miss.stdout.isEmpty, "Live was pinned before the miss was found: \(miss.stdout)")
        let status = try fixture.env.run(["cache", "status", "--json"])
        #expect(status.stdout.contains("\"pinned\":0"), "\(status.stdout)")
    }

    @Test func ageFiltersUseTheRemoteModificationTime() throws {
        let fixture = try Fixture(seed: 28, files: Self.files)
        defer { fixture.cleanup() }
        let old = Date().addingTimeInterval(-400 * 86400)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: fixture.library.root.appendingPathComponent("Live/c.mp3").path)
        #expect(try fixture.env.run(["ls"]).status == 0)
        let recent = try fixture.env.run(["ls", "--offline", "--json", "--max-age", "365d"])
        #expect(try paths(recent) == ["Album/a.flac", "Album/b.mp3", "Album/tiny.mp3", "Live/2019/d.MP3"], "\(recent.stdout)")
        let older = try fixture.env.run(["ls", "--offline", "--json", "--min-age", "30d"])
        #expect(try paths(older) == ["Live/c.mp3"], "\(older.stdout)")
    }

    @Test func badFiltersAreClearErrors() throws {
        let fixture = try Fixture(seed: 29, files: Self.files)
        defer { fixture.cleanup() }
        let flag = try fixture.env.run(["ls", "--offline", "--include", "{{.*}}"])
        #expect(flag.status == 2 && flag.stderr.contains("regular expressions"), "stderr: \(flag.stderr)")
        let size = try fixture.env.run(["pull", "--min-size", "big"])
        #expect(size.status == 2 && size.stderr.contains("--min-size expects a size"), "stderr: \(size.stderr)")
        try fixture.env.write(remoteLines: Env.webdavLines(fixture.server.url) + ["exclude = [\"ok/**\", \"[unclosed\"]"])
        let config = try fixture.env.run(["ls", "--offline"])
        #expect(config.status == 3, "stderr: \(config.stderr)")
        #expect(config.stderr.contains("\(fixture.env.config.path):14:21:"), "stderr: \(config.stderr)")
    }
}

/// #25's `--no-delete` / `pull.delete = false` with the real binary and the WebDAV fake.
@Suite struct NoDeleteTests {
    @Test func aTrackDeletedRemotelyStaysCachedAndLsSaysSo() throws {
        var fixture = try Fixture(seed: 30, files: FilterTests.files)
        defer { fixture.cleanup() }
        #expect(try fixture.env.run(["pull"]).status == 0)
        let kept = try #require(fixture.library.files["Album/b.mp3"])
        try fixture.library.remove("Album/b.mp3")
        try fixture.server.reset()
        let first = try fixture.env.run(["pull", "--no-delete", "--json"])
        #expect(first.status == 0 && first.stdout.contains(#""deleted":1"#), "\(first.stdout) \(first.stderr)")
        #expect(first.stderr.contains("1 track deleted remotely kept in the cache"), "stderr: \(first.stderr)")
        #expect(try Data(contentsOf: fixture.env.tracks.appendingPathComponent("Album/b.mp3")) == kept)
        let ls = try fixture.env.run(["ls"])
        #expect(ls.status == 0 && ls.stdout.contains("deleted remotely") && ls.stdout.contains("Album/b.mp3"), "\(ls.stdout) \(ls.stderr)")
        let json = try fixture.env.index()["Album/b.mp3"]
        #expect(json?["deleted_remotely"] as? Bool == true && json?["state"] as? String == "cached", "\(String(describing: json))")
        #expect(try fixture.env.index()["Album/a.flac"]?["deleted_remotely"] as? Bool == false)
        // Configured instead of the flag; an earlier run's kept deletion is not reported again.
        try fixture.env.write(remoteLines: Env.webdavLines(fixture.server.url), pull: ["delete = false"])
        let again = try fixture.env.run(["pull", "--json"])
        #expect(again.status == 0 && again.stdout.contains(#""deleted":0"#) && !again.stderr.contains("kept in the cache"),
                "\(again.stdout) \(again.stderr)")
        #expect(FileManager.default.fileExists(atPath: fixture.env.tracks.appendingPathComponent("Album/b.mp3").path))
        // Listed again, it is an ordinary track; with delete on, a deletion removes it.
        try fixture.library.add("Album/b.mp3", kept)
        #expect(try fixture.env.run(["ls"]).status == 0)
        #expect(try fixture.env.index()["Album/b.mp3"]?["deleted_remotely"] as? Bool == false)
        try fixture.library.remove("Album/b.mp3")
        try fixture.env.write(remoteLines: Env.webdavLines(fixture.server.url))
        let removing = try fixture.env.run(["pull", "--json"])
        #expect(removing.status == 0 && removing.stdout.contains(#""deleted":1"#), "\(removing.stdout) \(removing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fixture.env.tracks.appendingPathComponent("Album/b.mp3").path))
        try fixture.env.expectTracksEqual(fixture.library)
    }
}
