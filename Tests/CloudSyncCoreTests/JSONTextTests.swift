import CloudSyncCore
import Foundation
import Testing

@Suite struct JSONTextTests {
    /// Hostile names survive the hand-written JSON: a real parser reads back exactly the same string.
    @Test(arguments: [
        "plain.mp3", "quote \" and backslash \\ .flac", "tab\there", "new\nline", "bell\u{07}", "nul\u{0}byte",
        "Кино/東京 🎵.opus", "slash/and\u{1F}unit", "del\u{7F}", "",
    ])
    func stringsRoundTrip(_ text: String) throws {
        let literal = JSONText.string(text)
        let parsed = try JSONSerialization.jsonObject(with: Data("[\(literal)]".utf8)) as? [String]
        #expect(parsed == [text])
        #expect(!literal.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "control characters and DEL must be escaped")
    }

    /// Numbers read back as the same Double; what JSON cannot say is null.
    @Test(arguments: [0.0, 40.5, 40, 1e-9, 6.347755102040816, 1e300, -2.5, Double.leastNonzeroMagnitude])
    func numbersRoundTrip(_ value: Double) throws {
        let parsed = try JSONSerialization.jsonObject(with: Data("[\(JSONText.number(value))]".utf8)) as? [Double]
        #expect(parsed == [value])
    }

    @Test func nonFiniteNumbersAreNull() {
        #expect(JSONText.number(.infinity) == "null")
        #expect(JSONText.number(-.infinity) == "null")
        #expect(JSONText.number(.nan) == "null")
    }
}
