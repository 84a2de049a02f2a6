import Foundation

/// rclone-style filter rules over remote paths (relative to the remote's root, `/`-separated), plus size and age
/// limits. Pure: no file system, no network.
///
/// Patterns (rclone's glob syntax, https://rclone.org/filtering/):
/// - `*` any run of characters but `/`; `**` any run including `/`; `?` one character but `/`;
/// - `[abc]`, `[a-z]`, `[!a-z]` or `[^a-z]` (never `/`), with `\]`, `\-`, `\\` inside and the classes `\d \D \s
///   \S \w \W` and `[:alpha:]`-style POSIX classes; `{a,b,c}` alternatives (nested allowed); `\c` a literal `c`;
/// - a pattern starting with `/` is anchored at the remote's root; otherwise it matches the end of the path from
///   a component boundary (`file.mp3` matches `file.mp3` and `Album/file.mp3`, not `afile.mp3`);
/// - a pattern ending in `/` is a directory rule: `- dir/` excludes every file under a matching folder; `+ dir/`
///   (which only steers rclone's directory traversal) matches no file;
/// - rclone's `{{regexp}}` is refused with an error.
///
/// Rules apply in order and the first that matches decides; a path no rule matches is included. As in rclone, the
/// flags are ordered by kind — `--include`, then `--exclude`, then `--filter-from` files — and any `--include`
/// adds a final `- **`.
public struct PathFilter: Sendable, Hashable {
    /// One compiled `+`/`-` rule.
    public struct Rule: Sendable, Hashable {
        public var include: Bool
        public var pattern: String
        let glob: Glob
    }

    public var rules: [Rule]
    /// Files smaller than this are excluded (nil: no limit).
    public var minSize: Int64?
    /// Files larger than this are excluded.
    public var maxSize: Int64?
    /// Files whose remote modification time is older than this many seconds are excluded.
    public var maxAge: TimeInterval?
    /// Files modified more recently than this many seconds ago are excluded.
    public var minAge: TimeInterval?
    public var ignoreCase: Bool

    /// Includes everything.
    public static let everything = PathFilter()

    public init(rules: [Rule] = [], minSize: Int64? = nil, maxSize: Int64? = nil, maxAge: TimeInterval? = nil,
                minAge: TimeInterval? = nil, ignoreCase: Bool = false) {
        self.rules = rules
        self.minSize = minSize
        self.maxSize = maxSize
        self.maxAge = maxAge
        self.minAge = minAge
        self.ignoreCase = ignoreCase
    }

    /// Builds the rule list the way rclone orders its flags: `include` patterns, `exclude` patterns, then the lines
    /// of `filterLines` (`+ pattern`, `- pattern`, `!` clears the rules so far, `#`/`;` comments, blank lines); an
    /// include adds a final `- **`. Throws ``PathFilterError`` naming the pattern (and its line) that is wrong.
    public init(include: [String] = [], exclude: [String] = [], filterLines: [(source: String, line: Int, text: String)] = [],
                ignoreCase: Bool = false, minSize: Int64? = nil, maxSize: Int64? = nil, maxAge: TimeInterval? = nil,
                minAge: TimeInterval? = nil) throws(PathFilterError) {
        var rules: [Rule] = []
        for pattern in include { rules.append(try Self.rule(include: true, pattern, ignoreCase: ignoreCase, at: "--include")) }
        for pattern in exclude { rules.append(try Self.rule(include: false, pattern, ignoreCase: ignoreCase, at: "--exclude")) }
        for (source, number, raw) in filterLines {
            let text = raw.trimmingCharacters(in: .whitespaces)
            if text.isEmpty || text.hasPrefix("#") || text.hasPrefix(";") { continue }
            if text == "!" {
                rules.removeAll()
                continue
            }
            let at = "\(source):\(number)"
            guard text.count >= 2, text.hasPrefix("+ ") || text.hasPrefix("- ") else {
                throw PathFilterError("\(at): a filter line is '+ PATTERN', '- PATTERN' or '!', got '\(raw)'")
            }
            rules.append(try Self.rule(include: text.hasPrefix("+"), String(text.dropFirst(2)), ignoreCase: ignoreCase, at: at))
        }
        if !include.isEmpty { rules.append(try Self.rule(include: false, "**", ignoreCase: ignoreCase, at: "--include")) }
        self.init(rules: rules, minSize: minSize, maxSize: maxSize, maxAge: maxAge, minAge: minAge, ignoreCase: ignoreCase)
    }

