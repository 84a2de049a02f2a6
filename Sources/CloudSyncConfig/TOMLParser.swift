/// A TOML 1.0 parser (https://toml.io/en/v1.0.0) that keeps the position of every key and value.
///
/// Contract: a document is either parsed completely into a `TOMLTable` or rejected with exactly one
/// `ConfigError` at the first problem found, with a message saying what was expected there. It never
/// traps, whatever the input. Defining a key or table twice, extending an inline table, and control
/// characters outside of what the spec allows are errors. Multi-line strings keep their newlines as
/// written (CRLF stays CRLF); date-time fractions beyond nanoseconds are truncated.
public enum TOMLParser {
    /// Arrays and inline tables nested deeper than this are rejected rather than risking the stack; so are
    /// keys and table headers with more parts, and a key whose header, inline tables and dotted parts
    /// together nest tables deeper (building and comparing the result recurses once per level).
    public static let maximumNesting = 128

    /// Parses `text`; `file` is used only to label errors.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> TOMLTable {
        var parser = TOMLSyntax(bytes: Array(text.utf8), file: file)
        return try parser.parseDocument()
    }

    /// Parses raw bytes, which must be UTF-8 (a leading byte-order mark is allowed); invalid UTF-8 is
    /// an error at the offending byte.
    public static func parse(bytes: [UInt8], file: String) throws(ConfigError) -> TOMLTable {
        if let bad = firstInvalidUTF8(bytes) {
            var line = 1
            var lineStart = 0
            for index in 0..<bad where bytes[index] == 0x0A {
                line += 1
                lineStart = index + 1
            }
            let column = 1 + bytes[lineStart..<bad].reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
            throw ConfigError(file: file, line: line, column: column,
                              message: "the file is not valid UTF-8 here; save it as UTF-8 text")
        }
        var parser = TOMLSyntax(bytes: bytes, file: file)
        return try parser.parseDocument()
    }

    /// Index of the first byte that is not part of a well-formed UTF-8 sequence, or nil.
    static func firstInvalidUTF8(_ b: [UInt8]) -> Int? {
        var i = 0
        while i < b.count {
            let c = b[i]
            if c < 0x80 {
                i += 1
                continue
            }
            let length: Int
            let minimum: UInt32
            var scalar: UInt32
            switch c {
            case 0xC2...0xDF: length = 2; minimum = 0x80; scalar = UInt32(c & 0x1F)
            case 0xE0...0xEF: length = 3; minimum = 0x800; scalar = UInt32(c & 0x0F)
            case 0xF0...0xF4: length = 4; minimum = 0x10000; scalar = UInt32(c & 0x07)
            default: return i
            }
            guard i + length <= b.count else { return i }
            for k in 1..<length {
                let cont = b[i + k]
                guard cont & 0xC0 == 0x80 else { return i }
                scalar = scalar << 6 | UInt32(cont & 0x3F)
            }
            if scalar < minimum || scalar > 0x10FFFF || (0xD800...0xDFFF).contains(scalar) { return i }
            i += length
        }
        return nil
    }
}

/// A table while it is being built, with how it came to exist (which decides what may extend it).
private final class TableBuilder {
    enum Kind {
        /// Created as an intermediate of a `[a.b.c]` header; may later be defined once by its own header.
        case implicit
        /// Defined by a `[header]` or `[[header]]` (or the root).
        case header
        /// Created by a dotted key; only further dotted keys in the same section and sub-table headers may extend it.
        case dotted
        /// An inline table: closed once written.
        case inline
    }

    var kind: Kind
    var position: TOMLPosition
    var keys: [String] = []
    var children: [String: Child] = [:]
    var keyPositions: [String: TOMLPosition] = [:]

    init(kind: Kind, position: TOMLPosition) {
        self.kind = kind
        self.position = position
    }

    func insert(_ key: String, _ child: Child, at keyPosition: TOMLPosition) {
        if children[key] == nil { keys.append(key) }
        children[key] = child
        keyPositions[key] = keyPosition
    }

    func build() -> TOMLTable {
        var table = TOMLTable(position: position)
        for key in keys {
            guard let child = children[key], let keyPosition = keyPositions[key] else { continue }
            table.set(key, child.node(), keyPosition: keyPosition)
        }
        return table
    }
}

private final class TableArrayBuilder {
    var elements: [TableBuilder]
    let position: TOMLPosition

