import CloudSyncConfig
import CloudSyncCore
import Testing

private func value(_ text: String, _ path: String...) throws -> TOMLNode? {
    var table = try TOMLParser.parse(text, file: "p.toml")
    for key in path.dropLast() {
        guard case .table(let inner)? = table[key]?.value else { return nil }
        table = inner
    }
    return path.last.flatMap { table[$0] }
}

@Suite("TOML parser")
struct TOMLParserTests {
    static let positions: [(String, [String], Int, Int)] = [
        ("a = 1", ["a"], 1, 5),
        ("[t]\n  b = \"x\"", ["t", "b"], 2, 7),
        ("[t]\n  b = \"x\"", ["t"], 1, 1),
        ("\"éé\" = 7", ["éé"], 1, 8),
        ("# ünïcödé\nx = 'ü'\ny = 2", ["y"], 3, 5),
        ("s = \"\"\"\nline\n\"\"\"\nz = true", ["z"], 4, 5),
        ("a.b.c = 1\n", ["a", "b", "c"], 1, 9),
        ("a = [\n  1,\n  2,\n]\nb = 3", ["b"], 5, 5),
        ("x = { y = 1 }\r\nw = 2", ["w"], 2, 5),
    ]

    @Test("every value keeps its line and column (columns count Unicode scalars)", arguments: positions)
    func positionsAreKept(text: String, path: [String], line: Int, column: Int) throws {
        var table = try TOMLParser.parse(text, file: "p.toml")
        for key in path.dropLast() {
            guard case .table(let inner)? = table[key]?.value else {
                Issue.record("no table \(key)")
                return
            }
            table = inner
        }
        let node = try #require(path.last.flatMap { table[$0] })
        #expect(node.position == TOMLPosition(line: line, column: column))
    }

    @Test("array elements and arrays of tables have positions; keys keep theirs")
    func nestedPositions() throws {
        let table = try TOMLParser.parse("z = [1, \"ü\", 3]\n[[t]]\nk = 1\n[[t]]\n  k = 2", file: "p.toml")
        guard case .array(let items)? = table["z"]?.value else {
            Issue.record("z is not an array")
            return
        }
        #expect(items.map(\.position.column) == [6, 9, 14])
        guard case .array(let tables)? = table["t"]?.value else {
            Issue.record("t is not an array")
            return
        }
        #expect(tables.map(\.position) == [TOMLPosition(line: 2, column: 1), TOMLPosition(line: 4, column: 1)])
        guard case .table(let second) = tables[1].value else {
            Issue.record("t[1] is not a table")
            return
        }
        #expect(second.keyPosition("k") == TOMLPosition(line: 5, column: 3))
        #expect(table.keys == ["z", "t"])
    }

    static let typed: [(String, TOMLValue)] = [
        ("v = 0xDEAD_beef", .integer(0xDEAD_BEEF)),
        ("v = 0o755", .integer(0o755)),
        ("v = 0b1101", .integer(13)),
        ("v = -9223372036854775808", .integer(.min)),
        ("v = +1_000", .integer(1000)),
        ("v = 6.626e-34", .float(6.626e-34)),
        ("v = -inf", .float(-.infinity)),
        ("v = 1E+1_0", .float(1e10)),
        ("v = \"\\u00e9\\U0001F3B5\\t\"", .string("é🎵\t")),
        ("v = '''\nC:\\x\\'''", .string("C:\\x\\")),
        ("v = \"\"\"\na \\\n   b\"\"\"", .string("a b")),
        ("v = \"\"\"\"\"quoted\"\"\"\"\"", .string("\"\"quoted\"\"")),
        ("v = 1979-05-27T07:32:00.123456789999-08:00",
         .offsetDateTime(TOMLDate(year: 1979, month: 5, day: 27), TOMLTime(hour: 7, minute: 32, second: 0, nanosecond: 123_456_789), offsetMinutes: -480)),
        ("v = 1979-05-27 07:32:00z",
         .offsetDateTime(TOMLDate(year: 1979, month: 5, day: 27), TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: 0)),
        ("v = 2000-02-29T23:59:60", .localDateTime(TOMLDate(year: 2000, month: 2, day: 29), TOMLTime(hour: 23, minute: 59, second: 60))),
        ("v = 2024-01-02", .localDate(TOMLDate(year: 2024, month: 1, day: 2))),
        ("v = 00:32:00.5", .localTime(TOMLTime(hour: 0, minute: 32, second: 0, nanosecond: 500_000_000))),
        ("v = false", .boolean(false)),
    ]

