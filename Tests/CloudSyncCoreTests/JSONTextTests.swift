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

    /// An object keeps its members in the order added, leaves nil values out and reads back with a real parser.
    @Test func objectsKeepTheirMembers() throws {
        var object = JSONText.Object()
        #expect(JSONText.Object().text == "{}")
        object.add("title", "Кино \"live\"\n")
        object.add("missing", String?.none)
        object.add("track", 7)
        object.add("none", Int?.none)
        object.add("seconds", 40.5)
        object.add("infinite", Double.infinity)
        #expect(object.text == #"{"title":"Кино \"live\"\n","track":7,"seconds":40.5,"infinite":null}"#)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(object.text.utf8)) as? [String: Any])
        #expect(parsed["title"] as? String == "Кино \"live\"\n")
        #expect(parsed["track"] as? Int == 7 && parsed["seconds"] as? Double == 40.5 && parsed["infinite"] is NSNull)
        #expect(parsed.count == 4)
    }
}