    init(_ first: TableBuilder, position: TOMLPosition) {
        elements = [first]
        self.position = position
    }
}

private enum Child {
    case value(TOMLNode)
    case table(TableBuilder)
    /// A class, so that appending an element costs O(1) however many `[[header]]`s came before.
    case tableArray(TableArrayBuilder)

    func node() -> TOMLNode {
        switch self {
        case .value(let node): node
        case .table(let builder): TOMLNode(.table(builder.build()), at: builder.position)
        case .tableArray(let array):
            TOMLNode(.array(array.elements.map { TOMLNode(.table($0.build()), at: $0.position) }), at: array.position)
        }
    }

    var description: String {
        switch self {
        case .value(let node):
            (node.value.typeName.first.map { "aeiou".contains($0) } == true ? "an " : "a ") + "\(node.value.typeName) value"
        case .table(let builder):
            switch builder.kind {
            case .inline: "an inline table"
            case .dotted: "a table defined by dotted keys"
            case .implicit, .header: "a table"
            }
        case .tableArray: "an array of tables"
        }
    }

    var position: TOMLPosition {
        switch self {
        case .value(let node): node.position
        case .table(let builder): builder.position
        case .tableArray(let array): array.position
        }
    }
}

private typealias KeySegment = (name: String, position: TOMLPosition)

private func joined(_ path: some Collection<KeySegment>) -> String {
    path.map { segment in
        let bare = !segment.name.isEmpty && segment.name.utf8.allSatisfy(isBareKeyByte)
        return bare ? segment.name : "\"" + segment.name + "\""
    }.joined(separator: ".")
}

