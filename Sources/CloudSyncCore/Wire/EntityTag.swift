import Foundation

/// An HTTP entity tag (RFC 9110 §8.8.3): `"opaque"` (strong) or `W/"opaque"` (weak). The one place that decides
/// which validators may go into `If-Range` (client), which ETag a download keeps (engine) and whether a player's
/// `If-Range` still names a track (server).
public struct EntityTag: Sendable, Hashable, CustomStringConvertible {
    /// The characters between the quotes.
    public var opaque: String
    public var isWeak: Bool

    public init(opaque: String, isWeak: Bool = false) {
        self.opaque = opaque
        self.isWeak = isWeak
    }

    /// Parses one entity-tag; surrounding white space is ignored. Nil for anything else: an unquoted token, a
    /// lone quote, a quote or a control character inside the tag, or a list of tags.
    public init?(parsing text: String) {
        let t = ASCII.trimmed(text)
        var body = Substring(t)
        let weak = body.hasPrefix("W/")
        if weak { body = body.dropFirst(2) }
        guard body.utf8.count >= 2, body.hasPrefix("\""), body.hasSuffix("\"") else { return nil }
        let inner = body.dropFirst().dropLast()
        // etagc = %x21 / %x23-7E / obs-text
        guard inner.utf8.allSatisfy({ $0 == 0x21 || (0x23...0x7E).contains($0) || $0 >= 0x80 }) else { return nil }
        opaque = String(inner)
        isWeak = weak
    }

    /// The header form: `"opaque"` or `W/"opaque"`.
    public var description: String { (isWeak ? "W/" : "") + "\"" + opaque + "\"" }

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong and the same opaque tag. What `If-Range` uses.
    public func strongMatches(_ other: EntityTag) -> Bool { !isWeak && !other.isWeak && opaque == other.opaque }

    /// Weak comparison: the same opaque tag, whether either is weak or not.
    public func weakMatches(_ other: EntityTag) -> Bool { opaque == other.opaque }

    /// Whether two `ETag` header values received for one file name the same version (the engine's check between
    /// ranges of one download): weak comparison, since Apache reports `W/"x"` for a second after a write and
    /// then `"x"`. Values that are not entity tags (servers that send them unquoted) compare as text, a `W/`
    /// prefix ignored.
    public static func sameVersion(_ a: String, _ b: String) -> Bool {
        if let x = EntityTag(parsing: a), let y = EntityTag(parsing: b) { return x.weakMatches(y) }
        func plain(_ t: String) -> Substring { t.hasPrefix("W/") ? t.dropFirst(2) : Substring(t) }
        return plain(a) == plain(b)
    }

    /// `text` as a validator `If-Range` may carry (RFC 9110 §13.1.5: a strong entity tag; a weak one would make
    /// every range come back as 200), or nil: weak, unquoted or malformed tags are never sent.
    public static func ifRangeValidator(_ text: String) -> String? {
        guard let tag = EntityTag(parsing: text), !tag.isWeak else { return nil }
        return tag.description
    }

    /// Whether a received `If-Range` value still names the representation whose strong tag is `current` and whose
    /// `Last-Modified` is `lastModified` (RFC 9110 §13.1.5): a strong tag must match strongly, a weak one never
    /// matches, and a date must be exactly the Last-Modified date sent (an HTTP-date it parses to the same second).
    public static func ifRangeMatches(_ value: String, current: EntityTag, lastModified: Date) -> Bool {
        let v = ASCII.trimmed(value)
        if v.hasPrefix("\"") || v.hasPrefix("W/") {
            guard let tag = EntityTag(parsing: v) else { return false }
            return tag.strongMatches(current)
        }
        return v == HTTPDate.format(lastModified)
    }
}
