import CloudSyncCore
import Foundation
import Testing

/// rclone's filter rules (https://rclone.org/filtering/), from its documentation's examples.
@Suite struct PathFilterTests {
    struct Example: Sendable, CustomTestStringConvertible {
        var pattern: String
        var matches: [String]
        var misses: [String]
        var testDescription: String { pattern }
    }

    /// rclone's "Filter pattern examples" table and the rules around it (paths relative to the remote's root).
    static let examples: [Example] = [
        Example(pattern: "*.jpg", matches: ["file.jpg", "dir/file.jpg"], misses: ["file.png", "dir/file.png"]),
        Example(pattern: "/*.jpg", matches: ["file.jpg", "file2.jpg"], misses: ["file.png", "dir/file.jpg"]),
        Example(pattern: "*.{jpg,png}", matches: ["file.jpg", "dir/file.png"], misses: ["file.gif", "dir/file.gif"]),
        Example(pattern: "dir/**", matches: ["dir/anyfile", "subdir/dir/subsubdir/anyfile"], misses: ["file.png", "subdir/file.png"]),
        Example(pattern: "*.t?t", matches: ["file.txt", "dir/file.tzt"], misses: ["file.qxt", "dir/file.png"]),
        Example(pattern: "*.[a-z]", matches: ["file.a", "dir/file.b"], misses: ["file.0", "dir/file.1"]),
        Example(pattern: #"*.\?\?\?"#, matches: ["file.???", "dir/file.???"], misses: ["file.abc", "dir/file.def"]),
        Example(pattern: #"*.\d\d\d"#, matches: ["file.012", "dir/file.345"], misses: ["file.abc", "dir/file.def"]),
        Example(pattern: "file.jpg", matches: ["file.jpg", "directory/file.jpg"], misses: ["afile.jpg", "directory/afile.jpg"]),
        Example(pattern: "/file.jpg", matches: ["file.jpg"], misses: ["afile.jpg", "directory/file.jpg"]),
        Example(pattern: "{A,B}/**", matches: ["A/x.mp3", "B/y/z.mp3"], misses: ["C/x.mp3", "AB/x.mp3"]),
        Example(pattern: "??[^[:punct:]]*", matches: ["abc.mp3", "ab9"], misses: ["ab.mp3", "ab!x"]),
        Example(pattern: #"*\[{JP,KR,HK}\]*"#, matches: ["song [JP].mp3", "x/[HK]"], misses: ["song [US].mp3", "JP.mp3"]),
        Example(pattern: "Live/*", matches: ["Live/a.flac", "Artist/Live/a.flac"], misses: ["Live/Disc 1/a.flac", "Alive/a.flac"]),
        Example(pattern: "{a,{b,c}d}.mp3", matches: ["a.mp3", "bd.mp3", "x/cd.mp3"], misses: ["b.mp3", "ad.mp3"]),
        Example(pattern: "Кино/**", matches: ["Кино/Группа крови/01.mp3"], misses: ["кино/01.mp3"]),
    ]

    @Test(arguments: examples)
    func patternsMatchAsRcloneDocuments(_ e: Example) throws {
        let filter = try PathFilter(include: [e.pattern])
        for path in e.matches { #expect(filter.includes(path), "\(e.pattern) should match \(path)") }
        for path in e.misses { #expect(!filter.includes(path), "\(e.pattern) should not match \(path)") }
    }

    /// rclone's `--filter-from` example: the first matching rule decides, top to bottom.
    @Test func firstMatchWins() throws {
        let lines = ["# a sample filter rule file", "- secret*.jpg", "+ *.jpg", "+ *.png", "+ file2.avi", "- /dir/Trash/**",
                     "+ /dir/**", "# exclude everything else", "- *"]
        let filter = try PathFilter(filterLines: lines.enumerated().map { ("f.txt", $0.offset + 1, $0.element) })
        for path in ["file1.jpg", "x/file3.png", "file2.avi", "dir/anything.doc", "dir/sub/x.doc"] { #expect(filter.includes(path), "\(path)") }
        for path in ["secret17.jpg", "notes.doc", "dir/Trash/a.jpg".replacingOccurrences(of: ".jpg", with: ".doc")] {
            #expect(!filter.includes(path), "\(path)")
        }
        // `!` clears what came before.
        let cleared = try PathFilter(filterLines: ["+ *.jpg", "+ *.gif", "!", "+ 42.doc", "- *"].enumerated().map { ("f", $0.offset + 1, $0.element) })
        #expect(cleared.includes("42.doc"))
        #expect(!cleared.includes("a.jpg"))
    }

    /// Directory rules: `- /dir1/` excludes everything under the folder; `+ /directory/` matches no file (in rclone it
    /// only steers traversal), so `--include /directory/` lists nothing.
    @Test func directoryRules() throws {
        let filter = try PathFilter(filterLines: ["- /dir1/", "- /dir2/", "+ *.pdf", "- **"].enumerated().map { ("f", $0.offset + 1, $0.element) })
        #expect(filter.includes("a.pdf") && filter.includes("dir3/b.pdf"))
        #expect(!filter.includes("dir1/a.pdf") && !filter.includes("dir2/x/a.pdf") && !filter.includes("c.txt"))
        let includeDirectory = try PathFilter(include: ["/directory/"])
        #expect(!includeDirectory.includes("directory/a.mp3"))
    }

    /// Includes come before excludes (rclone orders flags by kind), and an include adds a final `- **`.
    @Test func includesImplyExcludingTheRest() throws {
        let filter = try PathFilter(include: ["*.flac"], exclude: ["Bootlegs/**"])
        #expect(filter.includes("Bootlegs/x.flac"), "the include comes first")
        #expect(!filter.includes("a.mp3"), "the implied - ** excludes what no include matched")
        let onlyExclude = try PathFilter(exclude: ["*.wav"])
        #expect(onlyExclude.includes("a.mp3") && !onlyExclude.includes("b/c.wav"))
    }

    @Test func ignoreCase() throws {
        #expect(!(try PathFilter(include: ["zaphod.mp3"]).includes("Zaphod.mp3")))
        #expect(try PathFilter(include: ["zaphod.mp3"], ignoreCase: true).includes("Zaphod.MP3"))
    }

    @Test func sizeAndAge() throws {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let filter = PathFilter(minSize: 100, maxSize: 1000, maxAge: 86_400 * 30, minAge: 60)
        #expect(filter.includes("a.mp3", size: 500, modified: now.addingTimeInterval(-3600), now: now))
        #expect(!filter.includes("a.mp3", size: 50, modified: now.addingTimeInterval(-3600), now: now))
        #expect(!filter.includes("a.mp3", size: 5000, modified: now.addingTimeInterval(-3600), now: now))
        #expect(!filter.includes("a.mp3", size: 500, modified: now.addingTimeInterval(-86_400 * 31), now: now))
        #expect(!filter.includes("a.mp3", size: 500, modified: now.addingTimeInterval(-10), now: now))
    }

    @Test(arguments: ["", "{a,b", "a}", "[abc", "[z-a]", "a\\", "{{.*}}", "[[:nope:]]"])
    func badPatternsAreErrorsNamingThePattern(_ pattern: String) {
        do {
            _ = try PathFilter(include: [pattern])
            Issue.record("\(pattern) compiled")
        } catch {
            #expect(error.message.contains("--include"))
        }
    }

    @Test func badFilterLinesNameTheirLine() {
        do {
            _ = try PathFilter(filterLines: [("rules.txt", 3, "*.mp3")])
            Issue.record("compiled")
        } catch {
            #expect(error.message.hasPrefix("rules.txt:3:"))
        }
    }

    /// A pathological pattern against a long path stays linear (no exponential backtracking).
    @Test func pathologicalPatternsStayFast() throws {
        let filter = try PathFilter(include: [String(repeating: "*a", count: 30) + "b"])
        let path = String(repeating: "a", count: 2000)
        let clock = ContinuousClock()
        let elapsed = clock.measure { _ = filter.includes(path) }
        #expect(!filter.includes(path))
        print("pathological pattern over 2,000 characters: \(elapsed)")
        #expect(throws: PathFilterError.self) { try PathFilter(include: [String(repeating: "{a,b}", count: 11)]) }
    }
}