private func isBareKeyByte(_ c: UInt8) -> Bool {
    (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x5F || c == 0x2D
}

private func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

/// Where `TOMLSyntax.position` last counted to; a class so that non-mutating code may update it.
private final class ColumnCache {
    var lineStart = -1
    var index = 0
    var column = 1
}

/// The byte-level parser state; one per document.
private struct TOMLSyntax {
    let bytes: [UInt8]
    let file: String
    var index = 0
    var line = 1
    var lineStart = 0
    var depth = 0
    /// Parts of the current `[header]`, counted towards the nesting limit of the keys below it.
    var headerDepth = 0
    /// Parts of the keys whose values (inline tables) are being parsed, counted towards the same limit.
    var keyDepth = 0
    /// The last computed column, so that `position` costs what the cursor moved since, not the whole line.
    let columns = ColumnCache()

    init(bytes: [UInt8], file: String) {
        self.bytes = bytes
        self.file = file
    }

    // MARK: Cursor

    var atEnd: Bool { index >= bytes.count }
    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    func peek(_ offset: Int) -> UInt8? {
        index + offset < bytes.count ? bytes[index + offset] : nil
    }

    mutating func bump() {
        if bytes[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        index += 1
    }

    /// The cursor's line and column. Amortized constant time: the column is counted on from the last
    /// position asked for on the same line (the cursor only moves back by a byte or two, before an error).
    var position: TOMLPosition {
        var column = 1
        var k = lineStart
        if columns.lineStart == lineStart && columns.index <= index {
            column = columns.column
            k = columns.index
        }
        while k < index && k < bytes.count {
            if bytes[k] & 0xC0 != 0x80 { column += 1 }
            k += 1
        }
        columns.lineStart = lineStart
        columns.index = k
        columns.column = column
        return TOMLPosition(line: line, column: column)
    }

    func error(_ message: String, at position: TOMLPosition? = nil) -> ConfigError {
        ConfigError(file: file, position: position ?? self.position, message: message)
    }

    /// A printable description of the character at the cursor, for "found …" in messages.
    var found: String {
        guard let c = peek else { return "end of file" }
        switch c {
        case 0x0A: return "end of line"
        case 0x0D: return peek(1) == 0x0A ? "end of line" : "a carriage return"
        case 0x09: return "a tab"
        case 0x20: return "a space"
        case 0x00..<0x20, 0x7F: return "control character U+" + hex4(UInt32(c))
        case 0x80...:
            var end = index + 1
            while end < bytes.count && bytes[end] & 0xC0 == 0x80 { end += 1 }
            return "'" + String(decoding: bytes[index..<end], as: UTF8.self) + "'"
        default: return "'" + String(UnicodeScalar(c)) + "'"
        }
    }

    func hex4(_ value: UInt32) -> String {
        let s = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    mutating func skipSpaces() {
        while let c = peek, c == 0x20 || c == 0x09 { index += 1 }
    }

    /// Skips a comment starting at `#`, up to (not including) the end of line.
    mutating func skipComment() throws(ConfigError) {
        index += 1
        while let c = peek {
            if c == 0x0A { return }
            if c == 0x0D && peek(1) == 0x0A { return }
            if (c < 0x20 && c != 0x09) || c == 0x7F {
                throw error("control character U+\(hex4(UInt32(c))) is not allowed in a comment")
            }
            index += 1
        }
    }

    /// Consumes one newline (LF or CRLF) if there is one.
    mutating func skipNewline() throws(ConfigError) -> Bool {
        if peek == 0x0A {
            bump()
            return true
        }
        if peek == 0x0D {
            guard peek(1) == 0x0A else { throw error("a carriage return must be followed by a line feed") }
            index += 1
            bump()
            return true
        }
        return false
    }

    /// Skips spaces, tabs, newlines and comments (inside arrays).
    mutating func skipBlank() throws(ConfigError) {
        while true {
            skipSpaces()
            if peek == 0x23 {
                try skipComment()
            } else if try !skipNewline() {
                return
            }
        }
    }

    /// After a key/value pair or a header: optional spaces and comment, then a newline or the end.
    mutating func expectLineEnd(after what: String) throws(ConfigError) {
        skipSpaces()
        if peek == 0x23 { try skipComment() }
        if atEnd { return }
        if try !skipNewline() {
            throw error("expected end of line after \(what), found \(found)")
        }
    }

    // MARK: Document

    mutating func parseDocument() throws(ConfigError) -> TOMLTable {
        let root = TableBuilder(kind: .header, position: TOMLPosition(line: 1, column: 1))
        var current = root
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3; lineStart = 3 }
        while true {
            try skipBlank()
            guard let c = peek else { break }
            if c == 0x5B {
                current = try parseHeader(root: root)
            } else {
                let key = try parseKey()
                try parseKeyValue(key: key, into: current)
                try expectLineEnd(after: "the value of \(joined(key))")
            }
        }
        return root.build()
    }

    mutating func parseHeader(root: TableBuilder) throws(ConfigError) -> TableBuilder {
        let headerPosition = position
        index += 1
        let isArray = peek == 0x5B
        if isArray { index += 1 }
        skipSpaces()
        let path = try parseKey()
        let close = isArray ? "']]'" : "']'"
        guard peek == 0x5D else {
            throw error("expected \(close) to close the table header [\(joined(path))], found \(found)")
        }
        index += 1
        if isArray {
            guard peek == 0x5D else {
                throw error("expected \(close) to close the array-of-tables header [[\(joined(path))]], found \(found)")
            }
            index += 1
        }
        let table = try openTable(path: path, at: headerPosition, isArray: isArray, root: root)
        headerDepth = path.count
        try expectLineEnd(after: isArray ? "[[\(joined(path))]]" : "[\(joined(path))]")
        return table
    }

    func openTable(path: [KeySegment], at headerPosition: TOMLPosition, isArray: Bool,
                   root: TableBuilder) throws(ConfigError) -> TableBuilder {
        var table = root
        for (offset, segment) in path.dropLast().enumerated() {
            var name: String { joined(path[...offset]) }
            switch table.children[segment.name] {
            case nil:
                let created = TableBuilder(kind: .implicit, position: segment.position)
                table.insert(segment.name, .table(created), at: segment.position)
                table = created
            case .table(let existing):
                if existing.kind == .inline {
                    throw error("\(name) is an inline table (line \(existing.position.line)) and cannot be extended; write it as a [\(name)] section instead",
                                at: segment.position)
                }
                table = existing
            case .tableArray(let array):
                guard let last = array.elements.last else { return table }
                table = last
            case .value(let node):
                throw error("\(name) is already \(Child.value(node).description) defined at line \(node.position.line), not a table",
                            at: segment.position)
            }
        }
        guard let last = path.last else { return table }
        let name = joined(path)
        let existing = table.children[last.name]
        if isArray {
            switch existing {
            case nil:
                let element = TableBuilder(kind: .header, position: headerPosition)
                table.insert(last.name, .tableArray(TableArrayBuilder(element, position: headerPosition)), at: last.position)
                return element
            case .tableArray(let array):
                let element = TableBuilder(kind: .header, position: headerPosition)
                array.elements.append(element)
                return element
            case .some(let other):
                throw error("cannot define [[\(name)]]: \(name) is already \(other.description) (line \(other.position.line))",
                            at: headerPosition)
            }
        }
        switch existing {
        case nil:
            let created = TableBuilder(kind: .header, position: headerPosition)
            table.insert(last.name, .table(created), at: last.position)
            return created
        case .table(let builder) where builder.kind == .implicit:
            builder.kind = .header
            builder.position = headerPosition
            table.keyPositions[last.name] = last.position
            return builder
        case .table(let builder) where builder.kind == .header:
            throw error("table [\(name)] is defined twice; it was first defined at line \(builder.position.line)",
                        at: headerPosition)
        case .some(let other):
            throw error("cannot define table [\(name)]: \(name) is already \(other.description) (line \(other.position.line))",
                        at: headerPosition)
        }
    }

    // MARK: Keys

    /// A possibly dotted key; stops at the first character after it (spaces skipped).
    mutating func parseKey() throws(ConfigError) -> [KeySegment] {
        var segments: [KeySegment] = []
        while true {
            skipSpaces()
            let start = position
            if segments.count == TOMLParser.maximumNesting {
                throw error("a key or table header has more than \(TOMLParser.maximumNesting) dotted parts", at: start)
            }
            let name = try parseSimpleKey()
            segments.append((name, start))
            skipSpaces()
            guard peek == 0x2E else { return segments }
            index += 1
        }
    }

    mutating func parseSimpleKey() throws(ConfigError) -> String {
        guard let c = peek else { throw error("expected a key, found end of file") }
        if c == 0x22 {
            if peek(1) == 0x22 && peek(2) == 0x22 { throw error("a key cannot be a multi-line string") }
            return try parseBasicString()
        }
        if c == 0x27 {
            if peek(1) == 0x27 && peek(2) == 0x27 { throw error("a key cannot be a multi-line string") }
            return try parseLiteralString()
        }
        let start = index
        while let b = peek, isBareKeyByte(b) { index += 1 }
        guard index > start else {
            throw error("expected a key (letters, digits, '_', '-' or a quoted string), found \(found)")
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func parseKeyValue(key: [KeySegment], into target: TableBuilder) throws(ConfigError) {
        skipSpaces()
        guard peek == 0x3D else {
            throw error("expected '=' after key \"\(key.map(\.name).joined(separator: "."))\", found \(found)")
        }
        index += 1
        skipSpaces()
        if headerDepth + keyDepth + depth + key.count > TOMLParser.maximumNesting, let first = key.first {
            throw error("key \(joined(key.prefix(3)))\(key.count > 3 ? "…" : "") nests tables more than \(TOMLParser.maximumNesting) deep "
                + "(its table header, inline tables and dotted parts together); flatten the configuration", at: first.position)
        }
        keyDepth += key.count
        let value = try parseValue()
        keyDepth -= key.count
        var table = target
        for (offset, segment) in key.dropLast().enumerated() {
            switch table.children[segment.name] {
            case nil:
                let created = TableBuilder(kind: .dotted, position: segment.position)
                table.insert(segment.name, .table(created), at: segment.position)
                table = created
            case .table(let existing) where existing.kind == .dotted:
                table = existing
            case .some(let other):
                throw error("cannot add keys to \(joined(key[...offset])) with a dotted key: it is already \(other.description) (line \(other.position.line))",
                            at: segment.position)
            }
        }
        guard let last = key.last else { return }
        if let existing = table.children[last.name] {
            throw error("key \(joined(key)) is defined twice; it was first defined at line \(existing.position.line) as \(existing.description)",
                        at: last.position)
        }
        table.insert(last.name, value, at: last.position)
    }

    // MARK: Values

    mutating func parseValue() throws(ConfigError) -> Child {
        let start = position
        guard let c = peek else { throw error("expected a value, found end of file") }
        switch c {
        case 0x22:
            let text = (peek(1) == 0x22 && peek(2) == 0x22) ? try parseMultilineBasicString() : try parseBasicString()
            return .value(TOMLNode(.string(text), at: start))
        case 0x27:
            let text = (peek(1) == 0x27 && peek(2) == 0x27) ? try parseMultilineLiteralString() : try parseLiteralString()
            return .value(TOMLNode(.string(text), at: start))
        case 0x74, 0x66:
            let word = c == 0x74 ? "true" : "false"
            guard bytes[index...].starts(with: word.utf8), !isTokenByte(peek(word.utf8.count)) else {
                throw error("expected a value; booleans are written true or false (lower case)")
            }
            index += word.utf8.count
            return .value(TOMLNode(.boolean(c == 0x74), at: start))
        case 0x5B:
            return .value(try parseArray())
        case 0x7B:
            return .table(try parseInlineTable())
        case 0x2B, 0x2D, 0x30...0x39, 0x69, 0x6E:
            return .value(TOMLNode(try parseNumberOrDate(), at: start))
        default:
            throw error("expected a value (string, number, boolean, date-time, array or inline table), found \(found)")
        }
    }

    func isTokenByte(_ c: UInt8?) -> Bool {
        guard let c else { return false }
        return isBareKeyByte(c) || c == 0x2E || c == 0x2B || c == 0x3A
    }

    mutating func enterNesting() throws(ConfigError) {
        depth += 1
        if depth > TOMLParser.maximumNesting {
            throw error("arrays and inline tables are nested more than \(TOMLParser.maximumNesting) deep")
        }
    }

    mutating func parseArray() throws(ConfigError) -> TOMLNode {
        let start = position
        try enterNesting()
        index += 1
        var elements: [TOMLNode] = []
        while true {
            try skipBlank()
            if peek == 0x5D { break }
            elements.append(try parseValue().node())
            try skipBlank()
            if peek == 0x2C {
                index += 1
                continue
            }
            guard peek == 0x5D else { throw error("expected ',' or ']' after an array element, found \(found)") }
            break
        }
        index += 1
        depth -= 1
        return TOMLNode(.array(elements), at: start)
    }

    mutating func parseInlineTable() throws(ConfigError) -> TableBuilder {
        let table = TableBuilder(kind: .inline, position: position)
        try enterNesting()
        index += 1
        skipSpaces()
        if peek == 0x7D {
            index += 1
            depth -= 1
            return table
        }
        while true {
            skipSpaces()
            if peek == 0x0A || peek == 0x0D {
                throw error("newlines are not allowed inside an inline table; keep it on one line or use a [table] section")
            }
            let key = try parseKey()
            try parseKeyValue(key: key, into: table)
            skipSpaces()
            if peek == 0x2C {
                index += 1
                skipSpaces()
                if peek == 0x7D { throw error("a trailing comma is not allowed in an inline table") }
                continue
            }
            if peek == 0x7D {
                index += 1
                break
            }
            if peek == 0x0A || peek == 0x0D {
                throw error("newlines are not allowed inside an inline table; keep it on one line or use a [table] section")
            }
            throw error("expected ',' or '}' in inline table, found \(found)")
        }
        depth -= 1
        return table
    }

    // MARK: Strings

    func isForbiddenControl(_ c: UInt8) -> Bool { (c < 0x20 && c != 0x09) || c == 0x7F }

    mutating func parseBasicString() throws(ConfigError) -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek else { throw error("unterminated string: expected '\"' before the end of file") }
            switch c {
            case 0x22:
                index += 1
                return String(decoding: out, as: UTF8.self)
            case 0x5C:
                try parseEscape(into: &out)
            case 0x0A, 0x0D:
                throw error("unterminated string: expected '\"' before the end of line (use \"\"\" for multi-line strings)")
            default:
                if isForbiddenControl(c) {
                    throw error("control character U+\(hex4(UInt32(c))) must be escaped in a string")
                }
                out.append(c)
                index += 1
            }
        }
    }

    mutating func parseEscape(into out: inout [UInt8]) throws(ConfigError) {
        let start = position
        index += 1
        guard let c = peek else { throw error("unterminated string: expected '\"' before the end of file") }
        index += 1
        switch c {
        case 0x62: out.append(0x08)
        case 0x74: out.append(0x09)
        case 0x6E: out.append(0x0A)
        case 0x66: out.append(0x0C)
        case 0x72: out.append(0x0D)
        case 0x22: out.append(0x22)
        case 0x5C: out.append(0x5C)
        case 0x75, 0x55:
            let count = c == 0x75 ? 4 : 8
            var value: UInt32 = 0
            for _ in 0..<count {
                guard let h = peek, let digit = hexValue(h) else {
                    throw error("expected \(count) hexadecimal digits after \\\(c == 0x75 ? "u" : "U")", at: start)
                }
                value = value << 4 | digit
                index += 1
            }
            guard let scalar = Unicode.Scalar(value) else {
                throw error("escape \\\(c == 0x75 ? "u" : "U")\(String(value, radix: 16, uppercase: true)) is not a Unicode scalar value", at: start)
            }
            out.append(contentsOf: Array(String(Character(scalar)).utf8))
        default:
            index -= 1
            throw error("invalid escape sequence \\\(found.trimmingCharacters("'")); valid escapes are \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX",
                        at: start)
        }
    }

    func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case 0x30...0x39: UInt32(c - 0x30)
        case 0x41...0x46: UInt32(c - 0x41 + 10)
        case 0x61...0x66: UInt32(c - 0x61 + 10)
        default: nil
        }
    }

    mutating func parseLiteralString() throws(ConfigError) -> String {
        index += 1
        let start = index
        while true {
            guard let c = peek else { throw error("unterminated string: expected \"'\" before the end of file") }
            if c == 0x27 { break }
            if c == 0x0A || c == 0x0D {
                throw error("unterminated string: expected \"'\" before the end of line (use ''' for multi-line strings)")
            }
            if isForbiddenControl(c) {
                throw error("control character U+\(hex4(UInt32(c))) is not allowed in a literal string")
            }
            index += 1
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        index += 1
        return text
    }

    /// Consumes a run of `quote` bytes inside a multi-line string; returns true when the string ended.
    mutating func quoteRun(_ quote: UInt8, into out: inout [UInt8]) throws(ConfigError) -> Bool {
        var count = 0
        while peek == quote {
            count += 1
            index += 1
        }
        if count < 3 {
            out.append(contentsOf: repeatElement(quote, count: count))
            return false
        }
        if count > 5 {
            throw error("too many quotes: at most two quotes may stand just before the closing delimiter")
        }
        out.append(contentsOf: repeatElement(quote, count: count - 3))
        return true
    }

    mutating func parseMultilineBasicString() throws(ConfigError) -> String {
        index += 3
        _ = try skipNewline()
        var out: [UInt8] = []
        while true {
            guard let c = peek else { throw error("unterminated multi-line string: expected '\"\"\"' before the end of file") }
            switch c {
            case 0x22:
                if try quoteRun(0x22, into: &out) { return String(decoding: out, as: UTF8.self) }
            case 0x5C:
                // A backslash followed by optional spaces and a newline trims all whitespace after it.
                var k = index + 1
                while k < bytes.count && (bytes[k] == 0x20 || bytes[k] == 0x09) { k += 1 }
                if k < bytes.count && (bytes[k] == 0x0A || (bytes[k] == 0x0D && k + 1 < bytes.count && bytes[k + 1] == 0x0A)) {
                    index = k
                    while let w = peek, w == 0x20 || w == 0x09 || w == 0x0A || w == 0x0D {
                        if w == 0x0D && peek(1) != 0x0A { throw error("a carriage return must be followed by a line feed") }
                        bump()
                    }
                } else {
                    try parseEscape(into: &out)
                }
            case 0x0A:
                out.append(c)
                bump()
            case 0x0D:
                guard peek(1) == 0x0A else { throw error("a carriage return must be followed by a line feed") }
                out.append(contentsOf: [0x0D, 0x0A])
                index += 1
                bump()
            default:
                if isForbiddenControl(c) {
                    throw error("control character U+\(hex4(UInt32(c))) must be escaped in a string")
                }
                out.append(c)
                index += 1
            }
        }
    }

    mutating func parseMultilineLiteralString() throws(ConfigError) -> String {
        index += 3
        _ = try skipNewline()
        var out: [UInt8] = []
        while true {
            guard let c = peek else { throw error("unterminated multi-line string: expected \"'''\" before the end of file") }
            switch c {
            case 0x27:
                if try quoteRun(0x27, into: &out) { return String(decoding: out, as: UTF8.self) }
            case 0x0A:
                out.append(c)
                bump()
            case 0x0D:
                guard peek(1) == 0x0A else { throw error("a carriage return must be followed by a line feed") }
                out.append(contentsOf: [0x0D, 0x0A])
                index += 1
                bump()
            default:
                if isForbiddenControl(c) {
                    throw error("control character U+\(hex4(UInt32(c))) is not allowed in a literal string")
                }
                out.append(c)
                index += 1
            }
        }
    }

    // MARK: Numbers and dates

    mutating func parseNumberOrDate() throws(ConfigError) -> TOMLValue {
        let start = position
        let tokenStart = index
        while isTokenByte(peek) { index += 1 }
        // A date followed by a space and a time is one value: 1979-05-27 07:32:00Z.
        if index - tokenStart == 10, bytes[tokenStart + 4] == 0x2D, peek == 0x20,
           let a = peek(1), let b = peek(2), isDigit(a), isDigit(b), peek(3) == 0x3A {
            index += 1
            while isTokenByte(peek) { index += 1 }
        }
        let token = Array(bytes[tokenStart..<index])
        let text = String(decoding: token, as: UTF8.self)
        let looksLikeDate = token.count >= 5 && token[0...3].allSatisfy(isDigit) && token[4] == 0x2D
        let looksLikeTime = token.count >= 3 && isDigit(token[0]) && isDigit(token[1]) && token[2] == 0x3A
        if looksLikeDate || looksLikeTime {
            guard let value = DateTimeSyntax.parse(token) else {
                throw error("invalid date-time \(text); expected e.g. 1979-05-27, 07:32:00, 1979-05-27T07:32:00 or 1979-05-27T07:32:00Z with valid field values",
                            at: start)
            }
            return value
        }
        guard let value = NumberSyntax.parse(token) else {
            throw error("invalid number \(text); expected an integer (42, 0x2A, 0o52, 0b101010, 1_000) or a float (3.14, 1e6, inf, nan)",
                        at: start)
        }
        if case .failure(let problem) = value { throw error("\(problem.message): \(text)", at: start) }
        if case .success(let parsed) = value { return parsed }
        throw error("invalid number \(text)", at: start)
    }
}

extension String {
    fileprivate func trimmingCharacters(_ c: Character) -> String {
        var s = Substring(self)
        while s.first == c { s.removeFirst() }
        while s.last == c { s.removeLast() }
        return String(s)
    }
}

/// Integer and float literals.
enum NumberSyntax {
    /// nil when the token is not a number at all; `.failure` when it is one but out of range.
    static func parse(_ token: [UInt8]) -> Result<TOMLValue, NumberError>? {
        var body = token[...]
        var negative = false
        var signed = false
        if let first = body.first, first == 0x2B || first == 0x2D {
            negative = first == 0x2D
            signed = true
            body = body.dropFirst()
        }
        let word = String(decoding: body, as: UTF8.self)
        if word == "inf" { return .success(.float(negative ? -.infinity : .infinity)) }
        if word == "nan" { return .success(.float(negative ? -.nan : .nan)) }
        if body.count > 2, body.first == 0x30, let radixMark = body.dropFirst().first,
           radixMark == 0x78 || radixMark == 0x6F || radixMark == 0x62 {
            guard !signed else { return nil }
            let radix = radixMark == 0x78 ? 16 : radixMark == 0x6F ? 8 : 2
            guard let digits = digitsWithUnderscores(body.dropFirst(2), radix: radix) else { return nil }
            guard let value = Int64(digits, radix: radix) else { return .failure(NumberError("integer out of the 64-bit range")) }
            return .success(.integer(value))
        }
        // Split into integer part, fraction and exponent.
        var intPart = body
        var fraction: ArraySlice<UInt8>?
        var exponent: ArraySlice<UInt8>?
        if let e = body.firstIndex(where: { $0 == 0x65 || $0 == 0x45 }) {
            exponent = body[(e + 1)...]
            intPart = body[..<e]
        }
        if let dot = intPart.firstIndex(of: 0x2E) {
            fraction = intPart[(dot + 1)...]
            intPart = intPart[..<dot]
        }
        guard let intDigits = digitsWithUnderscores(intPart, radix: 10) else { return nil }
        if intDigits.count > 1 && intDigits.hasPrefix("0") { return nil }
        var literal = (negative ? "-" : "") + intDigits
        if fraction == nil && exponent == nil {
            guard let value = Int64(literal) else { return .failure(NumberError("integer out of the 64-bit range")) }
            return .success(.integer(value))
        }
        if let fraction {
            guard let digits = digitsWithUnderscores(fraction, radix: 10) else { return nil }
            literal += "." + digits
        }
        if var exponent {
            var sign = ""
            if let first = exponent.first, first == 0x2B || first == 0x2D {
                sign = first == 0x2D ? "-" : "+"
                exponent = exponent.dropFirst()
            }
            guard let digits = digitsWithUnderscores(exponent, radix: 10) else { return nil }
            literal += "e" + sign + digits
        }
        guard let value = Double(literal) else { return nil }
        guard value.isFinite else { return .failure(NumberError("float out of range")) }
        return .success(.float(value))
    }

    /// The digits without underscores, or nil when empty, not all digits of `radix`, or when an
    /// underscore is not between two digits.
    static func digitsWithUnderscores(_ s: ArraySlice<UInt8>, radix: Int) -> String? {
        guard let first = s.first, let last = s.last, first != 0x5F, last != 0x5F else { return nil }
        var out: [UInt8] = []
        var previousUnderscore = false
        for c in s {
            if c == 0x5F {
                if previousUnderscore { return nil }
                previousUnderscore = true
                continue
            }
            previousUnderscore = false
            let valid: Bool
            switch radix {
            case 2: valid = c == 0x30 || c == 0x31
            case 8: valid = c >= 0x30 && c <= 0x37
            case 16: valid = isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
            default: valid = isDigit(c)
            }
            guard valid else { return nil }
            out.append(c)
        }
        return String(decoding: out, as: UTF8.self)
    }
}

struct NumberError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}


