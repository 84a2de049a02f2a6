@testable import CloudSyncCommands
import CloudSyncEngine
import Foundation
import Testing

/// Names from the cloud in human output (#19.8) and the progress frame at several widths (#20.3).
@Suite struct TerminalOutputTests {
    @Test(arguments: [
        ("plain name.mp3", "plain name.mp3"),
        ("\u{1B}]0;owned\u{07}title.mp3", "\\x1b]0;owned\\x07title.mp3"),
        ("\u{1B}[31mred\u{1B}[0m.flac", "\\x1b[31mred\\x1b[0m.flac"),
        ("a\rfetched  fake.mp3", "a\\rfetched  fake.mp3"),
        ("two\nlines", "two\\nlines"),
        ("tab\there", "tab\\there"),
        ("del\u{7F}c1\u{9B}", "del\\x7fc1\\x9b"),
        ("rtl\u{202E}3pm.exe", "rtl\\u{202e}3pm.exe"),
        ("Кино/東京 🎵.opus", "Кино/東京 🎵.opus"),
        ("back\\slash", "back\\slash"),
    ])
    func controlCharactersAreShownNotObeyed(name: String, shown: String) {
        let escaped = TerminalText.escape(name)
        #expect(escaped == shown)
        #expect(!escaped.unicodeScalars.contains { $0.value < 0x20 || (0x7F ... 0x9F).contains($0.value) })
    }

    @Test(arguments: [
        ("short", 10, "short"),
        ("0123456789abcdef", 9, "0123…cdef"),
        ("Artist/Album/Track.flac", 12, "Artist….flac"),
        ("東京東京東京", 7, "東…東京"),
        ("abc", 2, "a…"),
    ])
    func namesAreShortenedInTheMiddle(text: String, width: Int, expected: String) {
        let short = DisplayWidth.shorten(text, to: width)
        #expect(short == expected)
        #expect(DisplayWidth.of(short) <= width)
    }

    static let frame = ProgressFrame(
        finished: 3, total: 12, doneBytes: 40 << 20, totalBytes: 512 << 20, speed: Double(2 << 20),
        files: [
            .init(name: "Classical/Deutsche Grammophon Complete Edition Vol. 1/CD 07/14 Symphony No. 9 in D minor, Op. 125 Choral - IV. Presto.flac",
                  size: 80 << 20, done: 20 << 20),
            .init(name: "Jazz/Miles/So What.mp3", size: 8 << 20, done: 8 << 20),
            .init(name: "bad\u{1B}[2Jname.mp3", size: 1 << 20, done: 0),
        ])

    /// Each line fits the terminal (never its last column), names are cut in the middle, control characters
    /// shown; compared with Snapshots/progress-WIDTH.txt (UPDATE_SNAPSHOTS=1 to accept a deliberate change).
    @Test(arguments: [40, 80, 200])
    func progressFrameMatchesSnapshot(width: Int) throws {
        let lines = Self.frame.lines(width: width)
        for line in lines { #expect(DisplayWidth.of(line) <= width - 1, "too wide at \(width): \(line)") }
        #expect(!lines.joined().unicodeScalars.contains { $0.value == 0x1B })
        let text = lines.joined(separator: "\n") + "\n"
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Snapshots/progress-\(width).txt")
        if ProcessInfo.processInfo.environment["UPDATE_SNAPSHOTS"] == "1" {
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        #expect(text == (try String(contentsOf: url, encoding: .utf8)), "progress frame at \(width) columns changed")
    }

    @Test func countsUseSingularForms() {
        #expect(counted(1, "file") == "1 file")
        #expect(counted(0, "file") == "0 files")
        #expect(counted(2, "more track", "more tracks") == "2 more tracks")
    }
}

/// A pull opens twice `--jobs` files and lets `--jobs` transfer: `--stats` and the live frame count the files
/// whose bytes move, not those opened ahead and waiting for a transfer slot.
@Suite struct PullRendererTests {
    @Test func filesOpenedAheadAreNotRunningUntilTheirBytesMove() {
        let console = Console(environment: ["TERM": "dumb"], level: .error)
        let renderer = PullRenderer(console: console, quiet: true, dryRun: false)
        renderer.handle(.scheduled(remote: "lib", files: 3, headsOnly: 0, bytes: 3 << 20))
        for name in ["a.mp3", "b.mp3", "c.mp3"] {
            renderer.handle(.fileStarted(remote: "lib", path: name, size: 1 << 20, missing: 1 << 20))
        }
        #expect(renderer.statsLine().hasSuffix("0 running"), "\(renderer.statsLine())")
        renderer.handle(.progress(remote: "lib", path: "b.mp3", bytes: 256 << 10))
        #expect(renderer.statsLine().hasSuffix(", 1 running"), "\(renderer.statsLine())")
        renderer.handle(.fileFinished(remote: "lib", path: "b.mp3", result: .completed(fetched: 1 << 20, verifiedWith: nil)))
        renderer.handle(.progress(remote: "lib", path: "a.mp3", bytes: 1 << 20))
        renderer.handle(.progress(remote: "lib", path: "c.mp3", bytes: 1 << 20))
        #expect(renderer.statsLine().hasSuffix(", 2 running"), "\(renderer.statsLine())")
        #expect(renderer.statsLine().hasPrefix("stats: 1 of 3 files, 2.3 MiB of 3.0 MiB (75 %)"), "\(renderer.statsLine())")
    }
}

/// The line a pull prints when the library does not fit its budget.
@Suite struct BudgetLineTests {
    static func summary(none: Int, headOnly: Int, limitedByDisk: Bool) throws -> BudgetSummary {
        let json = """
            {"budget": 0, "planned_bytes": 0, "library_bytes": 84000000, "complete": 0, "head_only": \(headOnly), "none": \(none),
             "heads_bytes": 3000000, "heads": {"first": 65536, "seconds": 2, "tail": 65536}, "full_heads_bytes": 20000000,
             "reduced": 0, "freed_bytes": 0, "pinned_over_budget": false, "limited_by_disk": \(limitedByDisk)}
            """
        return try JSONDecoder().decode(BudgetSummary.self, from: Data(json.utf8))
    }

    /// Heads shortened to the last step and still not every track has one (a disk whose `min_free` leaves no room):
    /// the line does not claim the shortening kept one for every track, and names min_free. It did both before.
    @Test func shortenedHeadsThatStillDoNotFitAreNotSaidToFit() throws {
        let line = PullRenderer.budgetLine(try Self.summary(none: 32, headOnly: 0, limitedByDisk: true), after: false)
        #expect(!line.contains("so that every track keeps one"), "\(line)")
        #expect(line.contains("32 tracks without a head") && line.contains("heads shortened to") && line.contains("still not every track has one"), "\(line)")
        #expect(line.contains("free disk space (or lower cache.min_free)"), "\(line)")
        let fits = PullRenderer.budgetLine(try Self.summary(none: 0, headOnly: 32, limitedByDisk: false), after: false)
        #expect(fits.contains("so that every track keeps one") && fits.contains("raise cache.max_size"), "\(fits)")
    }
}
