@testable import CloudSyncCommands
import Foundation
import Testing

@Suite struct JSONOutputTests {
    /// Hostile names survive the hand-written JSON: a real parser reads back exactly the same string.
    @Test(arguments: [
        "plain.mp3", "quote \" and backslash \\ .flac", "tab\there", "new\nline", "bell\u{07}", "nul\u{0}byte",
        "Кино/東京 🎵.opus", "slash/and\u{1F}unit", "",
    ])
    func jsonStringRoundTrips(_ text: String) throws {
        let literal = jsonString(text)
        let parsed = try JSONSerialization.jsonObject(with: Data("[\(literal)]".utf8)) as? [String]
        #expect(parsed == [text])
        #expect(!literal.unicodeScalars.contains { $0.value < 0x20 }, "control characters must be escaped")
    }
}