/// RFC 3339 dates and times as TOML restricts them.
enum DateTimeSyntax {
    static func parse(_ t: [UInt8]) -> TOMLValue? {
        if t.count >= 3 && t[2] == 0x3A {
            guard let (time, end) = parseTime(t, from: 0), end == t.count else { return nil }
            return .localTime(time)
        }
        guard let date = parseDate(t) else { return nil }
        if t.count == 10 { return .localDate(date) }
        guard t.count > 11, t[10] == 0x54 || t[10] == 0x74 || t[10] == 0x20,
              let (time, end) = parseTime(t, from: 11) else { return nil }
        if end == t.count { return .localDateTime(date, time) }
        if end + 1 == t.count && (t[end] == 0x5A || t[end] == 0x7A) {
            return .offsetDateTime(date, time, offsetMinutes: 0)
        }
        guard end + 6 == t.count, t[end] == 0x2B || t[end] == 0x2D, t[end + 3] == 0x3A,
              let hours = number(t, end + 1, 2), let minutes = number(t, end + 4, 2),
              hours < 24, minutes < 60 else { return nil }
        let offset = (hours * 60 + minutes) * (t[end] == 0x2D ? -1 : 1)
        return .offsetDateTime(date, time, offsetMinutes: offset)
    }

    static func number(_ t: [UInt8], _ start: Int, _ count: Int) -> Int? {
        guard start + count <= t.count else { return nil }
        var value = 0
        for k in start..<(start + count) {
            guard isDigit(t[k]) else { return nil }
            value = value * 10 + Int(t[k] - 0x30)
        }
        return value
    }

