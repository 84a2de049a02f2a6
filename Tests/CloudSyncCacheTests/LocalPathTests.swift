import CloudSyncCache
import Foundation
import Testing

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
