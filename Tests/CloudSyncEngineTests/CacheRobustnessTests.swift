import Foundation
import TestSupport
import Testing

/// The cache against concurrent processes and a full disk, through the real binary (#19.5, #19.14).
@Suite struct CacheRobustnessTests {
    /// Processes opening a brand-new index at the same moment (a cron pull and a serve on a fresh machine)
    /// all succeed: creating and migrating the index waits its turn instead of failing with SQLITE_BUSY.
    @Test func processesOpeningANewIndexTogetherAllSucceed() throws {
        for round in 0 ..< 3 {
            let env = try Env(url: "http://127.0.0.1:9/dav/")
            defer { env.cleanup() }
            let runs = try (0 ..< 8).map { _ in try env.start(["cache", "status"]) }
            for (i, run) in runs.enumerated() {
                let r = try run.wait(timeout: 60)
                #expect(r.status == 0, "round \(round), process \(i): \(r.stderr)")
                #expect(!r.stderr.contains("locked"), "round \(round), process \(i): \(r.stderr)")
            }
        }
    }

    /// A full disk (a tmpfs filled to the last byte) does not stop read-only commands, and `cache clear`
    /// frees space. Needs root (mount); skipped otherwise.
    @Test(.enabled(if: getuid() == 0, "mount needs root"))
    func aFullDiskStillReadsAndClearFreesSpace() throws {
        let fixture = try Fixture(seed: 91, files: (0 ..< 4).map { ("Disc/t\($0).mp3", 300_000) })
        defer { fixture.cleanup() }
        let disk = try SmallDisk(for: fixture)
        defer { disk.unmount() }
        let mountPoint = disk.mountPoint
        let pull = try fixture.env.run(["pull"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        // Fill the disk to the last block.
        let filler = mountPoint.appendingPathComponent("filler")
        let dd = try Process.run(URL(fileURLWithPath: "/bin/dd"), arguments: ["if=/dev/zero", "of=\(filler.path)", "bs=4096"])
        dd.waitUntilExit()
        for command in [["ls", "--offline"], ["cache", "status"], ["ls", "--offline", "--json"]] {
            let r = try fixture.env.run(command)
            #expect(r.status == 0, "\(command) on a full disk: \(r.stderr)")
        }
        let clear = try fixture.env.run(["cache", "clear", "--yes"])
        #expect(clear.status == 0, "cache clear on a full disk: \(clear.stderr)")
        #expect(clear.stdout.contains("cleared 4 tracks"), "stdout: \(clear.stdout)")
        try FileManager.default.removeItem(at: filler)
        let again = try fixture.env.run(["pull"])
        #expect(again.status == 0, "stderr: \(again.stderr)")
    }

    /// Another program filled the disk since serve's last budget round, and a player asks for a track the cache
    /// does not hold: serve makes room (the budget, lowered by the full disk, reduces the cache, the track being
    /// played spared) and the track plays whole. Before, the fetch hit ENOSPC and the player's response was cut
    /// where the disk ran out. Needs root (mount); skipped otherwise.
    @Test(.enabled(if: getuid() == 0, "mount needs root"))
    func serveMakesRoomWhenTheDiskFillsUnderIt() throws {
        var fixture = try Fixture(seed: 93, files: (0 ..< 3).map { ("Disc/t\($0).mp3", 2 << 20) })
        defer { fixture.cleanup() }
        let disk = try SmallDisk(for: fixture)
        defer { disk.unmount() }
        let pull = try fixture.env.run(["pull"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        // A new track is listed (not fetched), then the disk fills up but for 512 KiB.
        try fixture.library.add("Disc/new.mp3", Data((0 ..< (3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }))
        #expect(try fixture.env.run(["ls"]).status == 0)
        let serve = try fixture.env.start(["-v", "serve", "--port", "0"])
        defer { serve.stop() }
        let base = try serve.firstStdoutLine(timeout: 30).replacingOccurrences(of: "listening on ", with: "")
        // serve's first budget round (at start, within the budget then) is over before the disk fills.
        let deadline = Date().addingTimeInterval(30)
        while !serve.stderr.contains("budget round: nothing to reduce"), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let filler = disk.mountPoint.appendingPathComponent("filler")
        let dd = try Process.run(URL(fileURLWithPath: "/bin/dd"), arguments: ["if=/dev/zero", "of=\(filler.path)", "bs=4096", "status=none"])
        dd.waitUntilExit()
        let keep = 512 << 10
        let size = (try FileManager.default.attributesOfItem(atPath: filler.path)[.size] as? NSNumber)?.intValue ?? 0
        #expect(truncate(filler.path, off_t(max(0, size - keep))) == 0)
        let served = fixture.env.dir.appendingPathComponent("served.mp3")
        let get = try Process.run(URL(fileURLWithPath: "/usr/bin/curl"), arguments: ["-s", "-o", served.path, "--max-time", "60", base + "tracks/lib/Disc/new.mp3"])
        get.waitUntilExit()
        let whole = (try? Data(contentsOf: served)) == fixture.library.files["Disc/new.mp3"]
        serve.stop()
        let log = (try? String(contentsOf: serve.err, encoding: .utf8)) ?? ""
        #expect(whole, "curl exit \(get.terminationStatus), \((try? Data(contentsOf: served).count) ?? 0) bytes; serve: \(log)")
        #expect(log.contains("making room in the cache"), "the disk never filled: nothing was tested; serve: \(log)")
        // At start, the small disk (not cache.max_size) set a budget below the library: serve said so.
        #expect(log.contains("the disk of the cache is nearly full: the budget is"), "serve: \(log)")
    }

    /// A library bigger than a small disk, `min_free = "0"`: the pull fills the disk with what fits and every file
    /// it fetched is promoted. With every free byte as the budget, files' last partial blocks and the index's
    /// growing log went past the end of the disk: the pull failed with disk full (exit 74), its fetched files
    /// left in partial/, and the next pull the same. Needs root (mount); skipped otherwise.
    @Test(.enabled(if: getuid() == 0, "mount needs root"))
    func aLibraryBiggerThanTheDiskFillsItAndCommits() throws {
        // 1,600 files of 20 KiB (31 MiB) for a 24 MiB filesystem: many group commits, each growing the index's log.
        let fixture = try Fixture(seed: 92, files: (0 ..< 1600).map { ("Disc \($0 / 20)/t\($0).mp3", 20_480) })
        defer { fixture.cleanup() }
        let disk = try SmallDisk(for: fixture)
        defer { disk.unmount() }
        let cacheDir = disk.cacheDir
        for round in 1 ... 2 {
            let pull = try fixture.env.run(["pull"])
            #expect(pull.status == 0, "round \(round): \(pull.stderr)")
            #expect(pull.stderr.contains("stays free for the cache's index"), "round \(round): \(pull.stderr)")
            let partials = try FileManager.default.contentsOfDirectory(atPath: cacheDir.appendingPathComponent("partial").path)
            #expect(partials.isEmpty, "round \(round): fetched but not promoted: \(partials)")
        }
        let tracks = FileManager.default.enumerator(atPath: cacheDir.appendingPathComponent("tracks").path)?
            .compactMap { $0 as? String }.filter { $0.hasSuffix(".mp3") } ?? []
        #expect(tracks.count >= 200, "\(tracks.count) tracks in 24 MiB")
        let verify = try fixture.env.run(["cache", "verify"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
    }
}

/// A 24 MiB tmpfs mounted for one test, holding `fixture`'s cache with `min_free = "0"` (needs root).
private struct SmallDisk {
    let mountPoint: URL
    var cacheDir: URL { mountPoint.appendingPathComponent("cache") }

    init(for fixture: Fixture) throws {
        mountPoint = try temporaryDirectory("tmpfs")
        let mount = try Process.run(URL(fileURLWithPath: "/bin/mount"), arguments: ["-t", "tmpfs", "-o", "size=24m", "tmpfs", mountPoint.path])
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else {
            try? FileManager.default.removeItem(at: mountPoint)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "mount -t tmpfs failed"])
        }
        try fixture.env.moveCache(to: mountPoint.appendingPathComponent("cache"))
    }

    func unmount() {
        let umount = try? Process.run(URL(fileURLWithPath: "/bin/umount"), arguments: [mountPoint.path])
        umount?.waitUntilExit()
        try? FileManager.default.removeItem(at: mountPoint)
    }
}