    static func parseDate(_ t: [UInt8]) -> TOMLDate? {
        guard t.count >= 10, let year = number(t, 0, 4), t[4] == 0x2D, let month = number(t, 5, 2),
              t[7] == 0x2D, let day = number(t, 8, 2), (1...12).contains(month) else { return nil }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...days).contains(day) else { return nil }
        return TOMLDate(year: year, month: month, day: day)
    }

    static func parseTime(_ t: [UInt8], from start: Int) -> (TOMLTime, Int)? {
        guard let hour = number(t, start, 2), start + 2 < t.count, t[start + 2] == 0x3A,
              let minute = number(t, start + 3, 2), start + 5 < t.count, t[start + 5] == 0x3A,
              let second = number(t, start + 6, 2), hour < 24, minute < 60, second <= 60 else { return nil }
        var end = start + 8
        var nanosecond = 0
        if end < t.count && t[end] == 0x2E {
            end += 1
            var digits = 0
            while end < t.count && isDigit(t[end]) {
                if digits < 9 { nanosecond = nanosecond * 10 + Int(t[end] - 0x30) }
                digits += 1
                end += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 9) { nanosecond *= 10 }
        }
        return (TOMLTime(hour: hour, minute: minute, second: second, nanosecond: nanosecond), end)
    }
}