    static func rule(include: Bool, _ pattern: String, ignoreCase: Bool, at: String) throws(PathFilterError) -> Rule {
        do {
            return Rule(include: include, pattern: pattern, glob: try Glob(pattern, ignoreCase: ignoreCase))
        } catch {
            throw PathFilterError("\(at): \(error.message) in the pattern '\(pattern)'")
        }
    }

    /// Whether this filter keeps everything (no rule, no limit).
    public var isEmpty: Bool { rules.isEmpty && minSize == nil && maxSize == nil && maxAge == nil && minAge == nil }

    /// Whether the file at `path` (relative to the remote's root) is kept.
    public func includes(_ path: String, size: Int64, modified: Date, now: Date = Date()) -> Bool {
        if let minSize, size < minSize { return false }
        if let maxSize, size > maxSize { return false }
        let age = now.timeIntervalSince(modified)
        if let maxAge, age > maxAge { return false }
        if let minAge, age < minAge { return false }
        return includes(path)
    }

    /// Whether `path` passes the rules (size and age aside).
    public func includes(_ path: String) -> Bool {
        if rules.isEmpty { return true }
        let trimmed = path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        let subject = Array((ignoreCase ? trimmed.lowercased() : trimmed).unicodeScalars)
        for rule in rules {
            if rule.glob.directoryRule {
                // `+ dir/` steers rclone's traversal only; `- dir/` excludes the files under a matching folder.
                guard !rule.include else { continue }
                var end = subject.count
                while let slash = subject[..<end].lastIndex(of: "/") {
                    if rule.glob.matches(subject[..<slash]) { return false }
                    end = slash
                }
            } else if rule.glob.matches(subject[...]) {
                return rule.include
            }
        }
        return true
    }
}

/// A pattern that cannot be compiled, or a filter line that is not a rule.
public struct PathFilterError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A compiled glob: one token list per alternative (alternatives are expanded), matched with memoisation so
/// `*` and `**` never backtrack exponentially.
struct Glob: Sendable, Hashable {
    enum Token: Sendable, Hashable {
        case literal(Unicode.Scalar)
        /// `?`: one scalar but `/`.
        case one
        /// `*`: any run of scalars but `/`.
        case star
        /// `**`: any run of scalars.
        case globstar
        /// A character class (never matches `/`).
        case set(CharacterSet, negated: Bool)
    }

    /// Alternatives of the pattern, each a token list.
    let alternatives: [[Token]]
    let anchored: Bool
    let directoryRule: Bool

    /// At most this many alternatives after expanding `{…}` (a pattern like `{a,b}{c,d}…` grows fast).
    static let maxAlternatives = 1024

    init(_ pattern: String, ignoreCase: Bool) throws(PathFilterError) {
        var text = ignoreCase ? pattern.lowercased() : pattern
        if text.contains("{{") { throw PathFilterError("regular expressions ({{...}}) are not supported; use a glob") }
        guard !text.isEmpty else { throw PathFilterError("an empty pattern matches nothing") }
        anchored = text.hasPrefix("/")
        if anchored { text.removeFirst() }
        directoryRule = text.hasSuffix("/") && !text.hasSuffix("\\/")
        if directoryRule { text.removeLast() }
        var parser = Parser(scalars: Array(text.unicodeScalars))
        let alternatives = try parser.sequence(closing: nil)
        guard parser.at == parser.scalars.count else { throw PathFilterError("an unmatched '}'") }
        self.alternatives = alternatives
    }

