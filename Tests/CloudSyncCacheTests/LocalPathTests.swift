@testable import CloudSyncCache
import Foundation
import Testing
import TestSupport

@Suite struct LocalPathTests {
    static let table: [(String, String)] = [
        ("Artist/Album/01 Song.mp3", "Artist/Album/01 Song.mp3"),
        ("/leading/slash.mp3", "leading/slash.mp3"),
        ("a//b///c.flac", "a/b/c.flac"),
        ("a/./b.mp3", "a/b.mp3"),
        ("..", "__"),
        ("../../etc/passwd", "__/__/etc/passwd"),
        ("a/../../etc/x.mp3", "a/__/__/etc/x.mp3"),
        ("nul\u{0}byte.mp3", "nul_byte.mp3"),
        ("back\\slash.mp3", "back_slash.mp3"),
        ("tab\there\u{7F}\u{85}.ogg", "tab_here__.ogg"),
        ("", "_"),
        ("/", "_"),
        ("./.", "_"),
        ("...", "..."),
        (".hidden.mp3", ".hidden.mp3"),
        ("Café/Ünïcödé 日本.m4a", "Café/Ünïcödé 日本.m4a"),
    ]

    @Test(arguments: table) func sanitizes(_ input: String, _ expected: String) {
        #expect(LocalPath.safeRelativePath(for: input) == expected)
    }

    @Test(arguments: table.map(\.0)) func outputIsAlwaysSafe(_ input: String) {
        let output = LocalPath.safeRelativePath(for: input)
        for component in output.split(separator: "/", omittingEmptySubsequences: false) {
            #expect(!component.isEmpty && component != "." && component != "..")
            #expect(component.utf8.count <= 255)
            #expect(!component.unicodeScalars.contains { $0.value < 0x20 || $0 == "\\" })
        }
        #expect(!output.hasPrefix("/"))
    }

    @Test func longComponentsAreCutOnACharacterBoundaryWithAStableHash() {
        let long = String(repeating: "é", count: 200) + ".flac"  // 405 bytes
        let output = LocalPath.safeRelativePath(for: "dir/" + long)
        let name = String(output.split(separator: "/").last ?? "")
        #expect(name.utf8.count <= 255)
        #expect(name.hasSuffix(".flac"))
        #expect(name.contains("~"))
        #expect(name.hasPrefix(String(repeating: "é", count: 100)))  // cut between characters, not inside "é"
        #expect(LocalPath.safeRelativePath(for: "dir/" + long) == output)
        let other = String(repeating: "é", count: 201) + ".flac"
        #expect(LocalPath.safeRelativePath(for: "dir/" + other) != output)
        let ascii = String(repeating: "x", count: 300)
        #expect(LocalPath.safeComponent(ascii).utf8.count == 255)
    }

    /// The byte scan that lets most paths through unchanged, case by case: each is what the rewrite gives back
    /// unchanged (true) or not (false).
    static let safeAsItIs: [(String, Bool)] = [
        ("Artist/Album/01 Song.mp3", true), ("...", true), (".hidden.mp3", true), ("a/.../b", true),
        ("Caf\u{E9} Tacvba/Re \u{DC}n\u{EF}c\u{F6}d\u{E9} \u{65E5}.m4a", true), ("a/.\u{301}", true),
        ("Caf\u{E9}/b", false), ("a/.\u{301}/b", false),  // non-ASCII before `/`: left to the rewrite
        ("", false), ("/", false), ("/a", false), ("a/", false), ("a//b", false), ("./a", false), ("a/.", false),
        ("a/../b", false), ("..", false), ("nul\u{0}", false), ("tab\tx", false), ("del\u{7F}", false),
        ("c1\u{85}", false), ("c1\u{9F}", false), ("back\\slash", false),
        (String(repeating: "x", count: 255), true), (String(repeating: "x", count: 256), false),
        ("a/\u{301}b", false),  // a combining mark after `/`: one Character with it, so no separator for the rewrite
        ("\u{65E5}/b", false),  // a `/` after a non-ASCII byte is left to the rewrite (it may be a prepended mark)
    ]

