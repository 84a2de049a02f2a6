@testable import CloudSyncAudio
import Testing

/// Tag text is trimmed of trailing NULs and spaces (byte by byte: both are single bytes in UTF-8) and cut to
/// `TrackInfo.maximumTextBytes` at a character boundary.
@Suite struct TextTests {
    @Test(arguments: [
        ("Title", "Title"), ("Title\u{0}\u{0}", "Title"), ("Title   ", "Title"), ("Ti tle \u{0} \u{0}", "Ti tle"),
        ("  lead", "  lead"), ("", nil), ("\u{0}", nil), ("   \u{0} ", nil), ("Пётр 東京 🎵 \u{0}", "Пётр 東京 🎵"),
        ("e\u{301} ", "e\u{301}"), ("\u{0}mid\u{0}dle", "\u{0}mid\u{0}dle"), ("tab\t", "tab\t"),
    ] as [(String, String?)])
    func clean(_ text: String, _ expected: String?) {
        #expect(Text.clean(text) == expected)
    }

    @Test func longTextIsCutAtACharacterBoundary() throws {
        let long = String(repeating: "é", count: TrackInfo.maximumTextBytes) + "  "  // 2 bytes each
        let cut = try #require(Text.clean(long))
        #expect(cut.utf8.count == TrackInfo.maximumTextBytes && cut.allSatisfy { $0 == "é" })
        let odd = "a" + String(repeating: "🎵", count: TrackInfo.maximumTextBytes / 4)  // 4 bytes each: one too many
        let cutOdd = try #require(Text.clean(odd))
        #expect(cutOdd.utf8.count == TrackInfo.maximumTextBytes - 3 && cutOdd.hasPrefix("a🎵"))
    }
}