    /// Whether the glob matches `subject` — the whole of it when anchored, else from its start or from just after
    /// a `/`.
    func matches(_ subject: ArraySlice<Unicode.Scalar>) -> Bool {
        let s = Array(subject)
        for tokens in alternatives {
            if anchored {
                if Self.match(tokens, s, from: 0) { return true }
                continue
            }
            var start = 0
            while true {
                if Self.match(tokens, s, from: start) { return true }
                guard let slash = s[start...].firstIndex(of: "/") else { break }
                start = slash + 1
            }
        }
        return false
    }

    /// Whether `tokens` match `s[from...]` entirely. Dynamic programming over (token, position): O(tokens × length).
    static func match(_ tokens: [Token], _ s: [Unicode.Scalar], from: Int) -> Bool {
        let n = s.count
        // reach[j]: the tokens so far can end just before position j.
        var reach = [Bool](repeating: false, count: n + 2)
        reach[from] = true
        for token in tokens {
            var next = [Bool](repeating: false, count: n + 2)
            switch token {
            case .literal(let c):
                for j in from ..< n where reach[j] && s[j] == c { next[j + 1] = true }
            case .one:
                for j in from ..< n where reach[j] && s[j] != "/" { next[j + 1] = true }
            case .set(let set, let negated):
                for j in from ..< n where reach[j] && s[j] != "/" && set.contains(s[j]) != negated { next[j + 1] = true }
            case .star:
                var open = false
                for j in from ... n {
                    if reach[j] { open = true }
                    if open { next[j] = true }
                    if j < n && s[j] == "/" { open = false }
                }
            case .globstar:
                var open = false
                for j in from ... n {
                    if reach[j] { open = true }
                    if open { next[j] = true }
                }
            }
            reach = next
        }
        return reach[n]
    }

    /// Recursive descent over the pattern's scalars.
    struct Parser {
        let scalars: [Unicode.Scalar]
        var at = 0

        /// Alternatives of a sequence up to `closing` (`}` inside braces; nil at the top). Commas separate
        /// alternatives only inside braces.
        mutating func sequence(closing: Unicode.Scalar?) throws(PathFilterError) -> [[Token]] {
            var alternatives: [[Token]] = [[]]
            var branches: [[Token]] = []
            func append(_ token: Token) { alternatives = alternatives.map { $0 + [token] } }
            while at < scalars.count {
                let c = scalars[at]
                if let closing, c == closing { break }
                if closing != nil, c == "," {
                    at += 1
                    branches += alternatives
                    alternatives = [[]]
                    continue
                }
                at += 1
                switch c {
                case "*":
                    if at < scalars.count, scalars[at] == "*" {
                        at += 1
                        append(.globstar)
                    } else {
                        append(.star)
                    }
                case "?":
                    append(.one)
                case "[":
                    append(try characterClass())
                case "{":
                    let inner = try sequence(closing: "}")
                    guard at < scalars.count, scalars[at] == "}" else { throw PathFilterError("an unclosed '{'") }
                    at += 1
                    var product: [[Token]] = []
                    for prefix in alternatives { for tail in inner { product.append(prefix + tail) } }
                    guard product.count <= Glob.maxAlternatives else {
                        throw PathFilterError("more than \(Glob.maxAlternatives) alternatives")
                    }
                    alternatives = product
                case "}":
                    throw PathFilterError("an unmatched '}'")
                case "\\":
                    guard at < scalars.count else { throw PathFilterError("a '\\' at the end") }
                    let escaped = scalars[at]
                    at += 1
                    if let named = Self.named(escaped) { append(.set(named.set, negated: named.negated)) } else { append(.literal(escaped)) }
                default:
                    append(.literal(c))
                }
            }
            let all = branches + alternatives
            guard all.count <= Glob.maxAlternatives else { throw PathFilterError("more than \(Glob.maxAlternatives) alternatives") }
            return all
        }

