import CloudSyncCore
import Foundation

/// A parsed `Content-Range` header (RFC 9110 §14.4): `bytes first-last/complete`, `bytes first-last/*`,
/// or `bytes */complete` (the unsatisfied-range form sent with 416).
public struct ContentRange: Sendable, Hashable {
    /// The bytes carried, or nil for the unsatisfied form.
    public var range: ClosedRange<Int64>?
    /// The full size of the representation, or nil for `*`.
    public var total: Int64?

    public init(range: ClosedRange<Int64>?, total: Int64?) {
        self.range = range
        self.total = total
    }

    /// Parses `text`; nil when it is malformed (including last < first, or last ≥ total).
    public init?(_ text: String) {
        let t = ASCII.trimmed(text)
        guard ASCII.hasPrefixIgnoringCase(t, "bytes ") else { return nil }
        let spec = ASCII.trimmed(t.dropFirst(6))
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        if parts[1] == "*" {
            total = nil
        } else {
            guard let n = Self.number(parts[1]) else { return nil }
            total = n
        }
        if parts[0] == "*" {
            guard total != nil else { return nil }
            range = nil
            return
        }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Self.number(bounds[0]), let last = Self.number(bounds[1]),
              first <= last else { return nil }
        if let total, last >= total { return nil }
        range = first...last
    }

    private static func number(_ s: Substring) -> Int64? {
        guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(s)
    }
}