    @Test("values have the right type and value", arguments: typed)
    func typedValues(text: String, expected: TOMLValue) throws {
        #expect(try value(text, "v")?.value == expected)
    }

    static let errors: [(String, String)] = [
        ("a = 1\nb = \n", "p.toml:2:5: expected a value (string, number, boolean, date-time, array or inline table), found end of line"),
        ("[pull]\njobs 4", "p.toml:2:6: expected '=' after key \"jobs\", found '4'"),
        ("[a]\nx = 1\n[a]", "p.toml:3:1: table [a] is defined twice; it was first defined at line 1"),
        ("a = 1\na = 2", "p.toml:2:1: key a is defined twice; it was first defined at line 1 as an integer value"),
        ("a = \"abc", "p.toml:1:9: unterminated string: expected '\"' before the end of file"),
        ("a = \"\\x\"", "p.toml:1:6: invalid escape sequence \\x; valid escapes are \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX"),
        ("a = \"\\uD800\"", "p.toml:1:6: escape \\uD800 is not a Unicode scalar value"),
        ("a = 1 2", "p.toml:1:7: expected end of line after the value of a, found '2'"),
        ("a = 1979-13-01", "p.toml:1:5: invalid date-time 1979-13-01; expected e.g. 1979-05-27, 07:32:00, 1979-05-27T07:32:00 or 1979-05-27T07:32:00Z with valid field values"),
        ("a = 9223372036854775808", "p.toml:1:5: integer out of the 64-bit range: 9223372036854775808"),
        ("a = 01", "p.toml:1:5: invalid number 01; expected an integer (42, 0x2A, 0o52, 0b101010, 1_000) or a float (3.14, 1e6, inf, nan)"),
        ("a = {b = 1,}", "p.toml:1:12: a trailing comma is not allowed in an inline table"),
        ("a = {x = 1}\n[a.b]", "p.toml:2:2: a is an inline table (line 1) and cannot be extended; write it as a [a] section instead"),
        ("[a]\nb.c = 1\n[a.b]", "p.toml:3:1: cannot define table [a.b]: a.b is already a table defined by dotted keys (line 2)"),
        ("a = [1 2]", "p.toml:1:8: expected ',' or ']' after an array element, found '2'"),
        ("x = \"a\u{01}\"", "p.toml:1:7: control character U+0001 must be escaped in a string"),
        ("# comment \u{7F}", "p.toml:1:11: control character U+007F is not allowed in a comment"),
        ("a = TRUE", "p.toml:1:5: expected a value (string, number, boolean, date-time, array or inline table), found 'T'"),
        ("[a\nb = 1", "p.toml:1:3: expected ']' to close the table header [a], found end of line"),
        ("a = 1\r", "p.toml:1:6: a carriage return must be followed by a line feed"),
    ]

    @Test("syntax errors say what was expected, at file:line:column", arguments: errors)
    func syntaxErrors(text: String, expected: String) {
        do {
            let table = try TOMLParser.parse(text, file: "p.toml")
            Issue.record("accepted: \(table)")
        } catch {
            #expect(error.description == expected)
        }
    }

    @Test("invalid UTF-8 is reported at the offending byte")
    func invalidUTF8() {
        #expect(throws: ConfigError(file: "p.toml", line: 2, column: 6, message: "the file is not valid UTF-8 here; save it as UTF-8 text")) {
            try TOMLParser.parse(bytes: Array("a = 1\nb = \"".utf8) + [0xC3, 0x28, 0x22], file: "p.toml")
        }
        #expect(throws: Never.self) { try TOMLParser.parse(bytes: [0xEF, 0xBB, 0xBF] + Array("a = 1".utf8), file: "p.toml") }
    }
}

/// `config show` writes strings with `JSONText.string`: every such literal is a TOML basic string that the parser
/// reads back as the same text, control characters and DEL included.
@Suite struct TOMLQuotedStringTests {
    @Test(arguments: ["plain", "quote \" backslash \\", "tab\t nl\n cr\r", "nul\u{0} unit\u{1F} del\u{7F}",
                      "Кино/東京 🎵", "env:VAR", "", "trailing \\"])
    func jsonStringLiteralsAreTOMLBasicStrings(_ text: String) throws {
        #expect(try value("v = \(JSONText.string(text))", "v")?.value == .string(text))
    }
}