        /// `[...]` after its `[`.
        mutating func characterClass() throws(PathFilterError) -> Token {
            var set = CharacterSet()
            var negated = false
            if at < scalars.count, scalars[at] == "!" || scalars[at] == "^" {
                negated = true
                at += 1
            }
            var first = true
            while true {
                guard at < scalars.count else { throw PathFilterError("an unclosed '['") }
                var c = scalars[at]
                if c == "]" && !first { at += 1; break }
                first = false
                at += 1
                if c == "[", at < scalars.count, scalars[at] == ":" {
                    guard let end = Self.find(":]", in: scalars, from: at + 1) else { throw PathFilterError("an unclosed '[:'") }
                    let name = String(String.UnicodeScalarView(scalars[(at + 1) ..< end]))
                    guard let posix = Self.posix(name) else { throw PathFilterError("an unknown class [:\(name):]") }
                    set.formUnion(posix)
                    at = end + 2
                    continue
                }
                if c == "\\" {
                    guard at < scalars.count else { throw PathFilterError("an unclosed '['") }
                    c = scalars[at]
                    at += 1
                    if let named = Self.named(c) {
                        set.formUnion(named.negated ? named.set.inverted : named.set)
                        continue
                    }
                }
                if at + 1 < scalars.count, scalars[at] == "-", scalars[at + 1] != "]" {
                    var hi = scalars[at + 1]
                    at += 2
                    if hi == "\\" {
                        guard at < scalars.count else { throw PathFilterError("an unclosed '['") }
                        hi = scalars[at]
                        at += 1
                    }
                    guard c.value <= hi.value else { throw PathFilterError("a range [\(c)-\(hi)] that runs backwards") }
                    set.insert(charactersIn: c ... hi)
                } else {
                    set.insert(c)
                }
            }
            return .set(set, negated: negated)
        }

        static func find(_ needle: String, in scalars: [Unicode.Scalar], from: Int) -> Int? {
            let n = Array(needle.unicodeScalars)
            var i = from
            while i + n.count <= scalars.count {
                if Array(scalars[i ..< i + n.count]) == n { return i }
                i += 1
            }
            return nil
        }

        /// `\d \D \s \S \w \W` (ASCII, as in Go's regexp).
        static func named(_ c: Unicode.Scalar) -> (set: CharacterSet, negated: Bool)? {
            switch c {
            case "d": (CharacterSet(charactersIn: "0123456789"), false)
            case "D": (CharacterSet(charactersIn: "0123456789"), true)
            case "s": (CharacterSet(charactersIn: " \t\n\r\u{0B}\u{0C}"), false)
            case "S": (CharacterSet(charactersIn: " \t\n\r\u{0B}\u{0C}"), true)
            case "w": (CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"), false)
            case "W": (CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"), true)
            default: nil
            }
        }

        /// POSIX classes, ASCII as in Go's regexp.
        static func posix(_ name: String) -> CharacterSet? {
            let lower = "abcdefghijklmnopqrstuvwxyz", upper = lower.uppercased(), digit = "0123456789"
            switch name {
            case "alnum": return CharacterSet(charactersIn: lower + upper + digit)
            case "alpha": return CharacterSet(charactersIn: lower + upper)
            case "digit": return CharacterSet(charactersIn: digit)
            case "lower": return CharacterSet(charactersIn: lower)
            case "upper": return CharacterSet(charactersIn: upper)
            case "space": return CharacterSet(charactersIn: " \t\n\r\u{0B}\u{0C}")
            case "xdigit": return CharacterSet(charactersIn: digit + "abcdefABCDEF")
            case "punct": return CharacterSet(charactersIn: "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
            case "blank": return CharacterSet(charactersIn: " \t")
            default: return nil
            }
        }
    }
}
