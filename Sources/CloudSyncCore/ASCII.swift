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

    /// `bytes` without leading and trailing spaces and tabs (HTTP's optional whitespace, RFC 9110 §5.6.3).
    @inlinable
    public static func trimmingSpaces<C: BidirectionalCollection>(_ bytes: C) -> C.SubSequence where C.Element == UInt8 {
        var start = bytes.startIndex, end = bytes.endIndex
        while start != end, bytes[start] == 0x20 || bytes[start] == 0x09 { bytes.formIndex(after: &start) }
        while end != start {
            let last = bytes.index(before: end)
            guard bytes[last] == 0x20 || bytes[last] == 0x09 else { break }
            end = last
        }
        return bytes[start ..< end]
    }

    @inlinable @inline(__always)
    public static func lowered(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}