    @Test(arguments: safeAsItIs) func theByteScanAgreesWithTheRewrite(_ input: String, _ safe: Bool) {
        #expect(LocalPath.isSafeAsItIs(input) == safe)
        if safe { #expect(LocalPath.rewrittenRelativePath(for: input) == input) }
        #expect(LocalPath.safeRelativePath(for: input) == LocalPath.rewrittenRelativePath(for: input))
    }

    /// Names FAT, exFAT and NTFS refuse become full-width look-alikes with `.portable` rules; `.posix` keeps them.
    static let portable: [(String, String)] = [
        ("Loose/It's \"Quoted\".wav", "Loose/It's \u{FF02}Quoted\u{FF02}.wav"),
        ("a:b/what?.mp3", "a\u{FF1A}b/what\u{FF1F}.mp3"),
        ("<x>|*.flac", "\u{FF1C}x\u{FF1E}\u{FF5C}\u{FF0A}.flac"),
        ("Vol. 1./song.mp3", "Vol. 1\u{FF0E}/song.mp3"),
        ("Album /song.mp3", "Album\u{2420}/song.mp3"),
        ("trailing dot..wav", "trailing dot..wav"),
        ("Björk/Jóga.mp3", "Björk/Jóga.mp3"),
        ("a/.../b", "a/..\u{FF0E}/b"),
        ("back\\slash:x", "back_slash\u{FF1A}x"),
    ]

    @Test(arguments: portable) func portableRulesReplaceWhatFATRefuses(_ input: String, _ expected: String) {
        #expect(LocalPath.safeRelativePath(for: input, rules: .portable) == expected)
        #expect(LocalPath.isSafeAsItIs(input, rules: .portable) == (input == expected))
        if !input.contains("\\") && !input.contains("...") {
            #expect(LocalPath.safeRelativePath(for: input, rules: .posix) == input, "posix keeps it")
        }
    }

    /// A long name of refused characters grows threefold in UTF-8 and is still cut to 255 bytes.
    @Test func portableNamesStayWithinTheComponentLimit() {
        let name = String(repeating: "?", count: 200) + ".mp3"
        let safe = LocalPath.safeComponent(name, rules: .portable)
        #expect(safe.utf8.count <= 255 && safe.hasSuffix(".mp3") && !safe.contains("?"))
    }

    /// Seeded property: for random paths over an alphabet of separators, dots, controls, C1 characters,
    /// combining and prepended marks and long runs, the fast path never changes the answer.
    @Test func theFastPathNeverChangesTheAnswer() {
        let alphabet: [String] = ["a", "B", "z", " ", "-", ".", ".", "/", "/", "/", "\\", ":", "?", "\"", "|", "\u{0}", "\u{1F}", "\u{7F}",
                                  "\u{80}", "\u{9F}", "\u{A0}", "\u{E9}", "\u{65E5}", "\u{301}", "\u{600}", "\u{200D}",
                                  "\r\n", String(repeating: "x", count: 120)]
        var random = SeededRandom(seed: 0x10CA_1BA7)
        var fast = 0
        for iteration in 0 ..< 20_000 {
            let path = (0 ..< Int.random(in: 0 ... 12, using: &random)).map { _ in alphabet.randomElement(using: &random)! }.joined()
            let rules: LocalPath.NameRules = iteration % 2 == 0 ? .posix : .portable
            let rewritten = LocalPath.rewrittenRelativePath(for: path, rules: rules)
            if LocalPath.isSafeAsItIs(path, rules: rules) {
                fast += 1
                #expect(rewritten == path, "\(rules): \(Array(path.unicodeScalars))")
            }
            #expect(LocalPath.safeRelativePath(for: path, rules: rules) == rewritten)
            if rules == .portable {
                // Nothing FAT refuses is left: no reserved character, no component ending in a dot or a space.
                #expect(!rewritten.utf8.contains(where: LocalPath.portableRefuses), "\(Array(path.unicodeScalars))")
                #expect(!rewritten.split(separator: "/").contains { $0.hasSuffix(".") || $0.hasSuffix(" ") },
                        "\(Array(path.unicodeScalars)) → \(Array(rewritten.unicodeScalars))")
            }
            // ASCII keys fold by bytes; the result is what lowercasing gives.
            if path.utf8.allSatisfy({ $0 < 0x80 }) { #expect(LocalPath.collisionKey(path) == path.lowercased()) }
        }
        #expect(fast > 1_000, "the property never reached the fast path")
    }

    @Test func collisionKeysFoldCaseAndNormalization() {
        let nfc = "Caf\u{E9}.mp3"
        let nfd = "Cafe\u{301}.mp3"
        #expect(Array(nfc.unicodeScalars) != Array(nfd.unicodeScalars))
        #expect(LocalPath.collisionKey(nfc) == LocalPath.collisionKey(nfd))
        #expect(LocalPath.collisionKey("ABC.mp3") == LocalPath.collisionKey("abc.mp3"))
        #expect(LocalPath.collisionKey("abc.mp3") != LocalPath.collisionKey("abd.mp3"))
    }

    @Test func disambiguationKeepsTheExtensionAndIsStable() {
        let a = LocalPath.disambiguated("r/Album/abc.mp3", salt: "r\u{0}Album/ABC.mp3")
        #expect(a.hasPrefix("r/Album/abc~"))
        #expect(a.hasSuffix(".mp3"))
        #expect(a == LocalPath.disambiguated("r/Album/abc.mp3", salt: "r\u{0}Album/ABC.mp3"))
        #expect(a != LocalPath.disambiguated("r/Album/abc.mp3", salt: "r\u{0}album/abc.mp3"))
        #expect(LocalPath.shortHash("x").count == 8)
    }
}
