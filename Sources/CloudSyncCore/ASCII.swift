/// Byte-level helpers for protocol text (HTTP field names and values), which is ASCII by definition.
/// They avoid Foundation's Unicode-aware string routines, which cost microseconds per call on Linux and sit
/// on the per-request path of the transport and the server.
public enum ASCII {
    /// Whether `a` and `b` are equal with ASCII letters compared case-insensitively; other bytes must match exactly.
    @inlinable
    public static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                guard x.count == y.count else { return false }
                for i in 0 ..< x.count where x[i] != y[i] {
                    guard lowered(x[i]) == lowered(y[i]) else { return false }
                }
                return true
            }
        }
    }

    /// `bytes` without leading and trailing space, tab, CR and LF: HTTP's optional whitespace (RFC 9110 §5.6.3)
    /// and XML's white space (XML 1.0 §2.3).
    @inlinable
    public static func trimmingWhitespace<C: BidirectionalCollection>(_ bytes: C) -> C.SubSequence where C.Element == UInt8 {
        var start = bytes.startIndex, end = bytes.endIndex
        while start != end, isWhitespace(bytes[start]) { bytes.formIndex(after: &start) }
        while end != start {
            let last = bytes.index(before: end)
            guard isWhitespace(bytes[last]) else { break }
            end = last
        }
        return bytes[start ..< end]
    }

    /// `text` without leading and trailing space, tab, CR and LF.
    @inlinable
    public static func trimmed(_ text: some StringProtocol) -> String {
        String(decoding: trimmingWhitespace(Array(text.utf8)), as: UTF8.self)
    }

    /// Whether `text` starts with `prefix`, ASCII letters compared case-insensitively.
    @inlinable
    public static func hasPrefixIgnoringCase(_ text: some StringProtocol, _ prefix: String) -> Bool {
        var count = 0
        for (a, b) in zip(text.utf8, prefix.utf8) {
            guard lowered(a) == lowered(b) else { return false }
            count += 1
        }
        return count == prefix.utf8.count
    }

    @inlinable @inline(__always)
    public static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    @inlinable @inline(__always)
    public static func lowered(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}
