import Foundation
import TestSupport
import Testing

/// Long runs without a terminal (#25): `-q --log-file` keeps a record while stderr (cron's mail) stays empty,
/// and `--stats` adds a one-line summary per period; the file is 0600 and each run appends to it.
@Suite struct LogFileTests {
    @Test func quietPullKeepsItsRecordInTheLogFile() throws {
        let fixture = try Fixture(seed: 2525, files: [("Album/a.mp3", 1_500_000), ("Album/b.mp3", 200_000)])
        defer { fixture.cleanup() }
        let log = fixture.env.dir.appendingPathComponent("cloudsync.log")
        // 512 KiB/s over 1.7 MB: the run lasts about 3 s, so a 1 s period prints at least one line.
        let r = try fixture.env.run(["-q", "pull", "--bwlimit", "512KiB/s", "--stats", "1s", "--log-file", log.path])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        #expect(r.stdout.isEmpty && r.stderr.isEmpty, "-q prints nothing on success: \(r.stdout) \(r.stderr)")
        let text = try String(contentsOf: log, encoding: .utf8)
        let lines = text.split(separator: "\n")
        #expect(lines.contains { $0.contains("fetched") && $0.contains("Album/a.mp3") }, "\(text)")
        #expect(lines.contains { $0.contains("stats: ") && $0.contains("MiB") || $0.contains("stats: ") && $0.contains("KiB") }, "\(text)")
        #expect(lines.contains { $0.contains("lib: 2 listed") }, "\(text)")
        // Every line starts with the local time and its zone: 2026-12-02T05:28:10+00:00.
        let stamp = try Regex(#"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d "#)
        #expect(lines.allSatisfy { $0.firstMatch(of: stamp) != nil }, "\(text)")
        #expect(!text.contains("\u{1B}"), "no terminal codes in the file")
        let mode = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // A second run appends; --log-level debug records the API exchanges that stderr (-q) does not show.
        let again = try fixture.env.run(["-q", "pull", "--log-file", log.path, "--log-level", "debug"])
        #expect(again.status == 0 && again.stderr.isEmpty, "stderr: \(again.stderr)")
        let after = try String(contentsOf: log, encoding: .utf8)
        #expect(after.hasPrefix(text))
        #expect(after.dropFirst(text.count).contains("debug: PROPFIND"), "\(after.dropFirst(text.count))")

        let missing = try fixture.env.run(["pull", "--log-file", "/nonexistent-dir/x.log"])
        #expect(missing.status == 74 && missing.stderr.contains("/nonexistent-dir/x.log"), "\(missing.stderr)")
        let alone = try fixture.env.run(["pull", "--log-level", "debug"])
        #expect(alone.status == 2, "\(alone.stderr)")
        let badStats = try fixture.env.run(["pull", "--stats", "soon"])
        #expect(badStats.status == 2 && badStats.stderr.contains("--stats"), "\(badStats.stderr)")
    }
}
